package yjs

import (
	"bytes"
	"testing"
)

// Doc.EncodeStateVector encodes from the struct store directly: the bytes must be those of
// the state vector map encoded the general way (clients highest first), for clients whose
// ids and clocks take one to five varint bytes.
func TestDocEncodeStateVectorMatchesTheMapEncoding(t *testing.T) {
	d := NewDoc(WithClientID(7))
	for i, id := range []uint32{1, 127, 128, 300, 1 << 20, 1<<32 - 1, 99} {
		w := NewDoc(WithClientID(id))
		text := w.GetText("t")
		for j := 0; j <= i*40; j++ {
			if err := text.Insert(0, "ab", nil); err != nil {
				t.Fatal(err)
			}
		}
		u, err := EncodeStateAsUpdate(w, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := ApplyUpdate(d, u, nil); err != nil {
			t.Fatal(err)
		}
		got, want := d.EncodeStateVector(), EncodeStateVector(d.store.stateVector())
		if !bytes.Equal(got, want) {
			t.Fatalf("after %d clients: %x, want %x", i+1, got, want)
		}
		sv, err := DecodeStateVector(got)
		if err != nil || len(sv) != i+1 || sv[uint64(id)] != uint64(2*(i*40+1)) {
			t.Fatalf("after %d clients: decoded %v (%v)", i+1, sv, err)
		}
	}
	if got := NewDoc().EncodeStateVector(); !bytes.Equal(got, []byte{0}) {
		t.Fatalf("empty document: %x", got)
	}
}
