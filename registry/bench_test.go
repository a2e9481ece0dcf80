package registry

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/yjs"
)

// benchStore opens a bbolt store in a temp dir with the registry's compactor (and the
// store's default compaction thresholds).
func benchStore(b *testing.B) *persistence.BoltStore {
	b.Helper()
	return benchStoreWith(b, persistence.Options{Compactor: Compactor()})
}

func benchStoreWith(b *testing.B, opts persistence.Options) *persistence.BoltStore {
	b.Helper()
	st, err := persistence.OpenDataDir(b.TempDir(), opts)
	must(b, err)
	return st
}

// compactionModes are the store settings the apply benchmarks run with.
var compactionModes = []struct {
	name string
	opts persistence.Options
}{
	{"compaction=default", persistence.Options{Compactor: Compactor()}},
	{"compaction=off", persistence.Options{Compactor: Compactor(), CompactAfterCount: -1, CompactAfterBytes: -1}},
	// As the hub runs: with the change feed, whose records carry the state vector after
	// each commit's last update.
	{"compaction=default,feed", persistence.Options{Compactor: Compactor(),
		ChangeFeed: &persistence.ChangeFeedOptions{StateVector: FeedStateVector}}},
}

func benchRegistry(b *testing.B, st persistence.Store) *Registry {
	b.Helper()
	reg, err := New(Config{Role: RoleHub, Catalog: st, Documents: st})
	must(b, err)
	return reg
}

func closeBench(b *testing.B, reg *Registry, st persistence.Store) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	must(b, reg.Close(ctx))
	must(b, st.Close(ctx))
}

// smallUpdates returns n updates of about 50 bytes: a writer setting distinct map keys to
// short strings.
func smallUpdates(id uint32, n int) ([][]byte, int) {
	d := yjs.NewDoc(yjs.WithClientID(id))
	var ups [][]byte
	d.OnUpdate(func(u []byte, _ any) { ups = append(ups, u) })
	m := d.GetMap("app")
	total := 0
	for i := range n {
		if err := m.Set("key-"+strconv.Itoa(i), "value-abcdefghijklmnopqrst"); err != nil {
			panic(err)
		}
		total += len(ups[i])
	}
	return ups, total
}

// wchar is the bytes this process passed to write system calls (Linux), or -1.
func wchar() int64 {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return -1
}

// pump applies ups through s with at most window updates in flight (the namespace layer's
// maxInFlightUpdates) and at most durable updates applied but not yet durable (a producer
// that keeps pace with the disk instead of filling the store's commit queue), and returns
// the last append sequence number.
func pump(b *testing.B, s *Session, ups [][]byte, window, durable int) uint64 {
	sem := make(chan struct{}, window)
	var mu sync.Mutex
	seqs := make([]uint64, len(ups))
	var failed error
	for i, u := range ups {
		if i >= durable {
			mu.Lock()
			seq := seqs[i-durable]
			mu.Unlock()
			if seq != 0 {
				must(b, s.lease.WaitFlushed(context.Background(), seq))
			}
		}
		sem <- struct{}{}
		err := s.ApplyAsync(u, func(r ApplyResult, err error) {
			mu.Lock()
			if err != nil && failed == nil {
				failed = err
			}
			seqs[i] = r.Seq
			mu.Unlock()
			<-sem
		})
		must(b, err)
	}
	for range window {
		sem <- struct{}{}
	}
	mu.Lock()
	defer mu.Unlock()
	must(b, failed)
	return seqs[len(seqs)-1]
}

// Sequenced apply of small updates into one namespace: admission, protected check, live
// apply, dirty notification, and group commit to bbolt on disk (the time runs until the last
// update is durable).
func BenchmarkSequencedApplyOneNamespace(b *testing.B) {
	for _, m := range compactionModes {
		b.Run(m.name, func(b *testing.B) { benchApplyOne(b, m.opts) })
	}
}

func benchApplyOne(b *testing.B, opts persistence.Options) {
	st := benchStoreWith(b, opts)
	reg := benchRegistry(b, st)
	defer closeBench(b, reg, st)
	c, err := reg.Create(ctxT(b), owner)
	must(b, err)
	l, err := reg.Open(ctxT(b), owner, c.NamespaceID)
	must(b, err)
	defer l.Release()
	s, _, err := l.OpenSession(ctxT(b), SessionOptions{MaxInFlight: 64})
	must(b, err)
	defer s.Close()
	ups, total := smallUpdates(1, b.N)
	w0 := wchar()
	b.ResetTimer()
	start := time.Now()
	last := pump(b, s, ups, 32, 16384)
	must(b, l.WaitFlushed(ctxT(b), last))
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "updates/s")
	b.ReportMetric(float64(total)/float64(b.N), "update-bytes")
	if w0 >= 0 {
		b.ReportMetric(float64(wchar()-w0)/float64(b.N), "written-bytes/update")
	}
	stats := st.Stats()
	b.ReportMetric(float64(stats.Compactions), "compactions")
	b.ReportMetric(float64(stats.Commits), "commits")
}

// The same into 1,000 namespaces at once, each with its own session and window.
func BenchmarkSequencedApply1000Namespaces(b *testing.B) {
	for _, m := range compactionModes {
		b.Run(m.name, func(b *testing.B) { benchApply1000(b, m.opts) })
	}
}

func benchApply1000(b *testing.B, opts persistence.Options) {
	const namespaces = 1000
	st := benchStoreWith(b, opts)
	reg := benchRegistry(b, st)
	defer closeBench(b, reg, st)
	sessions := make([]*Session, namespaces)
	work := make([][][]byte, namespaces)
	total := 0
	per := (b.N + namespaces - 1) / namespaces
	for i := range namespaces {
		c, err := reg.Create(ctxT(b), owner)
		must(b, err)
		l, err := reg.Open(ctxT(b), owner, c.NamespaceID)
		must(b, err)
		defer l.Release()
		sessions[i], _, err = l.OpenSession(ctxT(b), SessionOptions{MaxInFlight: 64})
		must(b, err)
		var n int
		work[i], n = smallUpdates(uint32(i+1), per)
		total += n
	}
	w0 := wchar()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range namespaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := pump(b, sessions[i], work[i], 32, 32)
			must(b, sessions[i].lease.WaitFlushed(ctxT(b), last))
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	n := per * namespaces
	b.ReportMetric(float64(n)/elapsed.Seconds(), "updates/s")
	b.ReportMetric(float64(total)/float64(n), "update-bytes")
	if w0 >= 0 {
		b.ReportMetric(float64(wchar()-w0)/float64(n), "written-bytes/update")
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Resident memory of 1,000 namespaces in a bbolt store (its data lives in the file's mmap,
// not in the Go heap): loaded (a small document each: identity plus two keys, one lease),
// then idle again after unloading. One op loads and unloads all 1,000.
func BenchmarkNamespaceMemory(b *testing.B) {
	const namespaces = 1000
	ctx := context.Background() // one context: ctxT would keep a timer per call
	st := benchStore(b)
	reg := benchRegistry(b, st)
	defer closeBench(b, reg, st)
	ids := make([]string, namespaces)
	writer := newClient(9)
	small := [][]byte{writer.set(b, "app", "title", "hello"), writer.set(b, "app", "count", 3.0)}
	for i := range namespaces {
		c, err := reg.Create(ctx, owner)
		must(b, err)
		ids[i] = c.NamespaceID
		l, err := reg.Open(ctx, owner, c.NamespaceID)
		must(b, err)
		for _, u := range small {
			_, err := l.WriteLocal(ctx, u)
			must(b, err)
		}
		l.Release()
	}
	leases := make([]*Lease, namespaces)
	var idle, loaded, after uint64
	var g0, g1 int
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		waitIdle(b, reg, st)
		idle = heapInUse()
		g0 = runtime.NumGoroutine()
		b.StartTimer()
		for i, id := range ids {
			var err error
			leases[i], err = reg.Open(ctx, owner, id)
			must(b, err)
		}
		b.StopTimer()
		loaded = heapInUse()
		g1 = runtime.NumGoroutine()
		b.StartTimer()
		for i, l := range leases {
			l.Release()
			leases[i] = nil
		}
		waitIdle(b, reg, st)
		b.StopTimer()
		after = heapInUse()
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(int64(loaded)-int64(idle))/namespaces, "B/loaded-ns")
	b.ReportMetric(float64(int64(after)-int64(idle))/namespaces, "B/idle-ns")
	b.ReportMetric(float64(g1-g0)/namespaces, "goroutines/loaded-ns")
}

func waitIdle(b *testing.B, reg *Registry, st persistence.Store) {
	for reg.Loaded() != 0 || st.Stats().Resident != 0 {
		time.Sleep(time.Millisecond)
	}
}

// bigDocument returns updates making a document of about size bytes of text, in chunks,
// followed by small edits.
func bigDocument(size, edits int) [][]byte {
	d := yjs.NewDoc(yjs.WithClientID(77))
	var ups [][]byte
	d.OnUpdate(func(u []byte, _ any) { ups = append(ups, u) })
	text := d.GetText("text")
	chunk := strings.Repeat("lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 1024)
	for text.Len() < size {
		if err := text.Insert(text.Len(), chunk, nil); err != nil {
			panic(err)
		}
	}
	for i := range edits {
		if err := text.Insert((i*104729)%text.Len(), "x", nil); err != nil {
			panic(err)
		}
	}
	return ups
}

// Loading a 10 MB document from the bbolt store: a snapshot plus a log of 1,000 edits.
func BenchmarkLoad10MBDocument(b *testing.B) {
	st := benchStore(b)
	reg := benchRegistry(b, st)
	defer closeBench(b, reg, st)
	c, err := reg.Create(ctxT(b), owner)
	must(b, err)
	l, err := reg.Open(ctxT(b), owner, c.NamespaceID)
	must(b, err)
	ups := bigDocument(10<<20, 1000)
	chunks := len(ups) - 1000
	merged, err := yjs.MergeUpdates(ups[:chunks])
	must(b, err)
	_, err = l.WriteLocal(ctxT(b), merged)
	must(b, err)
	must(b, l.rt.reg.cfg.Documents.Compact(ctxT(b), owner, c.NamespaceID)) // the text as the snapshot
	var last ApplyResult
	for _, u := range ups[chunks:] {
		last, err = l.WriteLocal(ctxT(b), u)
		must(b, err)
	}
	must(b, l.WaitFlushed(ctxT(b), last.Seq))
	state := mustState(b, l, nil)
	rt := l.rt
	l.Release()
	<-rt.done
	b.SetBytes(int64(len(state)))
	b.ResetTimer()
	for range b.N {
		l, err := reg.Open(ctxT(b), owner, c.NamespaceID)
		must(b, err)
		b.StopTimer()
		rt := l.rt
		l.Release()
		<-rt.done
		b.StartTimer()
	}
}

// Compaction throughput: folding a log of small updates into a 1 MB snapshot with the
// registry's Compactor (bytes/s of input).
func BenchmarkCompaction(b *testing.B) {
	ups := bigDocument(1<<20, 2000)
	chunks := len(ups) - 2000
	snap, err := yjs.MergeUpdates(ups[:chunks])
	must(b, err)
	log := ups[chunks:]
	in := len(snap)
	for _, u := range log {
		in += len(u)
	}
	b.SetBytes(int64(in))
	fold := Compactor()
	b.ResetTimer()
	for range b.N {
		if _, err := fold(snap, log); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(log)), "updates/fold")
}
