package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// snapshotThrough is the log position the namespace's newest snapshot covers (0: none).
func snapshotThrough(t *testing.T, tn *testNode, ns string) uint64 {
	t.Helper()
	info, err := tn.node.snapshotInfo(ctxT(t, 5*time.Second), ns)
	if err != nil {
		t.Fatal(err)
	}
	if info == nil {
		return 0
	}
	through, _, _, err := snapshotMeta(info)
	if err != nil {
		t.Fatal(err)
	}
	return through
}

// settleCompactions waits until every compaction this node started on ns has ended.
func settleCompactions(tn *testNode, ns string) {
	time.Sleep(300 * time.Millisecond) // the follower hands the last records on, and may start one
	tn.node.logsMu.Lock()
	var logs []*nsLog
	for l := range tn.node.logs {
		if l.ns == ns {
			logs = append(logs, l)
		}
	}
	tn.node.logsMu.Unlock()
	for _, l := range logs {
		l.compactions.Wait()
	}
}

// A document larger than compactRatioFloor is compacted only once the log since its
// snapshot holds a compactSnapshotRatio-th of the snapshot's bytes, whatever the record
// count: with CompactAfterRecords 20, a 320 KiB document written to in 1 KiB records keeps
// its snapshot over 60 records (60 KiB, below a quarter), and gets a new one within the
// next 40 (past it). Everything written is there when another node loads the namespace.
func TestCluster_LargeDocumentCompactsByItsSize(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, func(c *Config) { c.CompactAfterRecords = 20 })
	tn := tc.nodes[0]
	ns := tn.create(t)
	l := tn.open(t, ns)
	write := func(i int, value string) {
		t.Helper()
		if _, err := l.WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, fmt.Sprintf("k%d", i), value)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	small := strings.Repeat("s", 1<<10)
	write(0, strings.Repeat("L", 320<<10))
	for i := 1; i <= 20; i++ { // the first compaction: by count (the snapshot this node knows is small)
		write(i, small)
	}
	eventually(t, 20*time.Second, "the first snapshot", func() error {
		if snapshotThrough(t, tn, ns) == 0 {
			return fmt.Errorf("none yet")
		}
		return nil
	})
	settleCompactions(tn, ns)
	first := snapshotThrough(t, tn, ns)
	for i := 21; i <= 80; i++ {
		write(i, small)
	}
	settleCompactions(tn, ns)
	if got := snapshotThrough(t, tn, ns); got != first {
		t.Fatalf("the snapshot moved from %d to %d after 60 KiB of writes to a document of 320 KiB", first, got)
	}
	for i := 81; i <= 120; i++ {
		write(i, small)
	}
	eventually(t, 20*time.Second, "a snapshot once the log holds a quarter of the document", func() error {
		if got := snapshotThrough(t, tn, ns); got == first {
			return fmt.Errorf("still the snapshot through %d", got)
		}
		return nil
	})
	n := notes(t, tc.nodes[2].open(t, ns))
	for i := 0; i <= 120; i++ {
		if _, ok := n[fmt.Sprintf("k%d", i)]; !ok {
			t.Fatalf("a node loading the namespace misses k%d", i)
		}
	}
}
