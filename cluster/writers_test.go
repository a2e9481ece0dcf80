package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomicore/nomicore/registry"
)

// lockedBuffer is a log destination several goroutines write to.
type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// writeExcept writes through WriteLocalExceptAsync, as the editor endpoint does, and waits
// for its outcome.
func writeExcept(t *testing.T, l *registry.Lease, except *registry.Watch, update []byte) (registry.ApplyResult, error) {
	t.Helper()
	type outcome struct {
		res registry.ApplyResult
		err error
	}
	ch := make(chan outcome, 1)
	if err := l.WriteLocalExceptAsync(except, update, func(r registry.ApplyResult, err error) { ch <- outcome{r, err} }); err != nil {
		return registry.ApplyResult{}, err
	}
	select {
	case o := <-ch:
		return o.res, o.err
	case <-time.After(30 * time.Second):
		t.Fatal("the write was not answered within 30s")
		return registry.ApplyResult{}, nil
	}
}

// TestCluster_WriterWatchWritesThroughTheLog: a writer that relays its own updates (the
// editor endpoint, WriteLocalExceptAsync) writes through the namespace log like every other
// write of a node. It is answered once the record came back from the log — stored on a
// quorum, at the position it is answered with, and applied on the writing node, so the
// node's Flushed covers it — every node applies it, its own watch does not get it back
// while every other subscriber does, and it survives a restart of the node. No store
// operation the cluster does not offer is called (nothing is logged as unsupported; an
// archive is refused by the registry).
func TestCluster_WriterWatchWritesThroughTheLog(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	tc := newTestCluster(t, 3, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	ns := tc.nodes[0].create(t)
	l := tc.nodes[0].open(t, ns)
	mine, err := l.Watch(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	other, err := l.Watch(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	l2 := tc.nodes[1].open(t, ns)

	state, err := l.EncodeState(ctxT(t, 5*time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	update := mapUpdate(t, state, "editor", "first")
	res, err := writeExcept(t, l, mine, update)
	if err != nil {
		t.Fatalf("the write was refused: %v", err)
	}
	if !res.Changed || res.Seq == 0 {
		t.Fatalf("the write was not placed in the log: %+v", res)
	}
	if l.Flushed() < res.Seq {
		t.Fatalf("Flushed %d < the write's log position %d at its answer", l.Flushed(), res.Seq)
	}
	if err := l.WaitFlushed(ctxT(t, time.Second), res.Seq); err != nil {
		t.Fatal(err)
	}
	stream, _ := tc.nodes[2].logOf(t, "default", ns)
	msg, err := stream.GetMsg(ctxT(t, 5*time.Second), res.Seq)
	if err != nil {
		t.Fatalf("log position %d: %v", res.Seq, err)
	}
	if rec, _, err := decodeRecord(msg.Data); err != nil || rec.Kind != registry.RecordUpdate || !bytes.Equal(rec.Update, update) {
		t.Fatalf("log position %d holds %+v (%v), not the write", res.Seq, rec, err)
	}

	// A second write, not skipping the watch: the writer's watch gets it alone, so the
	// first one was never fanned out to it.
	state, err = l.EncodeState(ctxT(t, 5*time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.WriteLocal(ctxT(t, 20*time.Second), mapUpdate(t, state, "admin", "second")); err != nil {
		t.Fatal(err)
	}
	if p := mine.Poll(); len(p.Updates) != 1 {
		t.Fatalf("the writer's watch got %d updates, want 1 (the other write's)", len(p.Updates))
	}
	if p := other.Poll(); len(p.Updates) != 2 {
		t.Fatalf("another watch got %d updates, want 2", len(p.Updates))
	}
	want := map[string]any{"editor": "first", "admin": "second"}
	for _, x := range []struct {
		name string
		l    *registry.Lease
	}{{tc.nodes[0].name, l}, {tc.nodes[1].name, l2}} {
		eventually(t, 20*time.Second, x.name+" has both writes", func() error {
			got := notes(t, x.l)
			for k, v := range want {
				if got[k] != v {
					return fmt.Errorf("notes %v", got)
				}
			}
			return nil
		})
	}

	// Node 1 restarts: the write comes back from the log.
	mine.Close()
	other.Close()
	l.Release()
	tc.stop(0)
	tc.start(0)
	tc.waitHealthy(30*time.Second, tc.nodes[0])
	back := tc.nodes[0].open(t, ns)
	if got := notes(t, back); got["editor"] != "first" || got["admin"] != "second" {
		t.Fatalf("after a restart node 1 has %v", got)
	}
	// Archiving, which the cluster's store does not offer, is refused by the registry.
	if _, err := tc.nodes[1].reg.Archive(ctxT(t, 5*time.Second), "default", ns); !errors.Is(err, registry.ErrRoleViolation) {
		t.Fatalf("archiving in a cluster: %v", err)
	}
	if s := logs.String(); strings.Contains(s, "not supported") {
		t.Fatalf("a node called a store operation the cluster does not offer:\n%s", s)
	}
}
