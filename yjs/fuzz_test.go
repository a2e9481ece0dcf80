package yjs

import (
	"bytes"
	"errors"
	"testing"
)

// Fuzz targets for every decoder, seeded with updates and state vectors made by JS yjs
// (testdata/vectors.json).

func seedUpdates(f *testing.F) [][]byte {
	v := loadVectors(f)
	var out [][]byte
	for _, lv := range v.Local {
		for _, u := range lv.Updates {
			out = append(out, unhex(f, u))
		}
		out = append(out, unhex(f, lv.State))
	}
	for _, rv := range v.Remote {
		for _, u := range rv.Updates {
			out = append(out, unhex(f, u))
		}
		out = append(out, unhex(f, rv.State), unhex(f, rv.Diff))
	}
	return out
}

// FuzzApplyUpdate: any input either is refused with a *DecodeError, leaving the document
// as it was, or is applied; the state of an applied document decodes and brings a fresh
// document to the same state vector. (Not to the same JSON: hostile origins can order items
// differently depending on the integration order — JS yjs behaves the same.)
func FuzzApplyUpdate(f *testing.F) {
	for _, u := range seedUpdates(f) {
		f.Add(u)
	}
	base := unhex(f, loadVectors(f).Remote[0].State)
	f.Fuzz(func(t *testing.T, u []byte) {
		for _, withBase := range []bool{false, true} {
			d := NewDoc(WithClientID(99), WithRandom(zeroReader{}))
			if withBase {
				must(t, ApplyUpdate(d, base, nil))
			}
			before := snapshot(t, d)
			err := ApplyUpdate(d, u, nil)
			if err != nil {
				var de *DecodeError
				if !errors.As(err, &de) {
					t.Fatalf("not a decode error: %v", err)
				}
				if !bytes.Equal(snapshot(t, d), before) {
					t.Fatal("a refused update changed the document")
				}
				continue
			}
			st, err := EncodeStateAsUpdate(d, nil)
			must(t, err)
			r := NewDoc(WithClientID(98), WithRandom(zeroReader{}))
			must(t, ApplyUpdate(r, st, nil))
			if d.HasPending() {
				// pending structs are merged into the state as they are, even when they
				// collide with known ids (as in JS): nothing more to compare
				continue
			}
			if !bytes.Equal(r.EncodeStateVector(), d.EncodeStateVector()) {
				t.Fatal("the state does not reproduce the state vector")
			}
		}
	})
}

// FuzzMergeUpdates: merging never panics; a merge of valid updates is a valid update that
// applies, diffs and yields a state vector. (Whether it equals applying the updates one by
// one depends on the inputs agreeing on the content of each id, which fuzz input need not;
// the differential tests check merges of real updates against JS.)
func FuzzMergeUpdates(f *testing.F) {
	seeds := seedUpdates(f)
	for i := range seeds {
		f.Add(seeds[i], seeds[(i+1)%len(seeds)])
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		merged, err := MergeUpdates([][]byte{a, b})
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("not a decode error: %v", err)
			}
			return
		}
		if err := validateUpdate(merged, true); err != nil {
			t.Fatalf("merged update does not decode: %v", err)
		}
		d := NewDoc(WithRandom(zeroReader{}))
		must(t, ApplyUpdate(d, merged, nil))
		if _, err := DiffUpdate(merged, d.EncodeStateVector()); err != nil {
			t.Fatal(err)
		}
		if _, err := EncodeStateVectorFromUpdate(merged); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzDecodeStateVector: any input is refused or decodes to a vector that re-encodes to an
// equivalent one; DiffUpdate accepts exactly the state vectors that decode.
func FuzzDecodeStateVector(f *testing.F) {
	v := loadVectors(f)
	for _, lv := range v.Local {
		f.Add(unhex(f, lv.StateVector))
	}
	for _, rv := range v.Remote {
		f.Add(unhex(f, rv.StateVector))
		f.Add(unhex(f, rv.DiffAgainst))
	}
	update := unhex(f, v.Remote[0].State)
	f.Fuzz(func(t *testing.T, b []byte) {
		sv, err := DecodeStateVector(b)
		_, derr := DiffUpdate(update, b)
		if (err == nil) != (derr == nil) {
			t.Fatalf("DecodeStateVector %v, DiffUpdate %v", err, derr)
		}
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("not a decode error: %v", err)
			}
			return
		}
		again, err := DecodeStateVector(EncodeStateVector(sv))
		must(t, err)
		if len(again) != len(sv) {
			t.Fatal("round trip lost clients")
		}
		for c, clock := range sv {
			if again[c] != clock {
				t.Fatal("round trip changed a clock")
			}
		}
	})
}
