package yjs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/nomicore/nomicore/internal/testkit/oracle"
)

// Differential tests against the JavaScript yjs reference (internal/testkit/oracle). Each history
// runs as a subtest named by its seed, so a failure replays with
//
//	go test ./yjs -run 'TestDifferentialJSHistories/seed=123$'
//
// NOMICORE_YJS_HISTORIES overrides the number of histories (default 2,000; 150 with -short).

func historyCount(t *testing.T, full, short int) int {
	if s := os.Getenv("NOMICORE_YJS_HISTORIES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("NOMICORE_YJS_HISTORIES: %v", err)
		}
		return n
	}
	if testing.Short() {
		return short
	}
	return full
}

// forSeeds runs check for seeds 1…n, two at a time (the oracle answers one request at a
// time; two workers overlap the Go and the JS work).
func forSeeds(t *testing.T, n int, check func(t *testing.T, seed uint64)) {
	var wg sync.WaitGroup
	seeds := make(chan uint64)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range seeds {
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { check(t, seed) })
			}
		}()
	}
	for seed := uint64(1); seed <= uint64(n); seed++ {
		seeds <- seed
	}
	close(seeds)
	wg.Wait()
}

func rootKinds(roots map[string]oracle.RootType) map[string]string {
	out := make(map[string]string, len(roots))
	for k, v := range roots {
		out[k] = string(v)
	}
	return out
}

func docJSON(t testing.TB, d *Doc) []byte {
	t.Helper()
	b, err := json.Marshal(d.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func equalJSON(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if eq, diff := oracle.EqualJSON(got, want); !eq {
		t.Fatalf("%s: JSON differs: %s", what, diff)
	}
}

func equalBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: bytes differ:\n ours %x\n   js %x", what, got, want)
	}
}

// newRootedDoc returns a doc with the roots typed as given (before any update, as the
// oracle does).
func newRootedDoc(t testing.TB, gc bool, roots map[string]string) *Doc {
	d := NewDoc(WithClientID(4242), WithGC(gc))
	defineRoots(t, d, roots)
	return d
}

func applyAll(t *testing.T, d *Doc, updates [][]byte) {
	t.Helper()
	for i, u := range updates {
		if err := ApplyUpdate(d, u, "remote"); err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
}

// namedSV is a state vector the differential checks encode a diff against.
type namedSV struct {
	name string
	sv   []byte
}

// agreeWithJS checks ours, which applied the updates JS yjs applied for res, against res:
// the document, the state vector, the pending structs, the encoded state and the diff
// against each of svs (res.Diffs, in their order), byte for byte. Then each side reads the
// other's full state: JS ours, to the same document; we JS's, to the same document, encoded
// again to JS's own encoding after reading the same state (reading a state runs a
// formatting cleanup of its own, which may delete a mark the incremental history kept; JS
// read ours, which equals its own).
func agreeWithJS(t *testing.T, js *oracle.Client, ours *Doc, res oracle.ApplyResult, roots map[string]oracle.RootType, gc bool, svs []namedSV) {
	t.Helper()
	equalJSON(t, "doc", docJSON(t, ours), res.JSON)
	equalBytes(t, "state vector", ours.EncodeStateVector(), res.StateVector)
	if ours.HasPending() != res.Pending {
		t.Fatalf("pending: ours %v, js %v", ours.HasPending(), res.Pending)
	}
	state, err := EncodeStateAsUpdate(ours, nil)
	if err != nil {
		t.Fatal(err)
	}
	equalBytes(t, "encodeStateAsUpdate", state, res.State)
	for i, sv := range svs {
		diff, err := EncodeStateAsUpdate(ours, sv.sv)
		if err != nil {
			t.Fatal(err)
		}
		equalBytes(t, "encodeStateAsUpdate("+sv.name+")", diff, res.Diffs[i])
	}
	r1, err := js.Apply(oracle.ApplyRequest{Updates: [][]byte{state}, Roots: roots, NoGC: !gc})
	if err != nil {
		t.Fatal(err)
	}
	equalJSON(t, "JS applying our state", r1.JSON, res.JSON)
	fromJS := newRootedDoc(t, gc, rootKinds(roots))
	applyAll(t, fromJS, [][]byte{res.State})
	equalJSON(t, "ours applying JS state", docJSON(t, fromJS), res.JSON)
	reread, err := EncodeStateAsUpdate(fromJS, nil)
	if err != nil {
		t.Fatal(err)
	}
	equalBytes(t, "encodeStateAsUpdate of JS state read", reread, r1.State)
}

// TestDifferentialJSHistories: random multi-client histories made by JS yjs, delivered to
// both sides in one random order (pending structs and deletions included). Both sides must
// agree on the JSON, the state-vector bytes and the bytes of encodeStateAsUpdate (full and
// against state vectors); each side must read the other's full state and diffs to the same
// JSON; mergeUpdates, diffUpdate and encodeStateVectorFromUpdate must agree byte for byte.
func TestDifferentialJSHistories(t *testing.T) {
	js := oracle.Start(t)
	forSeeds(t, historyCount(t, 2000, 150), func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		gc := rng.IntN(4) != 0
		req := oracle.HistoryRequest{Seed: seed, Clients: 1 + rng.IntN(5), Steps: 5 + rng.IntN(55), NoGC: !gc}
		if rng.IntN(4) == 0 {
			req.Features = map[string]bool{oracle.FeatureSync: false}
		}
		h, err := js.History(req)
		if err != nil {
			t.Fatal(err)
		}
		roots := rootKinds(h.Roots)
		ups := h.UpdateBytes()
		order := ups
		if rng.IntN(3) != 0 {
			order = make([][]byte, len(ups))
			for i, p := range rng.Perm(len(ups)) {
				order[i] = ups[p]
			}
		}
		// ours, remembering the state vector after a random prefix
		prefix := rng.IntN(len(order) + 1)
		ours := newRootedDoc(t, gc, roots)
		applyAll(t, ours, order[:prefix])
		prefixSV := ours.EncodeStateVector()
		applyAll(t, ours, order[prefix:])
		randomSV := randomStateVector(rng, ours.StateVector())

		res, err := js.Apply(oracle.ApplyRequest{Updates: order, Roots: h.Roots, NoGC: !gc, StateVectors: [][]byte{prefixSV, randomSV}})
		if err != nil {
			t.Fatal(err)
		}
		equalJSON(t, "doc vs converged history", docJSON(t, ours), h.JSON)
		agreeWithJS(t, js, ours, res, h.Roots, gc, []namedSV{{"prefix sv", prefixSV}, {"random sv", randomSV}})
		diffPrefix, err := EncodeStateAsUpdate(ours, prefixSV)
		if err != nil {
			t.Fatal(err)
		}

		// JS reads the prefix plus our diff, and we the prefix plus its diff.
		r2, err := js.Apply(oracle.ApplyRequest{Updates: append(append([][]byte{}, order[:prefix]...), diffPrefix), Roots: h.Roots, NoGC: !gc})
		if err != nil {
			t.Fatal(err)
		}
		equalJSON(t, "JS applying prefix + our diff", r2.JSON, res.JSON)

		fromPrefix := newRootedDoc(t, gc, roots)
		applyAll(t, fromPrefix, append(append([][]byte{}, order[:prefix]...), res.Diffs[0]))
		equalJSON(t, "ours applying prefix + JS diff", docJSON(t, fromPrefix), res.JSON)

		// Update functions on the delivered updates.
		merged, err := MergeUpdates(order)
		if err != nil {
			t.Fatal(err)
		}
		jsMerged, err := js.Merge(order)
		if err != nil {
			t.Fatal(err)
		}
		equalBytes(t, "mergeUpdates", merged, jsMerged)
		fromMerged := newRootedDoc(t, gc, roots)
		applyAll(t, fromMerged, [][]byte{merged})
		equalJSON(t, "ours applying merged", docJSON(t, fromMerged), res.JSON)
		if seed%4 == 0 {
			diff, err := DiffUpdate(merged, prefixSV)
			if err != nil {
				t.Fatal(err)
			}
			jsDiff, err := js.Diff(merged, prefixSV)
			if err != nil {
				t.Fatal(err)
			}
			equalBytes(t, "diffUpdate", diff, jsDiff)
			sv, err := EncodeStateVectorFromUpdate(merged)
			if err != nil {
				t.Fatal(err)
			}
			jsSV, err := js.StateVectorFromUpdate(merged)
			if err != nil {
				t.Fatal(err)
			}
			equalBytes(t, "encodeStateVectorFromUpdate", sv, jsSV)
		}
	})
}

// randomStateVector returns a state vector with random clocks at or below sv's (and
// sometimes an unknown client), cutting through structs.
func randomStateVector(rng *rand.Rand, sv StateVector) []byte {
	out := StateVector{}
	for c, clock := range sv {
		switch rng.IntN(3) {
		case 0:
		case 1:
			out[c] = clock
		default:
			out[c] = rng.Uint64N(clock + 1)
		}
	}
	if rng.IntN(4) == 0 {
		out[uint64(rng.Uint32())] = uint64(rng.IntN(10))
	}
	return EncodeStateVector(out)
}
