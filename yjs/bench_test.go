package yjs

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/nomicore/nomicore/internal/testkit/oracle"
	"testing"
)

// Benchmarks for the B4 editing trace (docs/protocol.md#conformance): B4_TRACE names the trace
// (a JSON array of [pos, 0, "c"] inserts and [pos, 1] deletes); without it a synthetic trace
// of the same size and shape is used. TestB4Report prints our figures next to JS yjs timing
// the same work.

type b4Op struct {
	pos    int
	insert string // "" for a delete of one unit
}

var b4 struct {
	once  sync.Once
	ops   []b4Op
	final int
	path  string
	err   error
}

func loadB4(tb testing.TB) []b4Op {
	b4.once.Do(func() {
		b4.path = os.Getenv("B4_TRACE")
		if b4.path == "" {
			b4.ops = syntheticTrace(259778)
			return
		}
		raw, err := os.ReadFile(b4.path)
		if err != nil {
			b4.err = err
			return
		}
		var ops [][]any
		if err := json.Unmarshal(raw, &ops); err != nil {
			b4.err = err
			return
		}
		b4.ops = make([]b4Op, len(ops))
		for i, op := range ops {
			b4.ops[i].pos = int(op[0].(float64))
			if op[1].(float64) == 0 {
				b4.ops[i].insert = op[2].(string)
			}
		}
	})
	if b4.err != nil {
		tb.Fatalf("B4_TRACE: %v", b4.err)
	}
	return b4.ops
}

// syntheticTrace is a typing session: mostly appending near a moving cursor, some jumps and
// deletions (about 70% inserts, like B4).
func syntheticTrace(n int) []b4Op {
	rng := rand.New(rand.NewPCG(4, 4))
	ops := make([]b4Op, 0, n)
	length, cursor := 0, 0
	for len(ops) < n {
		if rng.IntN(100) == 0 {
			cursor = rng.IntN(length + 1)
		}
		if length > 0 && cursor > 0 && rng.IntN(10) < 3 {
			cursor--
			ops = append(ops, b4Op{pos: cursor})
			length--
			continue
		}
		ops = append(ops, b4Op{pos: cursor, insert: string(rune('a' + rng.IntN(26)))})
		cursor++
		length++
	}
	return ops
}

func replayB4(tb testing.TB, ops []b4Op, d *Doc) *Text {
	t := d.GetText("text")
	for i, op := range ops {
		var err error
		if op.insert != "" {
			err = t.Insert(op.pos, op.insert, nil)
		} else {
			err = t.Delete(op.pos, 1)
		}
		if err != nil {
			tb.Fatalf("op %d %+v: %v", i, op, err)
		}
	}
	return t
}

func BenchmarkB4Apply(b *testing.B) {
	ops := loadB4(b)
	b.ReportAllocs()
	for b.Loop() {
		replayB4(b, ops, NewDoc(WithClientID(b4Client)))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(ops)), "ns/trace-op")
}

func BenchmarkB4ApplyCapture(b *testing.B) {
	ops := loadB4(b)
	b.ReportAllocs()
	for b.Loop() {
		d := NewDoc(WithClientID(b4Client))
		updates := make([][]byte, 0, len(ops))
		d.OnUpdate(func(u []byte, _ any) { updates = append(updates, u) })
		replayB4(b, ops, d)
		if len(updates) != len(ops) {
			b.Fatalf("%d updates", len(updates))
		}
	}
}

var b4Final struct {
	once    sync.Once
	state   []byte
	updates [][]byte
}

func b4State(b *testing.B) ([]byte, [][]byte) {
	ops := loadB4(b)
	b4Final.once.Do(func() {
		d := NewDoc(WithClientID(b4Client))
		d.OnUpdate(func(u []byte, _ any) { b4Final.updates = append(b4Final.updates, u) })
		replayB4(b, ops, d)
		b4Final.state, _ = EncodeStateAsUpdate(d, nil)
	})
	return b4Final.state, b4Final.updates
}

func BenchmarkB4Encode(b *testing.B) {
	ops := loadB4(b)
	d := NewDoc(WithClientID(b4Client))
	replayB4(b, ops, d)
	b.ReportAllocs()
	var n int
	for b.Loop() {
		st, err := EncodeStateAsUpdate(d, nil)
		if err != nil {
			b.Fatal(err)
		}
		n = len(st)
	}
	b.ReportMetric(float64(n), "state-bytes")
}

func BenchmarkB4Decode(b *testing.B) {
	state, _ := b4State(b)
	b.ReportAllocs()
	for b.Loop() {
		d := NewDoc(WithClientID(2))
		if err := ApplyUpdate(d, state, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkB4Merge10k(b *testing.B) {
	_, updates := b4State(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := MergeUpdates(updates[:10000]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkB4MergeAll(b *testing.B) {
	_, updates := b4State(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := MergeUpdates(updates); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkB4Memory reports the heap held by the final B4 document.
func BenchmarkB4Memory(b *testing.B) {
	ops := loadB4(b)
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		d := NewDoc(WithClientID(b4Client))
		t := replayB4(b, ops, d)
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap := float64(after.HeapAlloc) - float64(before.HeapAlloc)
		b.ReportMetric(heap, "heap-bytes")
		b.ReportMetric(heap/float64(t.Len()), "bytes/char")
		runtime.KeepAlive(d)
	}
}

// BenchmarkB4MemoryDecoded reports the heap held by the final B4 document loaded from its
// encoded state (as a hub loads a stored document).
func BenchmarkB4MemoryDecoded(b *testing.B) {
	state, _ := b4State(b)
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		d := NewDoc(WithClientID(2))
		if err := ApplyUpdate(d, state, nil); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc)-float64(before.HeapAlloc), "heap-bytes")
		runtime.KeepAlive(d)
	}
}

// BenchmarkRemoteApplyLargeDoc applies small remote updates (a few characters inserted or
// deleted at random places) to a document holding 1 MB or 10 MB of text: the cost per update
// must not grow with the document.
func BenchmarkRemoteApplyLargeDoc(b *testing.B) {
	for _, mb := range []int{1, 10} {
		b.Run(fmt.Sprintf("%dMB", mb), func(b *testing.B) {
			base, updates := largeDocUpdates(b, mb<<20, 10000)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				d := NewDoc(WithClientID(3))
				if err := ApplyUpdate(d, base, nil); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				for _, u := range updates {
					if err := ApplyUpdate(d, u, nil); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(updates)), "ns/update")
		})
	}
}

// largeDocUpdates builds a text of size bytes from chunks typed at random places by
// several clients, and n small edits made on a replica.
func largeDocUpdates(b *testing.B, size, n int) ([]byte, [][]byte) {
	rng := rand.New(rand.NewPCG(uint64(size), 1))
	src := NewDoc(WithClientID(10))
	t := src.GetText("text")
	chunk := strings.Repeat("lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 18) // ~1 KB
	for t.Len() < size {
		if err := t.Insert(rng.IntN(t.Len()+1), chunk, nil); err != nil {
			b.Fatal(err)
		}
	}
	base, _ := EncodeStateAsUpdate(src, nil)
	replica := NewDoc(WithClientID(11))
	if err := ApplyUpdate(replica, base, nil); err != nil {
		b.Fatal(err)
	}
	var updates [][]byte
	replica.OnUpdate(func(u []byte, _ any) { updates = append(updates, u) })
	rt := replica.GetText("text")
	for len(updates) < n {
		pos := rng.IntN(rt.Len())
		if rng.IntN(3) == 0 {
			_ = rt.Delete(pos, 1+rng.IntN(3))
		} else {
			_ = rt.Insert(pos, "xyz"[:1+rng.IntN(3)], nil)
		}
	}
	return base, updates
}

// b4Client is a client id with a 5-byte varint, like most random JS client ids, so that
// encoded sizes compare with JS's.
const b4Client = 3_000_000_000

// TestB4Report runs the B4 benchmarks here and the same work in JS yjs (through the oracle,
// on this machine, in this run) and prints the ratios against the targets of the issue. The
// two sides alternate: each repeat measures JS, then ours, and its ratios are taken within
// the repeat; the table gives the median of each row's ratios over the repeats, with every
// repeat's ratio beside it (NOMICORE_B4_REPEATS, default 1). It runs only with
// NOMICORE_B4_REPORT=1 (about a minute a repeat):
//
//	NOMICORE_B4_REPORT=1 B4_TRACE=../shared/data/b4-editing-trace.json go test ./yjs -run TestB4Report -v
func TestB4Report(t *testing.T) {
	if os.Getenv("NOMICORE_B4_REPORT") != "1" {
		t.Skip("set NOMICORE_B4_REPORT=1 to run the B4 comparison with JS yjs")
	}
	repeats := 1
	if s := os.Getenv("NOMICORE_B4_REPEATS"); s != "" {
		var err error
		if repeats, err = strconv.Atoi(s); err != nil || repeats <= 0 {
			t.Fatalf("NOMICORE_B4_REPEATS=%q: want a positive number", s)
		}
	}
	ops := loadB4(t)
	if b4.path == "" {
		t.Skip("B4_TRACE is not set: the JS comparison needs the real trace")
	}
	js := startOracle(t)
	ms := func(r testing.BenchmarkResult) float64 { return float64(r.NsPerOp()) / 1e6 }

	// One row of the table: our figure, JS's, and their ratio, for each repeat.
	type row struct {
		name, target   string
		ours, js, jsOf []float64
	}
	rows := []*row{
		{name: "apply (1 tx per op)", target: "<= 0.5"},
		{name: "apply + per-tx update", target: "<= 0.5"},
		{name: "encode final state", target: "<= 0.1"},
		{name: "decode final state", target: "<= 0.1"},
		{name: "mergeUpdates first N", target: "<= 1/40 = 0.025"},
		{name: "heap of the final doc (bytes)", target: "<= 0.3× JS, <= 3× the state"},
	}
	d := NewDoc(WithClientID(b4Client))
	replayB4(t, ops, d)
	state, _ := EncodeStateAsUpdate(d, nil)
	var mergeAll, heapPerState, decodedPerState []float64
	var last struct {
		apply, capture, encode, decode, merge10k, mergeAll testing.BenchmarkResult
		js                                                 oracle.B4Timings
	}
	for range repeats {
		jsT, err := js.B4(b4.path)
		if err != nil {
			t.Fatal(err)
		}
		apply := testing.Benchmark(BenchmarkB4Apply)
		capture := testing.Benchmark(BenchmarkB4ApplyCapture)
		encode := testing.Benchmark(BenchmarkB4Encode)
		decode := testing.Benchmark(BenchmarkB4Decode)
		merge10k := testing.Benchmark(BenchmarkB4Merge10k)
		all := testing.Benchmark(BenchmarkB4MergeAll)
		mem := testing.Benchmark(BenchmarkB4Memory)
		memDecoded := testing.Benchmark(BenchmarkB4MemoryDecoded)
		figures := [][2]float64{
			{ms(apply), jsT.ApplyMs}, {ms(capture), jsT.ApplyCaptureMs}, {ms(encode), jsT.EncodeMs},
			{ms(decode), jsT.DecodeMs}, {ms(merge10k), jsT.MergeMs}, {mem.Extra["heap-bytes"], float64(jsT.HeapBytes)},
		}
		for i, f := range figures {
			rows[i].ours = append(rows[i].ours, f[0])
			rows[i].js = append(rows[i].js, f[1])
			rows[i].jsOf = append(rows[i].jsOf, f[0]/f[1])
		}
		mergeAll = append(mergeAll, ms(all))
		heapPerState = append(heapPerState, mem.Extra["heap-bytes"]/float64(len(state)))
		decodedPerState = append(decodedPerState, memDecoded.Extra["heap-bytes"]/float64(len(state)))
		last.apply, last.capture, last.encode, last.decode, last.merge10k, last.mergeAll, last.js = apply, capture, encode, decode, merge10k, all, jsT
	}

	median := func(xs []float64) float64 {
		ys := slices.Clone(xs)
		slices.Sort(ys)
		if len(ys)%2 == 1 {
			return ys[len(ys)/2]
		}
		return (ys[len(ys)/2-1] + ys[len(ys)/2]) / 2
	}
	list := func(xs []float64, format string) string {
		parts := make([]string, len(xs))
		for i, x := range xs {
			parts[i] = fmt.Sprintf(format, x)
		}
		return strings.Join(parts, " ")
	}

	rows[4].name = fmt.Sprintf("mergeUpdates first %d", last.js.MergeCount)
	var sb strings.Builder
	fmt.Fprintf(&sb, "B4 trace: %d ops, final length %d (JS %d); state %d bytes (JS %d)\n", len(ops), d.GetText("text").Len(), last.js.FinalLength, len(state), last.js.StateBytes)
	fmt.Fprintf(&sb, "medians of %d repeats, each repeat JS then ours; ours/JS is the median of the repeats' ratios\n", repeats)
	fmt.Fprintf(&sb, "%-30s %12s %12s %8s  %-16s %s\n", "work", "ours", "JS", "ours/JS", "target", "ours/JS per repeat")
	for _, r := range rows {
		fmt.Fprintf(&sb, "%-30s %12.2f %12.2f %8.3f  %-16s %s\n", r.name, median(r.ours), median(r.js), median(r.jsOf), r.target, list(r.jsOf, "%.3f"))
	}
	fmt.Fprintf(&sb, "%-30s %12.2f %12s %8s  %s\n", fmt.Sprintf("mergeUpdates all %d (ms)", len(ops)), median(mergeAll), "-", "-", "< 1000 ms")
	fmt.Fprintf(&sb, "heap of the final doc: %.2f× its state (per repeat %s); loaded from its state: %.2f×\n",
		median(heapPerState), list(heapPerState, "%.2f"), median(decodedPerState))
	fmt.Fprintf(&sb, "allocs/op (last repeat): apply %d, capture %d, encode %d, decode %d, merge10k %d, mergeAll %d",
		last.apply.AllocsPerOp(), last.capture.AllocsPerOp(), last.encode.AllocsPerOp(), last.decode.AllocsPerOp(), last.merge10k.AllocsPerOp(), last.mergeAll.AllocsPerOp())
	t.Log("\n" + sb.String())
}

func startOracle(t *testing.T) *oracle.Client { return oracle.Start(t) }

// TestLoadedDocsMemory loads many documents of about 30 KB each into this process (as a
// hub with that many active documents holds them) and prints the memory each costs: the
// resident set growth and the Go heap growth per document, and their ratio to the encoded
// state. The document is a prefix of the B4 trace (B4_TRACE; the synthetic trace without
// it) cut where its state reaches 30 KB; every copy is loaded by ApplyUpdate of that state
// into a new Doc. It runs only with NOMICORE_B4_REPORT=1, in a process of its own (make
// bench-yjs), so that the resident set is not inflated by other work:
//
//	NOMICORE_B4_REPORT=1 go test ./yjs -run TestLoadedDocsMemory -v
//
// NOMICORE_LOADED_DOCS sets the number of documents (10000).
func TestLoadedDocsMemory(t *testing.T) {
	if os.Getenv("NOMICORE_B4_REPORT") != "1" {
		t.Skip("set NOMICORE_B4_REPORT=1 to measure the memory of many loaded documents")
	}
	n := 10000
	if s := os.Getenv("NOMICORE_LOADED_DOCS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n <= 0 {
			t.Fatalf("NOMICORE_LOADED_DOCS=%q: want a positive number", s)
		}
	}
	state := docOfStateSize(t, loadB4(t), 30_000)
	docs := make([]*Doc, 0, n)
	measure := func() (rss, heap uint64) {
		runtime.GC()
		debug.FreeOSMemory()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return residentBytes(t), ms.HeapAlloc
	}
	rss0, heap0 := measure()
	for i := 0; i < n; i++ {
		d := NewDoc(WithClientID(uint32(i + 1)))
		if err := ApplyUpdate(d, state, nil); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, d)
	}
	rss1, heap1 := measure()
	perRSS := (float64(rss1) - float64(rss0)) / float64(n)
	perHeap := (float64(heap1) - float64(heap0)) / float64(n)
	trace := "the B4 trace"
	if b4.path == "" {
		trace = "the synthetic trace (B4_TRACE is not set)"
	}
	t.Logf("\n%d loaded documents of a %d-byte state (a prefix of %s): RSS %.0f bytes per document (%.2f× the state), Go heap %.0f bytes per document (%.2f× the state); RSS %.0f MiB in all",
		n, len(state), trace, perRSS, perRSS/float64(len(state)), perHeap, perHeap/float64(len(state)), float64(rss1)/(1<<20))
	runtime.KeepAlive(docs)
}

// docOfStateSize replays ops until the document's encoded state reaches size bytes and
// returns that state.
func docOfStateSize(t *testing.T, ops []b4Op, size int) []byte {
	d := NewDoc(WithClientID(b4Client))
	txt := d.GetText("text")
	for i, op := range ops {
		var err error
		if op.insert != "" {
			err = txt.Insert(op.pos, op.insert, nil)
		} else {
			err = txt.Delete(op.pos, 1)
		}
		if err != nil {
			t.Fatalf("op %d %+v: %v", i, op, err)
		}
		if i%256 == 255 {
			if st, _ := EncodeStateAsUpdate(d, nil); len(st) >= size {
				return st
			}
		}
	}
	t.Fatalf("the whole trace gives a state below %d bytes", size)
	return nil
}

// residentBytes is the resident set size of this process (Linux /proc).
func residentBytes(t *testing.T) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no resident set size on this system: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS line %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Skip("no VmRSS in /proc/self/status")
	return 0
}
