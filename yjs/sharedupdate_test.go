package yjs

import (
	"bytes"
	"errors"
	"sync"
	"testing"
)

// TestMergeSharedIsMergeUpdates: on random histories, windows merged with some of their
// updates shared — each Shared going into many merges, as a relay merges one update into
// the queue of every receiver — give exactly MergeUpdates's bytes, or its error; a shared
// update is read once, by the first merge that needs it.
func TestMergeSharedIsMergeUpdates(t *testing.T) {
	reused := 0
	for seed := uint64(1); seed <= 60; seed++ {
		g := threeClientHistory(t, seed, 0x53, 40, seed%2 == 0)
		shared := make([]*Shared, len(g.updates))
		for i, u := range g.updates {
			shared[i] = Share(u)
		}
		for range 12 {
			i := g.pick(len(g.updates))
			j := i + 1 + g.pick(len(g.updates)-i)
			var win [][]byte
			var sh []*Shared
			for k := i; k < j; k++ {
				win = append(win, g.updates[k])
				if g.pick(4) == 0 {
					sh = append(sh, nil) // a queued update that is not shared
				} else {
					if shared[k].layout.Load() != nil {
						reused++
					}
					sh = append(sh, shared[k])
				}
			}
			want, wantErr := MergeUpdates(win)
			got, err := MergeShared(win, sh)
			if (err == nil) != (wantErr == nil) || !bytes.Equal(got, want) {
				t.Fatalf("seed %d, updates %d..%d: MergeShared = %x, %v; MergeUpdates = %x, %v", seed, i, j, got, err, want, wantErr)
			}
		}
	}
	if reused < 100 {
		t.Fatalf("a shared update's reading was reused %d times only", reused)
	}
}

// TestMergeSharedRefusesWhatMergeUpdatesRefuses: a malformed shared update is MergeUpdates's
// error in every merge it goes into, and a shared update the splice path cannot take (map
// values) is merged in full.
func TestMergeSharedRefusesWhatMergeUpdatesRefuses(t *testing.T) {
	a := NewDoc(WithClientID(3))
	var us [][]byte
	recordLocalUpdates(a, &us)
	must(t, a.GetText("t").Insert(0, "ab", nil))
	must(t, a.GetMap("m").Set("k", 1.5))
	must(t, a.GetText("t").Insert(2, "cd", nil))
	bad := Share(append(append([]byte(nil), us[0]...), 0)) // a trailing byte
	for range 2 {
		if _, err := MergeShared([][]byte{bad.Bytes(), us[1]}, []*Shared{bad, nil}); err == nil {
			t.Fatal("a malformed shared update merged")
		}
	}
	sh := []*Shared{Share(us[0]), Share(us[1]), Share(us[2])}
	want, err := MergeUpdates(us)
	must(t, err)
	for range 2 {
		got, err := MergeShared(us, sh)
		must(t, err)
		if !bytes.Equal(got, want) {
			t.Fatal("a map update shared merged to other bytes than MergeUpdates")
		}
	}
	if l := sh[1].layout.Load(); l == nil || l.ok {
		t.Fatal("the map update's reading was not kept as not spliceable")
	}
}

// TestMergeSharedConcurrently: merges on several goroutines share the same updates (the
// race detector checks the reading kept in them).
func TestMergeSharedConcurrently(t *testing.T) {
	g := threeClientHistory(t, 7, 0x77, 60, false)
	shared := make([]*Shared, len(g.updates))
	for i, u := range g.updates {
		shared[i] = Share(u)
	}
	want, err := MergeUpdates(g.updates)
	must(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			got, err := MergeShared(g.updates, shared)
			if err == nil && !bytes.Equal(got, want) {
				err = errDiffers
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

var errDiffers = errors.New("a concurrent merge gave other bytes than MergeUpdates")
