package yjs

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/nomicore/nomicore/lib0"
)

// jsUpdate is a v1 update made by JS yjs (testdata/vectors.json, "text typing and
// deleting", first update): client 7 inserts "hello" into the root text.
const jsUpdate = "01010700040104746578740568656c6c6f00"

// snapshot is everything observable about a document, to check that a refused update left
// it untouched.
func snapshot(t *testing.T, d *Doc) []byte {
	t.Helper()
	st, err := EncodeStateAsUpdate(d, nil)
	must(t, err)
	return append(append(st, d.EncodeStateVector()...), docJSON(t, d)...)
}

// malformed are updates that break one rule each, with the error they must produce.
var malformed = []struct {
	name string
	hex  string
	kind error
}{
	{"empty", "", lib0.ErrTruncated},
	{"trailing byte", jsUpdate + "00", lib0.ErrTrailing},
	{"non-canonical varint", "0181000700040104746578740568656c6c6f00", lib0.ErrNonCanonical},
	{"invalid UTF-8", "01010700040104746578740568656cff6f00", lib0.ErrInvalidUTF8},
	{"unknown content ref", "010107000b00", ErrContentRef},
	{"GC with flag bits", "0101070080050000", ErrContentRef},
	{"parent info 2", "01010700040204746578740568656c6c6f00", ErrParentInfo},
	{"empty string content", "0101070004010474657874000000", ErrZeroLength},
	{"zero-length GC", "0101070000000000", ErrZeroLength},
	{"zero-length delete range", "00010701000000", ErrZeroLength},
	{"clock beyond 2^53", "010107ffffffffffffff0f000200", ErrClockRange},
	{"origin at own clock", "0101070284070205" + "68656c6c6f00", ErrSelfReference},
	{"unknown type ref", "01010700070104746578740700", ErrTypeRef},
	{"subdoc options null", "01010700090104746578740167" + "7e00", ErrDocOptions},
	{"invalid JSON content", "010107000201047465787401017b00", ErrJSON},
	{"count beyond input", "ff0100", lib0.ErrLength},
	{"truncated delete set", "000107010585", lib0.ErrTruncated},
}

func TestDecodeRejectsMalformedUpdates(t *testing.T) {
	for _, c := range malformed {
		t.Run(c.name, func(t *testing.T) {
			u, err := hex.DecodeString(c.hex)
			must(t, err)
			d := NewDoc(WithClientID(1))
			must(t, d.GetText("text").Insert(0, "abc", nil))
			before := snapshot(t, d)
			err = ApplyUpdate(d, u, nil)
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("ApplyUpdate: %v, want a *DecodeError", err)
			}
			if c.kind != nil && !errors.Is(err, c.kind) {
				t.Fatalf("ApplyUpdate: %v, want %v", err, c.kind)
			}
			if !bytes.Equal(snapshot(t, d), before) {
				t.Fatal("a refused update changed the document")
			}
			for name, f := range map[string]func() error{
				"MergeUpdates": func() error { _, err := MergeUpdates([][]byte{unhex(t, jsUpdate), u}); return err },
				"DiffUpdate":   func() error { _, err := DiffUpdate(u, []byte{0}); return err },
				"EncodeStateVectorFromUpdate": func() error {
					_, err := EncodeStateVectorFromUpdate(u)
					return err
				},
				"InspectUpdate": func() error { _, err := InspectUpdate(d, u, "meta"); return err },
			} {
				if err := f(); !errors.As(err, &de) {
					t.Errorf("%s: %v, want a *DecodeError", name, err)
				}
			}
		})
	}
}

func TestDecodeRejectsEveryTruncation(t *testing.T) {
	for _, lv := range loadVectors(t).Local {
		st := unhex(t, lv.State)
		for n := 0; n < len(st); n++ {
			d := NewDoc()
			err := ApplyUpdate(d, st[:n], nil)
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("%s: prefix %d: %v, want a *DecodeError", lv.Name, n, err)
			}
			if len(d.store.clients) != 0 || d.HasPending() {
				t.Fatalf("%s: prefix %d changed the document", lv.Name, n)
			}
		}
	}
}

func TestDecodeStateVector(t *testing.T) {
	sv, err := DecodeStateVector([]byte{2, 5, 10, 5, 12})
	must(t, err)
	if len(sv) != 1 || sv[5] != 12 {
		t.Fatalf("a repeated client keeps its last clock (as JS): %v", sv)
	}
	sv, err = DecodeStateVector(EncodeStateVector(StateVector{1: 2, 1 << 40: 7, 300: 0}))
	must(t, err)
	if len(sv) != 3 || sv[1<<40] != 7 || sv[300] != 0 || sv[1] != 2 {
		t.Fatalf("round trip: %v", sv)
	}
	for _, bad := range [][]byte{{}, {1, 5}, {1, 5, 1, 0}, {1, 0x80, 0}, {3, 1, 1}} {
		if _, err := DecodeStateVector(bad); err == nil {
			t.Errorf("%x accepted", bad)
		}
	}
	if _, err := EncodeStateAsUpdate(NewDoc(), []byte{1}); err == nil {
		t.Error("EncodeStateAsUpdate accepted a truncated state vector")
	}
}
