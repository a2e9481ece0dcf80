package yjs

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nomicore/nomicore/internal/testkit/oracle"
)

// Differential tests at the sizes users reach: multi-author histories of several MiB made
// by JS yjs (testdata/oracle/largehist.mjs), in which every author owns thousands of structs
// (far more than one chunk of a struct list). Each is delivered to fresh documents along every
// path the library offers — consecutive updates in order, shuffled (structs and deletions
// wait as pending), reversed, merged with MergeUpdates, a prefix then DiffUpdate, format v2,
// the full state, every single transaction — with GC on and off; the JSON, the state vector
// and the encoded state (full and against state vectors) must be JS's, byte for byte, and so
// must MergeUpdates, DiffUpdate, EncodeStateVectorFromUpdate and ConvertUpdateV2ToV1. Every
// expectation comes from JS.
//
// Sizes: make test runs two histories (4 MiB and 1.5 MiB) without the race detector, in the
// default and in the small-chunk build, and one of 0.75 MiB under the race detector (and
// with -short); NOMICORE_YJS_LARGE=long (make test-yjs-long) runs NOMICORE_YJS_LARGE_COUNT
// (3) histories of about 20 MiB. One history replays with
//
//	go test ./yjs -run 'TestLargeJSHistories/seed=7'

// largeConfigs returns the histories to run.
func largeConfigs(t *testing.T) []oracle.LargeConfig {
	if os.Getenv("NOMICORE_YJS_LARGE") == "long" {
		n := 3
		if s := os.Getenv("NOMICORE_YJS_LARGE_COUNT"); s != "" {
			var err error
			if n, err = strconv.Atoi(s); err != nil {
				t.Fatalf("NOMICORE_YJS_LARGE_COUNT: %v", err)
			}
		}
		var out []oracle.LargeConfig
		for i := 0; i < n; i++ {
			out = append(out, oracle.LargeConfig{Seed: uint64(100 + i), MiB: 20, Authors: 3 + i%4, Updates: 24, RefGC: i%2 == 0})
		}
		return out
	}
	small := oracle.LargeConfig{Seed: 3, MiB: 0.75, Authors: 3, Updates: 12, RefGC: true}
	if raceEnabled || testing.Short() {
		return []oracle.LargeConfig{small}
	}
	return []oracle.LargeConfig{
		{Seed: 1, MiB: 4, Authors: 4, Updates: 24, RefGC: true},
		{Seed: 2, MiB: 1.5, Authors: 3, Updates: 16, RefGC: false},
	}
}

func TestLargeJSHistories(t *testing.T) {
	for _, cfg := range largeConfigs(t) {
		t.Run(fmt.Sprintf("seed=%d", cfg.Seed), func(t *testing.T) {
			h := oracle.Large(t, cfg)
			f := h.Figures
			t.Logf("history %+v: state %.2f MiB, %d structs (per client %v), text %d + %d characters, %d map keys, list of %d; a: %d updates (%.2f MiB, largest %d KiB), b: %d updates (%.2f MiB)",
				cfg, float64(f.StateBytes)/(1<<20), f.Structs, f.StructsPerClient, f.TextLength, f.RichLength, f.MapKeys, f.ListLength,
				f.StreamA, float64(f.StreamABytes)/(1<<20), f.StreamAMaxBytes>>10, f.StreamB, float64(f.StreamBBytes)/(1<<20))
			checkLargeUpdateFunctions(t, h)
			for _, p := range h.Paths {
				t.Run(fmt.Sprintf("%s/gc=%v", p.Name, p.GC), func(t *testing.T) {
					start := time.Now()
					checkLargePath(t, h, p)
					t.Logf("%v", time.Since(start).Round(time.Millisecond))
				})
			}
		})
	}
}

// checkLargeUpdateFunctions: the update functions on stream a.
func checkLargeUpdateFunctions(t *testing.T, h *oracle.LargeHistory) {
	a := h.Stream(t, "a")
	merged, err := MergeUpdates(a)
	if err != nil {
		t.Fatal(err)
	}
	h.Check(t, "MergeUpdates(a)", merged, h.Merged)
	for _, p := range h.Paths {
		if p.Input.Merge != "" && p.Input.Order != nil {
			ms, err := MergeUpdates(ordered(a, p.Input.Order))
			if err != nil {
				t.Fatal(err)
			}
			h.Check(t, "MergeUpdates(a shuffled)", ms, h.MergedShuf)
			break
		}
	}
	for i, name := range h.StateVectors {
		diff, err := DiffUpdate(merged, h.Blob(t, name))
		if err != nil {
			t.Fatal(err)
		}
		h.Check(t, fmt.Sprintf("DiffUpdate(merged, state vector %d)", i), diff, h.Diffs[i])
	}
	sv, err := EncodeStateVectorFromUpdate(merged)
	if err != nil {
		t.Fatal(err)
	}
	h.Check(t, "EncodeStateVectorFromUpdate(merged)", sv, h.SVFromMerged)
	for i, u := range h.Stream(t, "aV2") {
		v1, err := ConvertUpdateV2ToV1(u)
		if err != nil {
			t.Fatalf("ConvertUpdateV2ToV1(a v2 %d): %v", i, err)
		}
		h.Check(t, fmt.Sprintf("ConvertUpdateV2ToV1(a v2 %d)", i), v1, h.V2ToV1[i])
	}
}

func ordered(list [][]byte, order []int) [][]byte {
	if order == nil {
		return list
	}
	out := make([][]byte, len(order))
	for i, j := range order {
		out[i] = list[j]
	}
	return out
}

// checkLargePath delivers the history along p to a fresh document and compares it with JS.
func checkLargePath(t *testing.T, h *oracle.LargeHistory, p oracle.LargePath) {
	in := p.Input
	var updates [][]byte
	v2 := false
	switch {
	case in.Merge != "":
		merged, err := MergeUpdates(ordered(h.Stream(t, in.Merge), in.Order))
		if err != nil {
			t.Fatal(err)
		}
		updates = [][]byte{merged}
	case in.Diff != nil:
		a := h.Stream(t, in.Stream)
		merged, err := MergeUpdates(a)
		if err != nil {
			t.Fatal(err)
		}
		diff, err := DiffUpdate(merged, h.Blob(t, h.StateVectors[*in.Diff]))
		if err != nil {
			t.Fatal(err)
		}
		h.Check(t, "DiffUpdate(merged, state vector)", diff, h.Diffs[*in.Diff])
		updates = append(append([][]byte{}, a[:in.Prefix]...), diff)
	case in.Blob != "":
		updates, v2 = [][]byte{h.Blob(t, in.Blob)}, in.V2
	default:
		updates, v2 = ordered(h.Stream(t, in.Stream), in.Order), in.Stream == "aV2" || in.Stream == "bV2"
	}
	d := newRootedDoc(t, p.GC, rootKinds(h.Roots))
	for i, u := range updates {
		var err error
		if v2 {
			err = ApplyUpdateV2(d, u, "remote")
		} else {
			err = ApplyUpdate(d, u, "remote")
		}
		if err != nil {
			t.Fatalf("update %d of %d: %v", i, len(updates), err)
		}
		if p.Mid != nil && p.Mid.After == i+1 {
			checkLargeState(t, h, fmt.Sprintf("after %d updates", i+1), d, p.Mid.StateVector, p.Mid.State, p.Mid.Pending)
		}
	}
	equalJSON(t, "JSON", docJSON(t, d), h.Blob(t, p.Expect.JSON))
	checkLargeState(t, h, "at the end", d, p.Expect.StateVector, p.Expect.State, p.Expect.Pending)
	for i, want := range p.Expect.Diffs {
		diff, err := EncodeStateAsUpdate(d, h.Blob(t, h.StateVectors[i]))
		if err != nil {
			t.Fatal(err)
		}
		h.Check(t, fmt.Sprintf("EncodeStateAsUpdate(doc, state vector %d)", i), diff, want)
	}
}

func checkLargeState(t *testing.T, h *oracle.LargeHistory, when string, d *Doc, sv, state oracle.Expected, pending bool) {
	t.Helper()
	if d.HasPending() != pending {
		t.Errorf("%s: pending: ours %v, JS %v", when, d.HasPending(), pending)
	}
	h.Check(t, when+": EncodeStateVector", d.EncodeStateVector(), sv)
	st, err := EncodeStateAsUpdate(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.Check(t, when+": EncodeStateAsUpdate", st, state)
}
