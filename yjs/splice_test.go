package yjs

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestSpliceMergeIsTheFullMerge: on random histories (items, deletions, maps, nested types),
// windows of consecutive updates in any order are merged by MergeUpdates's splice path
// whenever it applies, and then to exactly the bytes of the full struct-by-struct merge; the
// splice path must have applied often, and must refuse windows with a client's update
// missing (a gap).
func TestSpliceMergeIsTheFullMerge(t *testing.T) {
	spliced, gaps := 0, 0
	for seed := uint64(1); seed <= 120; seed++ {
		g := threeClientHistory(t, seed, 0x31, 40, seed%2 == 0)
		for range 10 {
			i := g.pick(len(g.updates))
			j := i + 1 + g.pick(len(g.updates)-i)
			win := append([][]byte(nil), g.updates[i:j]...)
			g.rng.Shuffle(len(win), func(a, b int) { win[a], win[b] = win[b], win[a] })
			if len(win) > 2 && g.pick(2) == 0 {
				win = append(win[:1], win[2:]...) // may leave a gap in a client's clocks
			}
			full, err := mergeInFull(win)
			must(t, err)
			got, ok := spliceMerge(win, nil)
			if !ok {
				continue
			}
			spliced++
			if !bytes.Equal(got, full) {
				t.Fatalf("seed %d, updates %d..%d: spliced merge differs from the full merge", seed, i, j)
			}
		}
	}
	// A client's second update without its first: a gap.
	a := NewDoc(WithClientID(7))
	var us [][]byte
	a.OnUpdate(func(u []byte, _ any) { us = append(us, u) })
	for k := range 3 {
		must(t, a.GetText("t").Insert(k, "x", nil))
	}
	if _, ok := spliceMerge([][]byte{us[0], us[2]}, nil); ok {
		gaps++
	}
	if gaps != 0 {
		t.Fatal("a gap in a client's clocks was spliced")
	}
	if spliced < 50 {
		t.Fatalf("the splice path applied to %d windows only", spliced)
	}
}

// TestSpliceMergeRelaysConcurrentAppends: what a relay merges — the updates of several
// clients appending to one text, in arrival order — goes by the splice path, equals the full
// merge, and applied to a fresh document gives the same text as applying the updates one by
// one; a malformed update among them is the full merge's error.
func TestSpliceMergeRelaysConcurrentAppends(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	const clients = 5
	docs := make([]*Doc, clients)
	var all [][]byte
	for i := range docs {
		docs[i] = NewDoc(WithClientID(uint32(100 + i)))
		recordLocalUpdates(docs[i], &all)
	}
	for range 200 {
		d := docs[rng.IntN(clients)]
		txt := d.GetText("t")
		must(t, txt.Insert(txt.Len(), fmt.Sprintf("<%d>", rng.IntN(1000)), nil))
		if rng.IntN(4) == 0 { // exchange: later inserts have origins in other clients
			for _, o := range docs {
				st, err := EncodeStateAsUpdate(d, nil)
				must(t, err)
				must(t, ApplyUpdate(o, st, "sync"))
			}
		}
	}
	for start := 0; start < len(all); start += 37 {
		win := all[start:min(start+37, len(all))]
		got, ok := spliceMerge(win, nil)
		if !ok {
			t.Fatalf("window at %d: the splice path refused concurrent appends", start)
		}
		full, err := mergeInFull(win)
		must(t, err)
		if !bytes.Equal(got, full) {
			t.Fatalf("window at %d: spliced merge differs from the full merge", start)
		}
	}
	merged, err := MergeUpdates(all)
	must(t, err)
	one, whole := NewDoc(), NewDoc()
	for _, u := range all {
		must(t, ApplyUpdate(one, u, nil))
	}
	must(t, ApplyUpdate(whole, merged, nil))
	if one.GetText("t").String() != whole.GetText("t").String() {
		t.Fatal("the merged update gives another text")
	}
	bad := append(append([]byte(nil), all[1]...), 0) // a trailing byte
	if _, err := MergeUpdates([][]byte{all[0], bad}); err == nil {
		t.Fatal("a malformed update merged")
	}
}

// BenchmarkMergeRelayedAppends: what a hub merges for one receiver under fan-out — 32 small
// appends of 19 other clients to one text, in arrival order.
func BenchmarkMergeRelayedAppends(b *testing.B) {
	const clients = 19
	docs := make([]*Doc, clients)
	var all [][]byte
	for i := range docs {
		docs[i] = NewDoc(WithClientID(uint32(1000 + i)))
		recordLocalUpdates(docs[i], &all)
	}
	for k := range 64 {
		d := docs[k%clients]
		txt := d.GetText("t")
		must(b, txt.Insert(txt.Len(), "abcdefghijklmnopqrst", nil))
		st, err := EncodeStateAsUpdate(d, nil)
		must(b, err)
		for _, o := range docs {
			must(b, ApplyUpdate(o, st, "sync"))
		}
	}
	win := all[len(all)-32:]
	for _, path := range []struct {
		name  string
		merge func([][]byte) ([]byte, error)
	}{{"MergeUpdates", MergeUpdates}, {"full", mergeInFull}} {
		b.Run(path.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := path.merge(win); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(win)), "ns/update")
		})
	}
}
