package yjs

import (
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/nomicore/nomicore/internal/testkit/oracle"
	"github.com/nomicore/nomicore/lib0"
)

// Items keep their ids, length and origins as 32-bit numbers, and the few that do not fit in
// an itemWide (item.go). JS yjs makes 32-bit client ids and small clocks, so its histories
// never reach the wide layout; here they are rewritten to: some clients get ids beyond 32 bits,
// some get clocks beyond 32 bits (their structs move up by 2^33, behind a GC struct that
// covers the clocks below), some both. Both sides apply the same rewritten updates in one
// random order; the JSON, the state vector and the encoded state (full and against a state
// vector) must be JS's, and each side must read the other's state to the same JSON. (New
// client ids can order concurrent edits differently: the document may differ from the
// original history's.)

// wideShift moves a client's id and clocks.
type wideShift struct{ id, clock uint64 }

func (w wideShift) mapID(id ID) ID { return ID{id.Client + w.id, id.Clock + w.clock} }

// rewriteUpdate returns u with the ids and clocks of the clients in m moved. A block that
// starts at clock 0 of a client whose clocks move begins with a GC struct of their shift.
func rewriteUpdate(t *testing.T, u []byte, m map[uint64]wideShift) []byte {
	t.Helper()
	d := lib0.NewDecoder(u)
	r := newStructReader(d, true)
	type block struct {
		client uint64
		e      *lib0.Encoder // the block after its client
	}
	var blocks []block
	var s rawStruct
	mapped := func(id ID) ID { return m[id.Client].mapID(id) }
	for r.nextBlock() {
		w := m[r.client]
		e := lib0.NewEncoder(64)
		n := uint64(r.structsLeft)
		gcPrefix := w.clock > 0 && r.clock == 0
		if gcPrefix {
			n++
		}
		e.WriteVarUint(n)
		e.WriteVarUint(r.client + w.id)
		if gcPrefix {
			e.WriteVarUint(0)
			e.WriteUint8(refGC)
			e.WriteVarUint(w.clock)
		} else {
			e.WriteVarUint(r.clock + w.clock)
		}
		client := r.client
		for r.next(&s) {
			s.id = mapped(s.id)
			if s.hasOrigin {
				s.origin = mapped(s.origin)
			}
			if s.hasRight {
				s.rightOrigin = mapped(s.rightOrigin)
			}
			if s.parent == parentItem {
				s.parentID = mapped(s.parentID)
			}
			s.write(e, 0)
		}
		blocks = append(blocks, block{client + w.id, e})
	}
	ds := readDeleteSet(d)
	if err := d.Finish(); err != nil {
		t.Fatalf("rewriting an update: %v", err)
	}
	var out deleteSet
	for _, en := range ds.entries {
		w := m[en.client]
		for _, rg := range en.ranges {
			out.add(en.client+w.id, rg.clock+w.clock, rg.len)
		}
	}
	// blocks in the order JS writes them: higher client ids first
	slices.SortFunc(blocks, func(a, b block) int {
		switch {
		case a.client > b.client:
			return -1
		case a.client < b.client:
			return 1
		}
		return 0
	})
	e := lib0.NewEncoder(len(u) + 64)
	e.WriteVarUint(uint64(len(blocks)))
	for _, b := range blocks {
		e.WriteRaw(b.e.Bytes())
	}
	out.write(e)
	return e.Bytes()
}

func TestDifferentialWideIDs(t *testing.T) {
	js := oracle.Start(t)
	forSeeds(t, historyCount(t, 300, 40), func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 0x31de))
		gc := rng.IntN(4) != 0
		h, err := js.History(oracle.HistoryRequest{Seed: seed, Clients: 1 + rng.IntN(4), Steps: 5 + rng.IntN(45), NoGC: !gc})
		if err != nil {
			t.Fatal(err)
		}
		m := map[uint64]wideShift{}
		for _, c := range h.Clients {
			var w wideShift
			switch rng.IntN(4) {
			case 1:
				w.id = 1 << 40
			case 2:
				w.clock = 1 << 33
			case 3:
				w = wideShift{id: 1<<52 - 1<<32, clock: 1<<50 + 1<<32}
			}
			m[uint64(c)] = w
		}
		ups := h.UpdateBytes()
		order := make([][]byte, len(ups))
		for i, p := range rng.Perm(len(ups)) {
			order[i] = rewriteUpdate(t, ups[p], m)
		}
		roots := rootKinds(h.Roots)
		prefix := rng.IntN(len(order) + 1)
		ours := newRootedDoc(t, gc, roots)
		applyAll(t, ours, order[:prefix])
		prefixSV := ours.EncodeStateVector()
		applyAll(t, ours, order[prefix:])

		res, err := js.Apply(oracle.ApplyRequest{Updates: order, Roots: h.Roots, NoGC: !gc, StateVectors: [][]byte{prefixSV}})
		if err != nil {
			t.Fatal(err)
		}
		agreeWithJS(t, js, ours, res, h.Roots, gc, []namedSV{{"prefix sv", prefixSV}})
	})
}

// TestItemSize: a document holds one item per struct; the layout must stay within 64 bytes
// (the allocation size class it fills).
func TestItemSize(t *testing.T) {
	if n := unsafe.Sizeof(item{}); n > 64 {
		t.Fatalf("an item takes %d bytes", n)
	}
}

// TestItemKeepsItsValues sets an item's values one after the other, in every order, each
// value compact or beyond 32 bits, with and without a map key, and reads them all back after
// every step: moving to an itemWide or a keyedData must lose nothing.
func TestItemKeepsItsValues(t *testing.T) {
	type vals struct {
		id, origin, right ID
		length            uint64
		sub               string
		hasSub            bool
	}
	data := &contentAny{vals: []any{"v"}}
	check := func(t *testing.T, it *item, want vals, set [5]bool) {
		t.Helper()
		if set[0] && it.id() != want.id {
			t.Fatalf("id %v, want %v", it.id(), want.id)
		}
		if set[1] && it.origin() != want.origin {
			t.Fatalf("origin %v, want %v", it.origin(), want.origin)
		}
		if set[2] && it.rightOrigin() != want.right {
			t.Fatalf("right origin %v, want %v", it.rightOrigin(), want.right)
		}
		if set[3] && it.len() != want.length {
			t.Fatalf("length %d, want %d", it.len(), want.length)
		}
		if set[4] && (it.hasSub() != want.hasSub || it.parentSub() != want.sub) {
			t.Fatalf("key %v %q, want %v %q", it.hasSub(), it.parentSub(), want.hasSub, want.sub)
		}
		if it.detached() != content(data) {
			t.Fatal("the content changed")
		}
	}
	big := uint64(1<<53 - 1)
	for mask := 0; mask < 1<<5; mask++ {
		wide := func(i int) bool { return mask&(1<<i) != 0 }
		num := func(i int, small uint64) uint64 {
			if wide(i) {
				return big - small
			}
			return small
		}
		want := vals{
			id:     ID{num(0, 7), 3},
			origin: ID{5, num(1, 2)},
			right:  ID{num(2, 9), num(2, 4)},
			length: num(3, 1),
			hasSub: wide(4),
		}
		if want.hasSub {
			want.sub = "key"
		}
		for _, order := range [][5]int{{0, 1, 2, 3, 4}, {4, 3, 2, 1, 0}, {4, 0, 1, 2, 3}, {3, 4, 1, 0, 2}} {
			it := &item{ref: refAny}
			it.setCData(unsafe.Pointer(data))
			var set [5]bool
			for _, step := range order {
				switch step {
				case 0:
					it.setID(want.id)
				case 1:
					it.setOrigin(want.origin)
				case 2:
					it.setRightOrigin(want.right)
				case 3:
					it.setLen(want.length)
				case 4:
					it.setParentSub(want.sub, want.hasSub)
				}
				set[step] = true
				check(t, it, want, set)
			}
			if want.hasSub {
				it.setParentSub("", false)
				want2 := want
				want2.hasSub, want2.sub = false, ""
				check(t, it, want2, set)
			}
		}
	}
}
