package oracle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := Run(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// privateClient starts a client of its own (not the shared one) for lifecycle tests.
func privateClient(t *testing.T) *Client {
	t.Helper()
	Start(t) // skip or fail exactly like the shared client
	c := newClient(shared.client.dir)
	t.Cleanup(func() {
		if err := c.close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

func TestPingReportsPinnedVersions(t *testing.T) {
	v, err := Start(t).Ping()
	if err != nil {
		t.Fatal(err)
	}
	want := Versions{Node: v.Node, Yjs: "13.6.33", Lib0: "0.2.120", YProtocols: "1.0.7"}
	if v != want || !strings.HasPrefix(v.Node, "v") {
		t.Fatalf("versions %+v, want %+v", v, want)
	}
}

// GoleakOptions lets per-test leak checks run while the shared client is up.
func TestGoleakOptionsCoverTheSharedClient(t *testing.T) {
	if _, err := Start(t).Ping(); err != nil {
		t.Fatal(err)
	}
	if err := goleak.Find(); err == nil {
		t.Fatal("goleak.Find saw no client goroutines: the test checks nothing")
	}
	goleak.VerifyNone(t, GoleakOptions()...)
}

// Equal requests give byte-identical histories, in the same process and in a fresh one.
func TestHistoryIsReproducible(t *testing.T) {
	js := Start(t)
	fresh := privateClient(t)
	for _, req := range []HistoryRequest{
		{Seed: 1, Clients: 3, Steps: 60},
		{Seed: 1<<40 + 3, Clients: 4, Steps: 80, NoGC: true},
		{Seed: 1<<53 - 1, Clients: 2, Steps: 40, Features: map[string]bool{FeatureSync: false}},
	} {
		a, err := js.History(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := js.History(req)
		if err != nil {
			t.Fatal(err)
		}
		c, err := fresh.History(req)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) || !reflect.DeepEqual(a, c) {
			t.Fatalf("seed %d: two runs of the same request differ", req.Seed)
		}
		if len(a.Updates) == 0 || len(a.Clients) != req.Clients || a.Seed != req.Seed {
			t.Fatalf("seed %d: %d updates, clients %v", req.Seed, len(a.Updates), a.Clients)
		}
		req.Seed--
		d, err := js.History(req)
		if err != nil {
			t.Fatal(err)
		}
		if reflect.DeepEqual(a.UpdateBytes(), d.UpdateBytes()) {
			t.Fatalf("seeds %d and %d gave the same updates", req.Seed+1, req.Seed)
		}
	}
}

// Applying a history's updates in a random order in JS gives the history's document: its
// JSON and state vector, with nothing left pending. The subtests run in parallel, so the
// client's request multiplexing is exercised as well.
func TestHistoryShuffledDeliveryConverges(t *testing.T) {
	js := Start(t)
	for seed := range uint64(30) {
		req := HistoryRequest{
			Seed:    seed,
			Clients: 1 + int(seed%5),
			Steps:   20 + int(seed*13%180),
			NoGC:    seed%3 == 0,
		}
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			h, err := js.History(req)
			if err != nil {
				t.Fatal(err)
			}
			updates := h.UpdateBytes()
			rng := rand.New(rand.NewPCG(seed, 0x5eed))
			rng.Shuffle(len(updates), func(i, j int) { updates[i], updates[j] = updates[j], updates[i] })
			got, err := js.Apply(ApplyRequest{Updates: updates, Roots: h.Roots, NoGC: req.NoGC})
			if err != nil {
				t.Fatal(err)
			}
			if ok, diff := EqualJSON(got.JSON, h.JSON); !ok {
				t.Fatalf("JSON after shuffled delivery differs: %s", diff)
			}
			if !bytes.Equal(got.StateVector, h.StateVector) {
				t.Fatalf("state vector %x, want %x", got.StateVector, h.StateVector)
			}
			if got.Pending {
				t.Fatal("pending structs after every update was applied")
			}
			fromState, err := js.Apply(ApplyRequest{Updates: [][]byte{h.State}, Roots: h.Roots, NoGC: req.NoGC})
			if err != nil {
				t.Fatal(err)
			}
			if ok, diff := EqualJSON(fromState.JSON, h.JSON); !ok {
				t.Fatalf("JSON of the encoded state differs: %s", diff)
			}
		})
	}
}

// An update whose author has earlier structs cannot be integrated alone: Apply reports it
// as pending, and the document without it differs.
func TestApplyReportsPendingOnIncompleteDelivery(t *testing.T) {
	js := Start(t)
	h, err := js.History(HistoryRequest{Seed: 5, Clients: 3, Steps: 60})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range h.Updates {
		d, err := js.DecodeUpdate(u.Update)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Structs) == 0 || d.Structs[0].ID[1] == 0 {
			continue
		}
		got, err := js.Apply(ApplyRequest{Updates: [][]byte{u.Update}, Roots: h.Roots})
		if err != nil {
			t.Fatal(err)
		}
		if !got.Pending {
			t.Fatalf("update starting at clock %d applied alone: not pending", d.Structs[0].ID[1])
		}
		if ok, _ := EqualJSON(got.JSON, h.JSON); ok {
			t.Fatal("a single pending update rendered the whole history's JSON")
		}
		return
	}
	t.Fatal("no update with structs after clock 0 in the history")
}

// Default features produce every content kind; switching features off removes them.
func TestHistoryFeaturesControlContent(t *testing.T) {
	js := Start(t)
	kinds := func(features map[string]bool) map[string]bool {
		seen := map[string]bool{}
		for seed := range uint64(8) {
			h, err := js.History(HistoryRequest{Seed: 100 + seed, Clients: 3, Steps: 120, NoGC: true, Features: features})
			if err != nil {
				t.Fatal(err)
			}
			merged, err := js.Merge(h.UpdateBytes())
			if err != nil {
				t.Fatal(err)
			}
			d, err := js.DecodeUpdate(merged)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range d.Structs {
				var c struct{ Kind, Type string }
				if s.Content != nil {
					if err := json.Unmarshal(s.Content, &c); err != nil {
						t.Fatal(err)
					}
				}
				seen[s.Struct+"/"+c.Kind+"/"+c.Type] = true
			}
			for _, tag := range []string{`"$bigint"`, `"$bytes"`, `"$undefined"`, `"$number"`, `"$doc"`} {
				if bytes.Contains(h.JSON, []byte(tag)) {
					seen[tag] = true
				}
			}
		}
		return seen
	}

	all := kinds(nil)
	for _, k := range []string{
		"item/string/", "item/any/", "item/binary/", "item/embed/", "item/format/", "item/doc/",
		"item/type/map", "item/type/array", "item/type/text", "item/type/xmlElement", "item/type/xmlText",
		`"$bigint"`, `"$bytes"`, `"$undefined"`, `"$number"`, `"$doc"`,
	} {
		if !all[k] {
			t.Errorf("default features never produced %s (saw %v)", k, all)
		}
	}

	off := kinds(map[string]bool{
		FeatureXML: false, FeatureSubdoc: false, FeatureBinary: false, FeatureEmbed: false,
		FeatureFormat: false, FeatureBigint: false, FeatureUndefined: false, FeatureNonFinite: false,
	})
	for _, k := range []string{
		"item/binary/", "item/embed/", "item/format/", "item/doc/", "item/type/xmlElement",
		"item/type/xmlText", `"$bigint"`, `"$bytes"`, `"$undefined"`, `"$number"`, `"$doc"`,
	} {
		if off[k] {
			t.Errorf("%s produced with its feature off", k)
		}
	}
}

// merge, diff and the state-vector ops agree with apply.
func TestMergeDiffAndStateVectors(t *testing.T) {
	js := Start(t)
	h, err := js.History(HistoryRequest{Seed: 77, Clients: 4, Steps: 100})
	if err != nil {
		t.Fatal(err)
	}
	all := h.UpdateBytes()
	merged, err := js.Merge(all)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := js.Apply(ApplyRequest{Updates: [][]byte{merged}, Roots: h.Roots})
	if err != nil {
		t.Fatal(err)
	}
	if ok, diff := EqualJSON(whole.JSON, h.JSON); !ok {
		t.Fatalf("merged update: %s", diff)
	}

	sv, err := js.StateVectorFromUpdate(merged)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sv, h.StateVector) {
		t.Fatalf("svFromUpdate %x, want %x", sv, h.StateVector)
	}
	clocks, err := js.DecodeStateVector(h.StateVector)
	if err != nil {
		t.Fatal(err)
	}
	if len(clocks) == 0 {
		t.Fatal("empty state vector")
	}
	for client, clock := range clocks {
		if !containsClient(h.Clients, client) || clock == 0 {
			t.Fatalf("state vector entry %d:%d is not one of the clients %v", client, clock, h.Clients)
		}
	}
	again, err := js.EncodeStateVector(clocks)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, h.StateVector) {
		t.Fatalf("encodeSV(decodeSV(sv)) = %x, want %x", again, h.StateVector)
	}

	// A peer holding the first half needs only the diff against its state vector.
	half := all[:len(all)/2]
	first, err := js.Apply(ApplyRequest{Updates: half, Roots: h.Roots})
	if err != nil {
		t.Fatal(err)
	}
	diff, err := js.Diff(merged, first.StateVector)
	if err != nil {
		t.Fatal(err)
	}
	withDiff := append(append([][]byte{}, half...), diff)
	caught, err := js.Apply(ApplyRequest{Updates: withDiff, Roots: h.Roots, StateVectors: [][]byte{first.StateVector}})
	if err != nil {
		t.Fatal(err)
	}
	if ok, d := EqualJSON(caught.JSON, h.JSON); !ok || caught.Pending {
		t.Fatalf("half + diff: pending %v, %s", caught.Pending, d)
	}
	if len(caught.Diffs) != 1 || len(caught.Diffs[0]) == 0 {
		t.Fatalf("want one diff, got %d", len(caught.Diffs))
	}
	viaDocDiff, err := js.Apply(ApplyRequest{Updates: append(half, caught.Diffs[0]), Roots: h.Roots})
	if err != nil {
		t.Fatal(err)
	}
	if ok, d := EqualJSON(viaDocDiff.JSON, h.JSON); !ok {
		t.Fatalf("half + encodeStateAsUpdate(doc, sv): %s", d)
	}
}

func containsClient(clients []uint32, c uint32) bool {
	for _, x := range clients {
		if x == c {
			return true
		}
	}
	return false
}

// Without declared roots, apply infers each root's type by the docs/decisions.md#yjs rule.
func TestApplyInfersRootTypes(t *testing.T) {
	js := Start(t)
	h, err := js.History(HistoryRequest{Seed: 9, Clients: 2, Steps: 80,
		Features: map[string]bool{FeatureXML: false, FeatureEmbed: false, FeatureFormat: false}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := js.Apply(ApplyRequest{Updates: [][]byte{h.State}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]RootType{"map": Map, "array": Array, "text": Text}
	for name, typ := range want {
		if got.Roots[name] != typ {
			t.Fatalf("inferred roots %v, want %v", got.Roots, want)
		}
	}
	var gotRoots, histRoots map[string]json.RawMessage
	if err := json.Unmarshal(got.JSON, &gotRoots); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(h.JSON, &histRoots); err != nil {
		t.Fatal(err)
	}
	for name := range want {
		if ok, d := EqualJSON(gotRoots[name], histRoots[name]); !ok {
			t.Fatalf("root %s: %s", name, d)
		}
	}
}

// Bad requests are answered with a classified error and the process stays usable.
func TestBadRequestsGetErrors(t *testing.T) {
	js := Start(t)
	cases := []struct {
		name string
		call func() error
		want string
	}{
		{"unknown op", func() error { return js.Call("nope", nil, nil) }, "unknown op"},
		{"args not an object", func() error { return js.Call("apply", []int{1}, nil) }, "args must be an object"},
		{"missing updates", func() error { return js.Call("apply", map[string]any{}, nil) }, "updates is required"},
		{"bad base64", func() error { return js.Call("merge", map[string]any{"updates": []string{"!!"}}, nil) }, "base64"},
		{"nil bytes", func() error { _, err := js.Diff(nil, nil); return err }, "base64"},
		{"bad root type", func() error {
			_, err := js.Apply(ApplyRequest{Updates: [][]byte{{0, 0}}, Roots: map[string]RootType{"x": "set"}})
			return err
		}, "unknown type"},
		{"malformed update", func() error { _, err := js.Apply(ApplyRequest{Updates: [][]byte{{0xff, 0xff, 0xff}}}); return err }, "updates[0]"},
		{"malformed merge", func() error { _, err := js.Merge([][]byte{{0x05}, {0x05}}); return err }, "mergeUpdates failed"},
		{"malformed state vector", func() error { _, err := js.DecodeStateVector([]byte{0x02, 0x01}); return err }, "decodeStateVector failed"},
		{"unknown feature", func() error {
			_, err := js.History(HistoryRequest{Seed: 1, Features: map[string]bool{"colour": true}})
			return err
		}, "unknown feature"},
		{"too many clients", func() error { _, err := js.History(HistoryRequest{Seed: 1, Clients: 99}); return err }, "clients"},
		{"missing trace", func() error { _, err := js.B4(filepath.Join(t.TempDir(), "none.json")); return err }, "reading"},
	}
	for _, tc := range cases {
		err := tc.call()
		var oe *Error
		if !errors.As(err, &oe) || !strings.Contains(oe.Message, tc.want) {
			t.Errorf("%s: got %v, want an *Error containing %q", tc.name, err, tc.want)
		}
	}
	// A line that is not JSON at all is answered too (by the id at its start).
	id := js.nextID.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := js.roundTrip(ctx, "raw", id, []byte(fmt.Sprintf("{\"id\":%d,\"op\":\n", id)), nil)
	var oe *Error
	if !errors.As(err, &oe) || !strings.Contains(oe.Message, "not JSON") {
		t.Errorf("truncated JSON line: got %v", err)
	}
	if _, err := js.Ping(); err != nil {
		t.Fatalf("the oracle is unusable after bad requests: %v", err)
	}
}

// Megabytes of base64 travel on one line in both directions.
func TestLargePayloads(t *testing.T) {
	js := Start(t)
	text := strings.Repeat("0123456789abcdef", 3<<19/16) // 1.5 MiB: 2 MB of base64 out, 4 MB of JSON back
	update := handMadeTextUpdate(0x1234, "text", text)
	got, err := js.Apply(ApplyRequest{Updates: [][]byte{update}, Roots: map[string]RootType{"text": Text}})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(map[string]string{"text": text})
	if ok, d := EqualJSON(got.JSON, want); !ok {
		t.Fatal(d)
	}
	if len(got.State) < len(text) {
		t.Fatalf("state is %d bytes, want at least %d", len(got.State), len(text))
	}
}

// handMadeTextUpdate writes a Yjs v1 update by hand: one client, one item inserting str into
// the root text called root, and an empty delete set.
func handMadeTextUpdate(client uint32, root, str string) []byte {
	var b []byte
	b = appendVarUint(b, 1) // clients
	b = appendVarUint(b, 1) // structs of this client
	b = appendVarUint(b, uint64(client))
	b = appendVarUint(b, 0) // clock
	b = append(b, 4)        // info: ContentString, no origins, no parentSub
	b = appendVarUint(b, 1) // parent is a root, named:
	b = appendVarUint(b, uint64(len(root)))
	b = append(b, root...)
	b = appendVarUint(b, uint64(len(str)))
	b = append(b, str...)
	return appendVarUint(b, 0) // delete set: no clients
}

func appendVarUint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// A killed node process is replaced on the next call; close stops it, is idempotent, and
// leaves no process behind.
func TestProcessRestartAndClose(t *testing.T) {
	c := privateClient(t)
	if _, err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	first := c.p.cmd.Process.Pid
	if err := c.p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	c.p.wait()
	if _, err := c.Ping(); err != nil {
		t.Fatalf("no recovery after the process died: %v", err)
	}
	second := c.p.cmd.Process.Pid
	if second == first {
		t.Fatal("same process after a kill")
	}
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	if err := c.close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := c.Ping(); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after close: %v, want ErrClosed", err)
	}
	for _, pid := range []int{first, second} {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("node process %d still exists after close (%v)", pid, err)
		}
	}
}

// A call that outlives its context kills the process instead of hanging; the next call works.
func TestCallTimeoutKillsAndRecovers(t *testing.T) {
	c := privateClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := c.CallContext(ctx, "history", HistoryRequest{Seed: 3, Clients: 8, Steps: 100000}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a deadline error", err)
	}
	if _, err := c.Ping(); err != nil {
		t.Fatalf("no recovery after a timeout: %v", err)
	}
}

// The B4 op replays a trace and reports its figures; a small synthetic trace keeps it fast.
func TestB4OnSyntheticTrace(t *testing.T) {
	js := Start(t)
	rng := rand.New(rand.NewPCG(4, 4))
	var ops [][]any
	var doc []byte
	for range 600 {
		if len(doc) > 0 && rng.IntN(4) == 0 {
			p := rng.IntN(len(doc))
			doc = append(doc[:p], doc[p+1:]...)
			ops = append(ops, []any{p, 1})
			continue
		}
		p := rng.IntN(len(doc) + 1)
		ch := byte('a' + rng.IntN(26))
		doc = append(doc[:p], append([]byte{ch}, doc[p:]...)...)
		ops = append(ops, []any{p, 0, string(ch)})
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "trace.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := js.B4(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops != len(ops) || r.FinalLength != len(doc) || r.DecodedLength != len(doc) ||
		r.UpdateCount != len(ops) || r.MergeCount != len(ops) || r.StateBytes == 0 || r.Runs != 3 {
		t.Fatalf("b4 result %+v; want %d ops, final length %d", r, len(ops), len(doc))
	}

	if err := os.WriteFile(path, []byte(`[[0,0,"a"],[0,2]]`), 0o600); err != nil {
		t.Fatal(err)
	}
	var oe *Error
	if _, err := js.B4(path); !errors.As(err, &oe) || !strings.Contains(oe.Message, "trace[1]") {
		t.Fatalf("bad trace: %v", err)
	}
}

// Start skips loudly when the oracle is missing, and fails under NOMICORE_REQUIRE_ORACLE=1.
// The test binary is run again with a PATH that holds no node.
func TestStartWithoutOracleSkipsOrFails(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		require  string
		wantFail bool
		wantLine string
	}{
		{"", false, "--- SKIP: TestHelperStartOracle"},
		{"0", false, "--- SKIP: TestHelperStartOracle"},
		{"1", true, "Oracle tests FAIL because " + RequireEnv + "=1"},
	} {
		cmd := exec.Command(exe, "-test.run=^TestHelperStartOracle$", "-test.v", "-test.count=1")
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, RequireEnv+"=") {
				env = append(env, kv)
			}
		}
		cmd.Env = append(env, "PATH="+t.TempDir(), "ORACLE_TEST_HELPER=1", RequireEnv+"="+tc.require)
		out, err := cmd.CombinedOutput()
		failed := err != nil
		if failed != tc.wantFail || !strings.Contains(string(out), tc.wantLine) ||
			!strings.Contains(string(out), "JS oracle not installed: node is not on PATH") ||
			strings.Contains(string(out), "oracle started") {
			t.Errorf("%s=%q: exit error %v, output:\n%s", RequireEnv, tc.require, err, out)
		}
	}
}

func TestLocateReportsWhatIsMissing(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH; TestStartWithoutOracleSkipsOrFails covers that case")
	}
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module example.com/m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(pkg, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, missing := locateFrom(pkg); !strings.Contains(missing, "node_modules/yjs is missing") {
		t.Fatalf("without node_modules: %q", missing)
	}
	yjs := filepath.Join(root, oracleDir, "node_modules", "yjs")
	if err := os.MkdirAll(yjs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(yjs, "package.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if dir, missing := locateFrom(pkg); missing != "" || dir != filepath.Join(root, oracleDir) {
		t.Fatalf("installed: dir %q, missing %q", dir, missing)
	}
	if _, missing := locateFrom("/"); !strings.Contains(missing, "no go.mod above") {
		t.Fatalf("outside a module: %q", missing)
	}
}

func TestHelperStartOracle(t *testing.T) {
	if os.Getenv("ORACLE_TEST_HELPER") != "1" {
		t.Skip("runs only as the subprocess of TestStartWithoutOracleSkipsOrFails")
	}
	Start(t)
	t.Log("oracle started")
}

// BenchmarkB4JS reports the JS yjs figures of the B4 editing trace (B4_TRACE), for
// comparison with the Go benchmarks.
func BenchmarkB4JS(b *testing.B) {
	path := os.Getenv("B4_TRACE")
	if path == "" {
		b.Skip("B4_TRACE is not set")
	}
	js := Start(b)
	var r B4Timings
	for b.Loop() {
		var err error
		if r, err = js.B4(path); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(r.ApplyMs, "js-apply-ms")
	b.ReportMetric(r.ApplyCaptureMs, "js-apply-capture-ms")
	b.ReportMetric(r.EncodeMs, "js-encode-ms")
	b.ReportMetric(float64(r.StateBytes), "js-state-bytes")
	b.ReportMetric(r.DecodeMs, "js-decode-ms")
	b.ReportMetric(r.MergeMs, "js-merge10k-ms")
	b.ReportMetric(float64(r.FinalLength), "final-length")
	if r.HeapBytes > 0 {
		b.ReportMetric(float64(r.HeapBytes), "js-heap-bytes")
	}
}

// BenchmarkHistory measures a history round trip through the client: how many random
// histories a differential suite can afford.
func BenchmarkHistory(b *testing.B) {
	js := Start(b)
	for _, bc := range []struct {
		name           string
		clients, steps int
	}{{"clients=3/steps=20", 3, 20}, {"clients=3/steps=100", 3, 100}, {"clients=5/steps=200", 5, 200}} {
		b.Run(bc.name, func(b *testing.B) {
			seed := uint64(0)
			for b.Loop() {
				seed++
				if _, err := js.History(HistoryRequest{Seed: seed, Clients: bc.clients, Steps: bc.steps}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkApply measures applying a 100-step history's updates in JS through the client.
func BenchmarkApply(b *testing.B) {
	js := Start(b)
	h, err := js.History(HistoryRequest{Seed: 1, Clients: 3, Steps: 100})
	if err != nil {
		b.Fatal(err)
	}
	req := ApplyRequest{Updates: h.UpdateBytes(), Roots: h.Roots}
	for b.Loop() {
		if _, err := js.Apply(req); err != nil {
			b.Fatal(err)
		}
	}
}
