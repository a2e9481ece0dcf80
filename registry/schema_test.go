package registry

import (
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/nomicore/nomicore/lib0"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/yjs"
)

// TestS23_3_SemanticFingerprintVectors checks the fingerprint against the vectors of the
// independent JS generator (testdata/fingerprint/gen.mjs): each definition is read from the
// lib0 bytes JS wrote, so the Go side sees exactly JS's value (key order, -0).
func TestS23_3_SemanticFingerprintVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/fingerprint/vectors.json")
	must(t, err)
	var vectors []struct{ Name, Any, Canonical, Fingerprint string }
	must(t, json.Unmarshal(raw, &vectors))
	if len(vectors) < 9 {
		t.Fatalf("%d vectors", len(vectors))
	}
	seen := map[string]string{}
	for _, v := range vectors {
		b, err := hex.DecodeString(v.Any)
		must(t, err)
		d := lib0.NewDecoder(b)
		def, ok := d.ReadAny().(lib0.Object)
		if err := d.Finish(); err != nil || !ok {
			t.Fatalf("%s: not an object: %v", v.Name, err)
		}
		canon, err := appendCanonical(nil, def, 0)
		must(t, err)
		if string(canon) != v.Canonical {
			t.Errorf("%s: canonical\n got %s\nwant %s", v.Name, canon, v.Canonical)
		}
		fp, err := SemanticFingerprint(def)
		must(t, err)
		if fp != v.Fingerprint {
			t.Errorf("%s: fingerprint %s, want %s", v.Name, fp, v.Fingerprint)
		}
		seen[v.Name] = fp
	}
	// Key order is formatting: the reordered definition has the same fingerprint.
	if seen["flat"] != seen["reordered"] {
		t.Error("reordering the keys changed the fingerprint")
	}
}

func TestS23_3_SemanticFingerprintRefusesNonJSON(t *testing.T) {
	deep := any(lib0.Object{})
	for range maxSchemaDepth + 1 {
		deep = []any{deep}
	}
	for name, def := range map[string]lib0.Object{
		"undefined":    {{Key: "a", Value: lib0.Undefined{}}},
		"bigint":       {{Key: "a", Value: lib0.BigInt(1)}},
		"bytes":        {{Key: "a", Value: []byte{1}}},
		"NaN":          {{Key: "a", Value: math.NaN()}},
		"infinity":     {{Key: "a", Value: []any{math.Inf(-1)}}},
		"repeated key": {{Key: "a", Value: 1.0}, {Key: "a", Value: 2.0}},
		"bad UTF-8":    {{Key: "a\xff", Value: 1.0}},
		"Yjs type":     {{Key: "a", Value: yjs.NewMap()}},
		"too deep":     {{Key: "a", Value: deep}},
	} {
		if fp, err := SemanticFingerprint(def); err == nil {
			t.Errorf("%s: fingerprint %s, want an error", name, fp)
		}
	}
}

func onlyRearm(t *testing.T, rs []ApplyResult) *SchemaRearm {
	t.Helper()
	if len(rs) != 1 {
		t.Fatalf("%d updates fanned out, want 1", len(rs))
	}
	return rs[0].Rearm
}

// TestS23_1_PeerRearmsReplicatedSchema: a hub update that replaces meta.schema re-arms it on
// the peer in the apply slot — the same fingerprint as the hub's active schema, the hub's
// updatedAt — and other meta writes (an epoch bump) and ordinary updates re-arm nothing; a
// rewrite that only reorders the definition is a new install with the same fingerprint.
func TestS23_1_PeerRearmsReplicatedSchema(t *testing.T) {
	e := newReplica(t, Config{}, persistence.Options{})
	if _, ok := e.pl.ActiveSchema(); ok {
		t.Fatal("an active schema before any was set")
	}
	must(t, e.hl.ReplaceSchema(ctxT(t), "2026-11-29T10:00:00.000Z", map[string]any{"type": "object", "n": 1.0}))
	hubSchema, ok := e.hl.ActiveSchema()
	if !ok || hubSchema.Fingerprint == "" || hubSchema.UpdatedAt != "2026-11-29T10:00:00.000Z" {
		t.Fatalf("hub active schema %+v %v", hubSchema, ok)
	}
	r := onlyRearm(t, e.fromHub(t))
	if r == nil || r.Installed == nil || r.Failed != "" {
		t.Fatalf("rearm %+v", r)
	}
	if r.Installed.Fingerprint != hubSchema.Fingerprint || r.Installed.UpdatedAt != hubSchema.UpdatedAt || !r.Installed.HasUpdatedAt {
		t.Fatalf("installed %+v, hub %+v", r.Installed, hubSchema)
	}
	if got, ok := e.pl.ActiveSchema(); !ok || got.Fingerprint != hubSchema.Fingerprint {
		t.Fatalf("peer active schema %+v %v", got, ok)
	}

	// Other writes do not re-arm.
	app := newClient(900)
	res, err := e.ps.Apply(ctxT(t), app.set(t, "app", "k", 1.0))
	must(t, err)
	if res.Rearm != nil {
		t.Fatalf("an app write re-armed: %+v", res.Rearm)
	}
	before := e.peerSV(t)
	_, err = e.hl.BumpEpoch(ctxT(t))
	must(t, err)
	if r := e.applyDiff(t, before); r != nil {
		t.Fatalf("an epoch bump re-armed: %+v", r)
	}

	// A format-only rewrite (another key order, a later updatedAt): installed again, same
	// fingerprint.
	before = e.peerSV(t)
	must(t, e.hl.ReplaceSchema(ctxT(t), "2026-11-29T11:00:00.000Z", lib0.Object{{Key: "n", Value: 1.0}, {Key: "type", Value: "object"}}))
	r = e.applyDiff(t, before)
	if r == nil || r.Installed == nil || r.Installed.Fingerprint != hubSchema.Fingerprint || r.Installed.UpdatedAt != "2026-11-29T11:00:00.000Z" {
		t.Fatalf("format-only rewrite %+v", r)
	}
}

// peerSV is the replica's state vector.
func (e *replica) peerSV(t *testing.T) []byte {
	t.Helper()
	sv, err := e.pl.StateVector(ctxT(t))
	must(t, err)
	return sv
}

// applyDiff applies to the replica what the hub has beyond sv (the way a sync round
// brings it), and returns the re-arm.
func (e *replica) applyDiff(t *testing.T, sv []byte) *SchemaRearm {
	t.Helper()
	diff, err := e.hl.EncodeState(ctxT(t), sv)
	must(t, err)
	r, err := e.ps.Apply(ctxT(t), diff)
	must(t, err)
	return r.Rearm
}

// forgedHub is a document that starts from the hub's state and writes meta as a hub could,
// including what the hub's registry never writes.
func (e *replica) forgedHub(t *testing.T) *client {
	t.Helper()
	c := newClient(4242)
	state, err := e.hl.EncodeState(ctxT(t), nil)
	must(t, err)
	c.sync(t, state)
	return c
}

// TestS23_1_PeerRearmFailures: an invalid replicated meta.schema (a definition that is not
// an object, a schema without definition, a removed schema) fails the re-arm with
// NSRT-FATAL-SCHEMA-REARM-INVALID and leaves no active schema; the apply itself succeeded.
// A valid schema later installs again; an unexpected failure is INTERNAL.
func TestS23_1_PeerRearmFailures(t *testing.T) {
	e := newReplica(t, Config{}, persistence.Options{})
	must(t, e.hl.ReplaceSchema(ctxT(t), "t1", map[string]any{"a": true}))
	if r := onlyRearm(t, e.fromHub(t)); r == nil || r.Installed == nil {
		t.Fatalf("rearm %+v", r)
	}
	forged := e.forgedHub(t)
	for name, v := range map[string]any{
		"definition a string": map[string]any{"updatedAt": "t2", "definition": "not an object"},
		"no definition":       map[string]any{"updatedAt": "t3"},
		"schema a number":     42.0,
		"definition holds undefined": lib0.Object{{Key: "updatedAt", Value: "t4"},
			{Key: "definition", Value: lib0.Object{{Key: "x", Value: lib0.Undefined{}}}}},
	} {
		res, err := e.ps.Apply(ctxT(t), forged.set(t, MetaRoot, MetaSchema, v))
		must(t, err)
		if !res.Changed || res.Rearm == nil || res.Rearm.Failed != RearmInvalid || res.Rearm.Installed != nil {
			t.Fatalf("%s: %+v rearm %+v", name, res, res.Rearm)
		}
		if s, ok := e.pl.ActiveSchema(); ok {
			t.Fatalf("%s: active schema %+v after a failed re-arm", name, s)
		}
	}
	// A valid schema installs again; its removal fails.
	res, err := e.ps.Apply(ctxT(t), forged.set(t, MetaRoot, MetaSchema, map[string]any{"definition": map[string]any{}}))
	must(t, err)
	if res.Rearm == nil || res.Rearm.Installed == nil || res.Rearm.Installed.HasUpdatedAt {
		t.Fatalf("valid schema without updatedAt: %+v", res.Rearm)
	}
	res, err = e.ps.Apply(ctxT(t), forged.del(t, MetaRoot, MetaSchema))
	must(t, err)
	if res.Rearm == nil || res.Rearm.Failed != RearmInvalid {
		t.Fatalf("removed schema: %+v", res.Rearm)
	}

	rearmHook = func() { panic("injected") }
	t.Cleanup(func() { rearmHook = nil })
	res, err = e.ps.Apply(ctxT(t), forged.set(t, MetaRoot, MetaSchema, map[string]any{"definition": map[string]any{"b": 1.0}}))
	must(t, err)
	if res.Rearm == nil || res.Rearm.Failed != RearmInternal {
		t.Fatalf("injected failure: %+v", res.Rearm)
	}
	if _, ok := e.pl.ActiveSchema(); ok {
		t.Fatal("active schema after an internal failure")
	}
}

// TestS23_1_RearmAfterPendingStructs: a schema write that waited as pending (its client's
// earlier struct was missing) is installed by the apply that releases it, although that
// apply's own structs do not touch meta.
func TestS23_1_RearmAfterPendingStructs(t *testing.T) {
	e := newReplica(t, Config{}, persistence.Options{})
	forged := e.forgedHub(t)
	first := forged.set(t, "app", "k", "v")
	second := forged.set(t, MetaRoot, MetaSchema, map[string]any{"updatedAt": "t9", "definition": map[string]any{"x": 1.0}})
	res, err := e.ps.Apply(ctxT(t), second)
	must(t, err)
	if res.Rearm != nil {
		t.Fatalf("a pending schema write re-armed: %+v", res.Rearm)
	}
	res, err = e.ps.Apply(ctxT(t), first)
	must(t, err)
	if res.Rearm == nil || res.Rearm.Installed == nil || res.Rearm.Installed.UpdatedAt != "t9" {
		t.Fatalf("released schema write: %+v", res.Rearm)
	}
}

// TestS23_1_SchemaInstalledAtLoadAndReplace: a replica loads with its stored schema active
// (no re-arm reported), the hub refuses to write a schema whose definition is not a JSON
// object, and local writes never re-arm.
func TestS23_1_SchemaInstalledAtLoadAndReplace(t *testing.T) {
	e := newReplica(t, Config{}, persistence.Options{})
	for _, def := range []any{"text", []any{1.0}, nil, map[string]any{"x": lib0.Undefined{}}, map[string]any{"x": math.Inf(1)}} {
		err := e.hl.ReplaceSchema(ctxT(t), "t", def)
		wantErr(t, err, ErrApplyFailed)
	}
	if _, ok := e.hl.ActiveSchema(); ok {
		t.Fatal("a refused schema is active")
	}
	must(t, e.hl.ReplaceSchema(ctxT(t), "t1", map[string]any{"a": "b"}))
	want, _ := e.hl.ActiveSchema()
	e.fromHub(t)
	// Reload the replica: the schema is active from the start.
	l := e.peer.reload(t, e.pl)
	defer l.Release()
	if got, ok := l.ActiveSchema(); !ok || got.Fingerprint != want.Fingerprint || got.UpdatedAt != "t1" {
		t.Fatalf("loaded active schema %+v %v, want %+v", got, ok, want)
	}
	res, err := l.WriteLocal(ctxT(t), newClient(77).set(t, "app", "x", 1.0))
	must(t, err)
	if res.Rearm != nil {
		t.Fatalf("a local write re-armed: %+v", res.Rearm)
	}
	if !strings.HasPrefix(want.Fingerprint, "sha256:v1:") {
		t.Fatalf("fingerprint %q", want.Fingerprint)
	}
}

// TestS23_1_InvalidSchemaRefusesSessions: on a peer, a replica whose meta.schema cannot be
// installed — after a failed re-arm, or when it loads that way — opens no replication
// session (ErrSchemaInvalid), while a session already open goes on, and a valid
// schema it brings opens them again. The hub's sessions are never refused.
func TestS23_1_InvalidSchemaRefusesSessions(t *testing.T) {
	e := newReplica(t, Config{}, persistence.Options{})
	id := e.pl.Identity()
	forged := e.forgedHub(t)
	invalid := func(at string) {
		t.Helper()
		res, err := e.ps.Apply(ctxT(t), forged.set(t, MetaRoot, MetaSchema, map[string]any{"updatedAt": at, "definition": "x"}))
		must(t, err)
		if res.Rearm == nil || res.Rearm.Failed != RearmInvalid {
			t.Fatalf("rearm %+v", res.Rearm)
		}
		_, _, err = openSession(t, e.pl, SessionOptions{Expect: &id})
		wantErr(t, err, ErrSchemaInvalid)
		if CodeOf(err) != CodeInternalError {
			t.Fatalf("code %s", CodeOf(err))
		}
	}
	invalid("t1")
	// The open session goes on, and a valid schema through it lifts the refusal.
	res, err := e.ps.Apply(ctxT(t), forged.set(t, MetaRoot, MetaSchema, map[string]any{"updatedAt": "t2", "definition": map[string]any{}}))
	must(t, err)
	if res.Rearm == nil || res.Rearm.Installed == nil {
		t.Fatalf("rearm %+v", res.Rearm)
	}
	s, _, err := openSession(t, e.pl, SessionOptions{Expect: &id})
	must(t, err)
	s.Close()

	// Loaded with an invalid schema: refused from the start.
	invalid("t3")
	l := e.peer.reload(t, e.pl)
	defer l.Release()
	_, _, err = openSession(t, l, SessionOptions{Expect: &id})
	wantErr(t, err, ErrSchemaInvalid)

	// The hub's sessions open whatever its meta holds.
	hs, _, err := openSession(t, e.hl, SessionOptions{})
	must(t, err)
	hs.Close()
}
