package yjs

import (
	"testing"

	"github.com/nomicore/nomicore/lib0"
)

// fullChunkText returns a document whose client 1 owns exactly chunkMax structs, all in one
// chunk: chunkMax inserts of two characters, each at the start of the text (an item inserted
// before the previous one never merges with it). Struct k holds clock 2k and 2k+1 and sits
// at text position 2(chunkMax-1-k). want is the text, for a model to edit.
func fullChunkText(t *testing.T) (d *Doc, want []byte) {
	t.Helper()
	d = NewDoc(WithClientID(1))
	txt := d.GetText("text")
	for k := 0; k < chunkMax; k++ {
		s := string([]byte{'a' + byte(k%26), 'A' + byte(k%26)})
		if err := txt.Insert(0, s, nil); err != nil {
			t.Fatal(err)
		}
		want = append([]byte(s), want...)
	}
	l := d.store.clients[1]
	if len(l.chunks) != 1 || len(l.chunks[0]) != chunkMax {
		t.Fatalf("setup: %d chunks, first of %d structs; want one chunk of %d", len(l.chunks), len(l.chunks[0]), chunkMax)
	}
	return d, want
}

// splitCandidates are the structs k of fullChunkText whose range [2k, 2k+3) the split tests
// delete: every one in a small-chunk build, else the first, those around the middle of the
// chunk (where the chunk splits) and some beyond it, up to the last with a successor.
func splitCandidates() []int {
	var ks []int
	for k := 0; k <= chunkMax-2; k++ {
		if chunkMax <= 64 || k == 0 || k == chunkMax-2 || (k >= chunkMax/2-2 && k <= chunkMax/2+2) || k%61 == 0 {
			ks = append(ks, k)
		}
	}
	return ks
}

// deleteUpdate is a v1 update holding no structs and one delete range of client.
func deleteUpdate(client, clock, length uint64) []byte {
	e := lib0.NewEncoder(16)
	e.WriteVarUint(0) // no struct blocks
	e.WriteVarUint(1) // one client in the delete set
	e.WriteVarUint(client)
	e.WriteVarUint(1) // one range
	e.WriteVarUint(clock)
	e.WriteVarUint(length)
	return e.Bytes()
}

// TestDeleteRangeEndSplitsFullChunk: a remote deletion whose last struct is split in a chunk
// that is full moves that struct into the new right half of the chunk. The deletion must
// delete exactly its range; the walk over the range used to go on from a stale position and
// deleted the live structs between the chunk's middle and the range.
func TestDeleteRangeEndSplitsFullChunk(t *testing.T) {
	for _, k := range splitCandidates() {
		d, want := fullChunkText(t)
		// struct k whole, and the first character of struct k+1
		clock := uint64(2 * k)
		if err := ApplyUpdate(d, deleteUpdate(1, clock, 3), nil); err != nil {
			t.Fatal(err)
		}
		// text positions: struct k at 2(chunkMax-1-k), struct k+1 just before it
		posK := 2 * (chunkMax - 1 - k)
		posK1 := posK - 2
		exp := string(want[:posK1]) + string(want[posK1+1:posK1+2]) + string(want[posK+2:])
		if got := d.GetText("text").String(); got != exp {
			t.Fatalf("delete [%d,%d): text has %d characters, want %d (%d live characters deleted)", clock, clock+3, len(got), len(exp), len(exp)-len(got))
		}
		checkStructList(t, d.store.clients[1])
		if n := d.StructCounts()[1]; n != chunkMax+1 {
			t.Fatalf("StructCounts: client 1 owns %d structs, want %d", n, chunkMax+1)
		}
		// the deleted units and nothing else
		ds := deleteSetFromStore(&d.store)
		if en := ds.entry(1); len(en.ranges) != 1 || en.ranges[0] != (delRange{clock, 3}) {
			t.Fatalf("delete [%d,%d): deleted ranges %v", clock, clock+3, en.ranges)
		}
	}
}

// TestReplayAsOlderVersions: the replay that stands for older versions deletes, besides the
// range, the live structs from the middle of the split chunk up to the range, as those
// versions did (checked against them when the fix was made: 1019, 933, 733 and 513
// characters for ranges from structs 257, 300, 400 and 510 of a 512-struct chunk).
func TestReplayAsOlderVersions(t *testing.T) {
	for _, k := range splitCandidates() {
		src, _ := fullChunkText(t)
		state, err := EncodeStateAsUpdate(src, nil)
		if err != nil {
			t.Fatal(err)
		}
		d, err := ReplayAsOlderVersions([][]byte{state, deleteUpdate(1, uint64(2*k), 3)})
		if err != nil {
			t.Fatal(err)
		}
		lost := max(0, k-(chunkMax+1)/2) // structs (chunkMax+1)/2 … k-1 of the 513-struct chunk
		if got, want := d.GetText("text").Len(), 2*chunkMax-3-2*lost; got != want {
			t.Fatalf("range from struct %d: %d characters, want %d", k, got, want)
		}
	}
	if _, err := ReplayAsOlderVersions([][]byte{{0xff}}); err == nil {
		t.Fatal("a malformed update replayed")
	}
}

// TestIterateStructsEndSplitsFullChunk: iterateStructs over a range whose end splits a
// struct of a full chunk visits exactly the structs of the range.
func TestIterateStructsEndSplitsFullChunk(t *testing.T) {
	for _, k := range splitCandidates() {
		d, _ := fullChunkText(t)
		l := d.store.clients[1]
		start, end := uint64(2*k), uint64(2*k+3)
		var seen []ID
		d.Transact(nil, func(tx *Transaction) {
			d.iterateStructs(tx, l, start, end-start, func(it *item) {
				seen = append(seen, it.id())
				if it.clock() < start || it.endClock() > end {
					t.Errorf("visited %d:%d (length %d) outside [%d,%d)", it.client(), it.clock(), it.len(), start, end)
				}
			})
		})
		if len(seen) != 2 || seen[0] != (ID{1, start}) || seen[1] != (ID{1, start + 2}) {
			t.Fatalf("range [%d,%d): visited %v, want %d:%d and %d:%d", start, end, seen, 1, start, 1, start+2)
		}
		checkStructList(t, l)
	}
}

// checkStructList checks the invariants of a struct list: no empty chunk, no chunk over
// chunkMax, structs contiguous from clock 0, and n counting them.
func checkStructList(t testing.TB, l *structList) {
	t.Helper()
	var next uint64
	n := 0
	for c, ch := range l.chunks {
		if len(ch) == 0 {
			t.Fatalf("chunk %d of %d is empty", c, len(l.chunks))
		}
		if len(ch) > chunkMax {
			t.Fatalf("chunk %d holds %d structs, more than %d", c, len(ch), chunkMax)
		}
		for i, it := range ch {
			if it.clock() != next {
				t.Fatalf("struct %d of chunk %d starts at clock %d, want %d", i, c, it.clock(), next)
			}
			next = it.endClock()
			n++
		}
	}
	if n != l.n {
		t.Fatalf("the list counts %d structs, holds %d", l.n, n)
	}
}
