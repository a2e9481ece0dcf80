package yjs

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/nomicore/nomicore/internal/testkit"
)

// hubAndPeer returns a document with a meta map written by the hub (client 1) and a peer
// replica (client 2) of it.
func hubAndPeer(t *testing.T) (hub, peer *Doc) {
	hub = NewDoc(WithClientID(1))
	meta := hub.GetMap("meta")
	must(t, meta.Set("replicationId", "0123456789abcdef0123456789abcdef"))
	must(t, meta.Set("replicationEpoch", 1))
	must(t, hub.GetText("body").Insert(0, "hello", nil))
	peer = NewDoc(WithClientID(2))
	st, err := EncodeStateAsUpdate(hub, nil)
	must(t, err)
	must(t, ApplyUpdate(peer, st, nil))
	return hub, peer
}

// peerUpdate runs fn on the peer and returns the update it produced.
func peerUpdate(t *testing.T, peer *Doc, fn func()) []byte {
	t.Helper()
	var u []byte
	off := peer.OnUpdate(func(b []byte, _ any) { u = b })
	fn()
	off()
	if u == nil {
		t.Fatal("no update")
	}
	return u
}

func TestInspectUpdateProtectedRoot(t *testing.T) {
	hub, peer := hubAndPeer(t)
	cases := []struct {
		name            string
		edit            func()
		inserts, delete bool
	}{
		{"overwrite meta key", func() { must(t, peer.GetMap("meta").Set("replicationEpoch", 2)) }, true, true},
		{"set new meta key", func() { must(t, peer.GetMap("meta").Set("x", "y")) }, true, false},
		{"delete meta key", func() { must(t, peer.GetMap("meta").Delete("replicationId")) }, false, true},
		{"nested type under meta", func() { must(t, peer.GetMap("meta").Set("schema", NewMap())) }, true, false},
		{"edit another root", func() { must(t, peer.GetText("body").Insert(5, " world", nil)) }, false, false},
		{"delete in another root", func() { must(t, peer.GetText("body").Delete(0, 2)) }, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, p := hubAndPeer(t)
			peer = p
			u := peerUpdate(t, peer, c.edit)
			eff, err := InspectUpdate(hub, u, "meta")
			must(t, err)
			if eff.Inserts != c.inserts || eff.Deletes != c.delete || len(eff.Waiting) != 0 {
				t.Fatalf("effect %+v, want inserts %v deletes %v", eff, c.inserts, c.delete)
			}
		})
	}
}

func TestInspectUpdateNestedAndWaiting(t *testing.T) {
	hub, peer := hubAndPeer(t)
	// the hub creates a nested map under meta; the peer edits inside it
	must(t, hub.GetMap("meta").Set("schema", NewMap()))
	st, _ := EncodeStateAsUpdate(hub, peer.EncodeStateVector())
	must(t, ApplyUpdate(peer, st, nil))
	v, _ := peer.GetMap("meta").Get("schema")
	u := peerUpdate(t, peer, func() { must(t, v.(*Map).Set("definition", "x")) })
	eff, err := InspectUpdate(hub, u, "meta")
	must(t, err)
	if !eff.Inserts {
		t.Fatalf("edit inside a nested type under meta not seen: %+v", eff)
	}
	// an update whose structs come after a missing one of the peer waits on the peer
	u1 := peerUpdate(t, peer, func() { must(t, peer.GetText("body").Insert(0, "a", nil)) })
	u2 := peerUpdate(t, peer, func() { must(t, peer.GetMap("meta").Set("k", 1)) })
	_ = u1
	eff, err = InspectUpdate(hub, u2, "meta")
	must(t, err)
	if !eff.Inserts {
		t.Fatalf("a struct whose own client has a gap but whose origin is known must still be placed: %+v", eff)
	}
	// a struct whose origin is missing waits on its client
	other := NewDoc(WithClientID(3))
	must(t, ApplyUpdate(other, u1, nil))
	must(t, ApplyUpdate(other, mustState(t, peer), nil))
	u3 := peerUpdate(t, other, func() { must(t, other.GetText("body").Insert(1, "b", nil)) })
	eff, err = InspectUpdate(hub, u3, "meta")
	must(t, err)
	if eff.Inserts || eff.Deletes || len(eff.Waiting) == 0 {
		t.Fatalf("want waiting only: %+v", eff)
	}
}

func mustState(t *testing.T, d *Doc) []byte {
	st, err := EncodeStateAsUpdate(d, nil)
	must(t, err)
	return st
}

// threeClientHistory runs 30 random transactions on three documents (client ids from
// firstClient on, gc as given) with random syncs between them, and records every local
// update in g.updates.
func threeClientHistory(t *testing.T, seed, stream uint64, firstClient uint32, gc bool) *goHistory {
	t.Helper()
	g := &goHistory{rng: rand.New(rand.NewPCG(seed, stream)), seed: seed}
	for i := range uint32(3) {
		d := NewDoc(WithClientID(firstClient+i), WithRandom(zeroReader{}), WithGC(gc))
		defineRoots(t, d, historyRoots)
		recordLocalUpdates(d, &g.updates)
		g.docs = append(g.docs, d)
	}
	for range 30 {
		d := g.docs[g.pick(3)]
		d.Transact(nil, func(*Transaction) {
			ts := types(d)
			must(t, g.op(ts[g.pick(len(ts))]))
		})
		if g.pick(3) == 0 {
			g.sync(t)
		}
	}
	return g
}

// TestInspectUpdateAgreesWithApplying: on random histories, whenever applying an update
// changes the root "map", InspectUpdate had reported an insert or a delete there (unless
// pending structs from earlier updates took effect).
func TestInspectUpdateAgreesWithApplying(t *testing.T) {
	for seed := uint64(1); seed <= 150; seed++ {
		g := threeClientHistory(t, seed, 0x15, 100, true)
		d := newRootedDoc(t, true, historyRoots)
		for k, i := range g.rng.Perm(len(g.updates)) {
			u := g.updates[i]
			eff, err := InspectUpdate(d, u, "map")
			must(t, err)
			pendingBefore := d.HasPending()
			before, _ := json.Marshal(d.GetMap("map").ToJSON())
			must(t, ApplyUpdate(d, u, nil))
			after, _ := json.Marshal(d.GetMap("map").ToJSON())
			if !bytes.Equal(before, after) && !eff.Inserts && !eff.Deletes && !pendingBefore {
				t.Fatalf("seed %d, update %d: map changed unseen: %+v\n%s\n%s", seed, k, eff, before, after)
			}
		}
	}
}

func TestInspectUpdateRejectsMalformed(t *testing.T) {
	hub, _ := hubAndPeer(t)
	if _, err := InspectUpdate(hub, []byte{1, 2, 3}, "meta"); err == nil {
		t.Fatal("malformed update accepted")
	}
}

// recordLocalUpdates appends to *into every update d emits for its own changes (origin nil),
// in the order they are made.
func recordLocalUpdates(d *Doc, into *[][]byte) {
	d.OnUpdate(func(u []byte, origin any) {
		if origin == nil {
			*into = append(*into, u)
		}
	})
}

// must fails the test at once when err is not nil.
var must = testkit.Must

// TestIncludedAgreesWithApplying: on random histories, an update Included reports as
// included changes nothing when applied (the encoded state and the pending structs stay as
// they were); a document's own state, and any diff against its own state vector, are
// included when it holds no pending structs (its encoded state carries them); a fresh local
// edit is not.
func TestIncludedAgreesWithApplying(t *testing.T) {
	for seed := uint64(1); seed <= 100; seed++ {
		g := threeClientHistory(t, seed, 0x1c, 200, seed%2 == 0)
		d := newRootedDoc(t, true, historyRoots)
		included := 0
		for k, i := range g.rng.Perm(len(g.updates)) {
			candidates := [][]byte{g.updates[i], g.updates[g.pick(len(g.updates))]}
			other, err := EncodeStateAsUpdate(g.docs[g.pick(3)], d.EncodeStateVector())
			must(t, err)
			candidates = append(candidates, other)
			for _, u := range candidates {
				ok, err := Included(d, u)
				must(t, err)
				before, err := EncodeStateAsUpdate(d, nil)
				must(t, err)
				pending := d.HasPending()
				must(t, ApplyUpdate(d, u, nil))
				after, err := EncodeStateAsUpdate(d, nil)
				must(t, err)
				if ok {
					included++
					if !bytes.Equal(before, after) || pending != d.HasPending() {
						t.Fatalf("seed %d, step %d: an included update changed the document", seed, k)
					}
				}
				if d.HasPending() {
					continue // its encoded state carries the pending structs: not included
				}
				own, err := EncodeStateAsUpdate(d, nil)
				must(t, err)
				diff, err := EncodeStateAsUpdate(d, d.EncodeStateVector())
				must(t, err)
				for _, self := range [][]byte{own, diff} {
					if ok, err := Included(d, self); err != nil || !ok {
						t.Fatalf("seed %d, step %d: the document's own state is not included (%v)", seed, k, err)
					}
				}
			}
		}
		if included == 0 {
			t.Fatalf("seed %d: no candidate was included", seed)
		}
		fresh := NewDoc(WithClientID(999))
		must(t, ApplyUpdate(fresh, mustState(t, d), nil))
		edit := peerUpdate(t, fresh, func() { must(t, fresh.GetMap("map").Set("fresh", 1)) })
		if ok, err := Included(d, edit); err != nil || ok {
			t.Fatalf("seed %d: a fresh edit is included (%v)", seed, err)
		}
	}
	hub, _ := hubAndPeer(t)
	if _, err := Included(hub, []byte{1, 2, 3}); err == nil {
		t.Fatal("malformed update accepted")
	}
}

// TestParsedUpdateInspectsAndAppliesAsBytes: on random histories applied in random order
// (pending structs included), an update parsed once, inspected and then applied, gives the
// inspection of InspectUpdate and leaves the document byte for byte as ApplyUpdate of the
// same bytes does on a twin document; a second ApplyParsed is refused and changes nothing; a
// malformed update does not parse.
func TestParsedUpdateInspectsAndAppliesAsBytes(t *testing.T) {
	for seed := uint64(1); seed <= 60; seed++ {
		g := threeClientHistory(t, seed, 0x15, 60, true)
		viaBytes := newRootedDoc(t, true, historyRoots)
		viaParsed := newRootedDoc(t, true, historyRoots)
		for k, i := range g.rng.Perm(len(g.updates)) {
			u := g.updates[i]
			want, err := InspectUpdate(viaBytes, u, "map")
			must(t, err)
			must(t, ApplyUpdate(viaBytes, u, nil))
			p, err := ParseUpdate(u)
			must(t, err)
			got := InspectParsed(viaParsed, p, "map")
			if got.Inserts != want.Inserts || got.Deletes != want.Deletes || !slices.Equal(got.Waiting, want.Waiting) {
				t.Fatalf("seed %d, update %d: parsed inspection %+v, from bytes %+v", seed, k, got, want)
			}
			must(t, ApplyParsed(viaParsed, p, nil))
			a, err := EncodeStateAsUpdate(viaBytes, nil)
			must(t, err)
			b, err := EncodeStateAsUpdate(viaParsed, nil)
			must(t, err)
			if !bytes.Equal(a, b) || viaBytes.HasPending() != viaParsed.HasPending() {
				t.Fatalf("seed %d, update %d: applying the parsed update differs from applying its bytes", seed, k)
			}
			if err := ApplyParsed(viaParsed, p, nil); !errors.Is(err, ErrParsedApplied) {
				t.Fatalf("second apply: %v", err)
			}
			if c, _ := EncodeStateAsUpdate(viaParsed, nil); !bytes.Equal(c, b) {
				t.Fatalf("seed %d, update %d: a refused second apply changed the document", seed, k)
			}
		}
	}
	var de *DecodeError
	if _, err := ParseUpdate([]byte{1, 2, 3}); !errors.As(err, &de) {
		t.Fatalf("malformed update: %v", err)
	}
}
