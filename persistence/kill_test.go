package persistence_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/persistence/persistencetest"
)

// The crash test runs this test binary again as a child writer (TestMain switches on
// killChildEnv), kills it with SIGKILL at random moments, and checks what it left on disk.
const (
	killChildEnv   = "NOMICORE_PERSISTENCE_KILL_CHILD" // the data dir
	killSeedEnv    = "NOMICORE_PERSISTENCE_KILL_SEED"
	killNamespaces = 4
)

// killRecord is the update append seq of namespace i writes: "<i>:<seq>:<payload>;", with a
// payload fixed by (i, seq), so any reader can tell a whole, ordered, gapless log from a
// damaged one. Most records are small; every 97th is 8 KB (a transaction of several pages).
func killRecord(i int, seq uint64) []byte {
	n := 20 + int(seq*31+uint64(i)*17)%60
	if seq%97 == 0 {
		n = 8000
	}
	b := fmt.Appendf(nil, "%d:%d:", i, seq)
	b = append(b, bytes.Repeat([]byte{'a' + byte((seq*7+uint64(i))%26)}, n)...)
	return append(b, ';')
}

func killRecords(i int, through uint64) []byte {
	var b []byte
	for s := uint64(1); s <= through; s++ {
		b = append(b, killRecord(i, s)...)
	}
	return b
}

// killChild is the child writer: it appends killRecords to killNamespaces namespaces as fast
// as the store takes them, with background compaction and an occasional ReplaceSnapshot, and
// prints "flushed <i> <seq>" whenever the store reports a namespace durable. It never returns
// on its own before 30 s.
func killChild(dir string) int {
	seed, _ := strconv.ParseUint(os.Getenv(killSeedEnv), 10, 64)
	rng := rand.New(rand.NewPCG(seed, 99))
	index := map[string]int{}
	for i := range killNamespaces {
		index[nsID(i)] = i
	}
	st, err := persistence.OpenDataDir(dir, persistence.Options{
		LockTimeout:          10 * time.Second,
		CompactAfterCount:    150,
		CompactSnapshotRatio: -1, // compact often: the kills aim at compactions
		Compactor: func(snapshot []byte, updates [][]byte) ([]byte, error) {
			persistencetest.Say("compacting")
			time.Sleep(2 * time.Millisecond) // widen the window for a kill
			return persistencetest.Concat(snapshot, updates)
		},
		OnFlushed: func(_, id string, through uint64) { persistencetest.Say("flushed %d %d", index[id], through) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
	}
	ctx := context.Background()
	next := make([]uint64, killNamespaces)
	for i := range killNamespaces {
		doc, err := st.Load(ctx, owner, nsID(i))
		if errors.Is(err, persistence.ErrNotFound) {
			err = st.CreateEntry(ctx, persistence.Entry{NamespaceID: nsID(i), Owner: owner}, nil)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "load:", err)
			return 1
		}
		next[i] = doc.Through + 1
	}
	persistencetest.Say("ready")
	deadline := time.Now().Add(30 * time.Second)
	for n := 0; time.Now().Before(deadline); n++ {
		i := rng.IntN(killNamespaces)
		if n%700 == 699 { // a whole-state snapshot, as the registry writes after a degraded spell
			through := next[i] - 1
			if err := st.ReplaceSnapshot(ctx, owner, nsID(i), killRecords(i, through), through); err != nil {
				fmt.Fprintln(os.Stderr, "replace:", err)
				return 1
			}
			continue
		}
		_, err := st.Append(owner, nsID(i), killRecord(i, next[i]))
		switch {
		case errors.Is(err, persistence.ErrBackpressure):
			time.Sleep(time.Millisecond)
		case err != nil:
			fmt.Fprintln(os.Stderr, "append:", err)
			return 1
		default:
			next[i]++
		}
	}
	return 0
}

// TestS21_KillNineLeavesAPrefix: after kill -9 at any moment
// (docs/protocol.md#restart-and-shutdown crash and restart), reopening the store yields, for
// every namespace, exactly a prefix of the appends (in order, no gap, no duplicate, no torn
// record) at least as long as the last position the child saw reported durable. Some kills are
// aimed at compactions under way.
func TestS21_KillNineLeavesAPrefix(t *testing.T) {
	iterations := 24
	if *long {
		iterations = 300
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(2026, 21))
	durable := make([]uint64, killNamespaces) // highest position ever reported flushed
	var duringCompaction, total int
	for it := range iterations {
		mode := it % 3
		sawCompaction := runKilledChild(t, dir, it, rng, mode, durable)
		if sawCompaction {
			duringCompaction++
		}

		st, err := persistence.OpenDataDir(dir, persistence.Options{})
		if err != nil {
			t.Fatalf("iteration %d: reopen after kill: %v", it, err)
		}
		ctx := context.Background()
		for i := range killNamespaces {
			doc, err := st.Load(ctx, owner, nsID(i))
			if err != nil {
				t.Fatalf("iteration %d: load %d: %v", it, i, err)
			}
			if got, want := persistencetest.Flatten(doc), killRecords(i, doc.Through); !bytes.Equal(got, want) {
				t.Fatalf("iteration %d: namespace %d (through %d) is not the prefix of its appends:\n got %.200q…\nwant %.200q…", it, i, doc.Through, got, want)
			}
			if doc.Through < durable[i] {
				t.Fatalf("iteration %d: namespace %d reads through %d, but %d was reported durable", it, i, doc.Through, durable[i])
			}
			durable[i] = doc.Through
			if it == iterations-1 {
				total += int(doc.Through)
			}
		}
		closeStore(t, st)
		checkFile(t, filepath.Join(dir, persistence.FileName))
	}
	t.Logf("%d kills (%d aimed at a compaction under way); %d appends durable in the end", iterations, duringCompaction, total)
	if duringCompaction == 0 {
		t.Fatal("no kill landed during a compaction")
	}
}

// runKilledChild starts a child writer on dir, kills it with SIGKILL (mode 0: after a random
// delay; 1: just after it starts a compaction; 2: very early), and raises durable to the
// positions it reported. It reports whether the kill was aimed at a compaction.
func runKilledChild(t *testing.T, dir string, it int, rng *rand.Rand, mode int, durable []uint64) (atCompaction bool) {
	t.Helper()
	child := persistencetest.StartChild(t, killChildEnv+"="+dir, killSeedEnv+"="+strconv.Itoa(it))
	timeout := time.After(30 * time.Second)
	var fire <-chan time.Time
	ready := false
	compactions := 1 + rng.IntN(3)
wait:
	for {
		select {
		case line, ok := <-child.Lines:
			if !ok {
				break wait
			}
			persistencetest.NoteFlushed(durable, line)
			switch {
			case line == "ready":
				ready = true
				switch mode {
				case 0:
					fire = time.After(time.Duration(5+rng.IntN(150)) * time.Millisecond)
				case 2:
					fire = time.After(time.Duration(rng.IntN(5)) * time.Millisecond)
				}
			case line == "compacting" && mode == 1 && !atCompaction:
				if compactions--; compactions == 0 {
					time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
					child.Kill()
					atCompaction = true
				}
			}
		case <-fire:
			child.Kill()
		case <-timeout:
			t.Fatalf("iteration %d: the child did not get killed in time (ready %v)", it, ready)
		}
	}
	child.WaitKilled(t)
	return atCompaction
}
