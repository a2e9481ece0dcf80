package persistence_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/persistence/persistencetest"
)

// Benchmarks of the store's write path, loading and compaction. They use real bbolt files
// with fsync, in $NOMICORE_BENCH_DIR when set (to measure a particular disk), else in a
// temp dir.

func benchDir(b *testing.B) string {
	if base := os.Getenv("NOMICORE_BENCH_DIR"); base != "" {
		dir, err := os.MkdirTemp(base, "persistence-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}

func openBench(b *testing.B, opts persistence.Options) *persistence.BoltStore {
	b.Helper()
	st, err := persistence.OpenDataDir(benchDir(b), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close(context.Background()) })
	return st
}

// ioCounters reads this process's write counters from /proc/self/io (Linux): wchar counts the
// bytes handed to write calls, write_bytes those sent to the storage layer.
func ioCounters() (wchar, disk int64, ok bool) {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ": ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "wchar":
			wchar = n
		case "write_bytes":
			disk = n
		}
	}
	return wchar, disk, true
}

// update50 returns n distinct updates of 50 bytes.
func update50(n int) [][]byte {
	rng := rand.New(rand.NewPCG(1, 1))
	out := make([][]byte, n)
	for i := range out {
		u := make([]byte, 50)
		for j := range u {
			u[j] = byte(rng.Uint32())
		}
		out[i] = u
	}
	return out
}

// appendAll appends count updates to id, waiting briefly whenever the queue pushes back,
// and returns the sequence number of the last one.
func appendAll(b *testing.B, st persistence.Store, id string, count int, updates [][]byte) uint64 {
	var seq uint64
	for i := 0; i < count; {
		s, err := st.Append(owner, id, updates[i%len(updates)])
		if errors.Is(err, persistence.ErrBackpressure) {
			time.Sleep(50 * time.Microsecond)
			continue
		}
		if err != nil {
			b.Error(err)
			return 0
		}
		seq = s
		i++
	}
	return seq
}

// reportWrites reports throughput and write volume per update.
func reportWrites(b *testing.B, st *persistence.BoltStore, n int, elapsed time.Duration, w0, d0 int64, commits0 uint64) {
	b.ReportMetric(float64(n)/elapsed.Seconds(), "updates/s")
	if w1, d1, ok := ioCounters(); ok {
		b.ReportMetric(float64(w1-w0)/float64(n), "written-B/update")
		b.ReportMetric(float64(d1-d0)/float64(n), "disk-B/update")
	}
	if c := st.Stats().Commits - commits0; c > 0 {
		b.ReportMetric(float64(n)/float64(c), "updates/commit")
	}
}

// BenchmarkAppendOneNamespace: sequenced appends of 50-byte updates into one namespace,
// group-committed to bbolt on disk, until all are durable.
func BenchmarkAppendOneNamespace(b *testing.B) {
	st := openBench(b, persistence.Options{})
	ctx := context.Background()
	id := nsID(0)
	if err := st.CreateEntry(ctx, persistence.Entry{NamespaceID: id, Owner: owner}, nil); err != nil {
		b.Fatal(err)
	}
	updates := update50(4096)
	commits0 := st.Stats().Commits
	w0, d0, _ := ioCounters()
	b.ResetTimer()
	start := time.Now()
	seq := appendAll(b, st, id, b.N, updates)
	if err := st.WaitFlushed(ctx, owner, id, seq); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	reportWrites(b, st, b.N, elapsed, w0, d0, commits0)
}

// BenchmarkAppend1000Namespaces: the same into 1,000 namespaces, one appending goroutine each.
func BenchmarkAppend1000Namespaces(b *testing.B) {
	const namespaces = 1000
	st := openBench(b, persistence.Options{})
	ctx := context.Background()
	for i := range namespaces {
		if err := st.CreateEntry(ctx, persistence.Entry{NamespaceID: nsID(i), Owner: owner}, nil); err != nil {
			b.Fatal(err)
		}
	}
	updates := update50(4096)
	commits0 := st.Stats().Commits
	w0, d0, _ := ioCounters()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range namespaces {
		count := b.N / namespaces
		if i < b.N%namespaces {
			count++
		}
		if count == 0 {
			continue
		}
		wg.Go(func() {
			seq := appendAll(b, st, nsID(i), count, updates)
			if err := st.WaitFlushed(ctx, owner, nsID(i), seq); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	reportWrites(b, st, b.N, elapsed, w0, d0, commits0)
}

func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkIdleNamespaceMemory: the resident memory a namespace costs once released (and,
// for comparison, while loaded). ns/op is one Load and Release of a small document.
func BenchmarkIdleNamespaceMemory(b *testing.B) {
	const namespaces = 10000
	st := openBench(b, persistence.Options{})
	ctx := context.Background()
	for i := range namespaces {
		id := nsID(i)
		if err := st.CreateEntry(ctx, persistence.Entry{NamespaceID: id, Owner: owner}, []byte("snapshot")); err != nil {
			b.Fatal(err)
		}
		seq, err := st.Append(owner, id, []byte("update"))
		if err != nil {
			b.Fatal(err)
		}
		if i == namespaces-1 {
			st.WaitFlushed(ctx, owner, id, seq)
		}
	}
	for i := range namespaces {
		st.WaitFlushed(ctx, owner, nsID(i), 1)
		st.Release(owner, nsID(i))
	}
	idle := heapInUse()
	for i := range namespaces {
		if _, err := st.Load(ctx, owner, nsID(i)); err != nil {
			b.Fatal(err)
		}
	}
	loaded := heapInUse()
	for i := range namespaces {
		st.Release(owner, nsID(i))
	}
	released := heapInUse()
	b.ResetTimer()
	for i := range b.N {
		id := nsID(i % namespaces)
		if _, err := st.Load(ctx, owner, id); err != nil {
			b.Fatal(err)
		}
		st.Release(owner, id)
	}
	b.StopTimer()
	if r := st.Stats().Resident; r != 0 {
		b.Fatalf("%d namespaces resident after Release", r)
	}
	b.ReportMetric((float64(released)-float64(idle))/namespaces, "B/idle-ns")
	b.ReportMetric((float64(loaded)-float64(idle))/namespaces, "B/resident-ns")
}

// BenchmarkLoad10MB: reading a 10 MB document, stored as one snapshot or as a log of
// 50-byte updates.
func BenchmarkLoad10MB(b *testing.B) {
	const size = 10 << 20
	b.Run("snapshot", func(b *testing.B) {
		st := openBench(b, persistence.Options{})
		ctx := context.Background()
		snap := bytes.Repeat([]byte("0123456789abcdef"), size/16)
		if err := st.CreateEntry(ctx, persistence.Entry{NamespaceID: nsID(0), Owner: owner}, snap); err != nil {
			b.Fatal(err)
		}
		st.Release(owner, nsID(0))
		benchLoad(b, st, size)
	})
	b.Run("log", func(b *testing.B) {
		st := openBench(b, persistence.Options{Compactor: persistencetest.Concat, CompactAfterCount: -1, CompactAfterBytes: -1})
		ctx := context.Background()
		if err := st.CreateEntry(ctx, persistence.Entry{NamespaceID: nsID(0), Owner: owner}, nil); err != nil {
			b.Fatal(err)
		}
		seq := appendAll(b, st, nsID(0), size/50, update50(4096))
		if err := st.WaitFlushed(ctx, owner, nsID(0), seq); err != nil {
			b.Fatal(err)
		}
		st.Release(owner, nsID(0))
		benchLoad(b, st, size)
	})
}

func benchLoad(b *testing.B, st *persistence.BoltStore, size int) {
	ctx := context.Background()
	b.SetBytes(int64(size))
	b.ResetTimer()
	for range b.N {
		doc, err := st.Load(ctx, owner, nsID(0))
		if err != nil {
			b.Fatal(err)
		}
		if n := len(persistencetest.Flatten(doc)); n < size-50 {
			b.Fatalf("loaded %d bytes", n)
		}
		st.Release(owner, nsID(0))
	}
}

// BenchmarkCompaction: folding a 1 MB log of 50-byte updates (20,971 updates) into the
// snapshot — the store's part (read, write, trim; the test Compactor only concatenates) —
// over an empty snapshot and over a 10 MB one.
func BenchmarkCompaction(b *testing.B) {
	for _, snapSize := range []int{0, 10 << 20} {
		b.Run(fmt.Sprintf("snapshot=%dMB", snapSize>>20), func(b *testing.B) {
			const logBytes = 1 << 20
			st := openBench(b, persistence.Options{Compactor: persistencetest.Concat, CompactAfterCount: -1, CompactAfterBytes: -1})
			ctx := context.Background()
			updates := update50(4096)
			snap := bytes.Repeat([]byte{'s'}, snapSize)
			b.SetBytes(logBytes)
			var folded time.Duration
			for i := range b.N {
				b.StopTimer()
				id := nsID(i)
				if err := st.CreateEntry(ctx, persistence.Entry{NamespaceID: id, Owner: owner}, snap); err != nil {
					b.Fatal(err)
				}
				seq := appendAll(b, st, id, logBytes/50, updates)
				if err := st.WaitFlushed(ctx, owner, id, seq); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				if err := st.Compact(ctx, owner, id); err != nil {
					b.Fatal(err)
				}
				folded += time.Since(start)
				b.StopTimer()
				st.Release(owner, id)
				b.StartTimer()
			}
			b.ReportMetric(float64(b.N*(logBytes/50))/folded.Seconds(), "updates/s")
		})
	}
}
