package adminapi

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/namespace"
)

// fakeLocalWrites is the peer's door for local writes: it refuses with refusal (when set)
// and records what was counted.
type fakeLocalWrites struct {
	mu      sync.Mutex
	refusal error
	admits  []int
	applied []int
}

func (f *fakeLocalWrites) AdmitLocalWrite(_ string, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.admits = append(f.admits, n)
	return f.refusal
}

func (f *fakeLocalWrites) LocalWriteApplied(_ string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, n)
}

func (f *fakeLocalWrites) refuse(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refusal = err
}

// TestPeerLocalWritesDoor: on a peer, POST …/update asks the door first — a replica whose
// failure waits for an operator is 409 REPLICA_FAILED naming the code and the diagnosis'
// next step, a conflicted one 409 REPLICA_CONFLICTED, an update larger than the connection
// to the hub carries 413 naming the limit — and nothing is written; a write it takes is
// counted once it changed the replica (not when it changed nothing). A local replica that is
// not a target refuses writes (409 NOT_REPLICATED). GET /v1/targets shows how a failed
// target recovers and the bytes not replicated; POST /v1/targets/{id}/reset resets it.
func TestPeerLocalWritesDoor(t *testing.T) {
	_, hubReg := newRegistry(t, registry.RoleHub)
	ctx := context.Background()
	c, err := hubReg.Create(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	hl, err := hubReg.Open(ctx, "default", c.NamespaceID)
	if err != nil {
		t.Fatal(err)
	}
	snapshot, _ := hl.EncodeState(ctx, nil)
	hl.Release()
	ns := c.NamespaceID
	path := "/v1/namespaces/" + ns

	targets := &fakeTargets{list: map[string]namespace.TargetStatus{}}
	door := &fakeLocalWrites{}
	explain := func(ts namespace.TargetStatus) (string, string) {
		if ts.Failure == nil {
			return "", ""
		}
		return ts.Failure.Code, "raise --max-chunked-sync-diff-bytes on the hub"
	}
	e := newEnv(t, Options{Side: observer.SidePeer, Targets: targets, LocalWrites: door, ExplainTarget: explain})
	l, err := e.reg.Import(ctx, "default", ns, registry.Identity{ReplicationID: c.Identity.ReplicationID, Epoch: 1}, snapshot)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if status, b := e.do("POST", "/v1/targets", []byte(`{"namespaceId":"`+ns+`"}`)); status != 201 {
		t.Fatalf("add target: %d %s", status, b)
	}

	// Taken and counted.
	u := mapUpdate(t, snapshot, "notes", map[string]any{"a": 1.0})
	if status, b := e.do("POST", path+"/update", u); status != 204 {
		t.Fatalf("write: %d %s", status, b)
	}
	// The same update again changes nothing: not counted.
	if status, b := e.do("POST", path+"/update", u); status != 204 {
		t.Fatalf("write again: %d %s", status, b)
	}
	door.mu.Lock()
	admits, applied := append([]int(nil), door.admits...), append([]int(nil), door.applied...)
	door.mu.Unlock()
	if len(admits) != 2 || admits[0] != len(u) || len(applied) != 1 || applied[0] != len(u) {
		t.Fatalf("admitted %v, counted %v; want two admissions of %d bytes and one count", admits, applied, len(u))
	}

	// Refused: nothing is written.
	before := docOf(t, e, ns)
	failure := &namespace.TargetFailure{Code: "SYNC_TRANSFER_TOO_LARGE", Recovery: namespace.RecoveryAfterConfig, Attempts: 2,
		RetryAt: time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)}
	targets.mu.Lock()
	ts := targets.list[ns]
	ts.State, ts.Failure, ts.UnreplicatedBytes = observer.ChannelFailed, failure, 1234
	targets.list[ns] = ts
	targets.mu.Unlock()
	door.refuse(&namespace.WriteRefusedError{Reason: namespace.RefusedFailed, State: observer.ChannelFailed, Code: failure.Code})
	status, b := e.do("POST", path+"/update", mapUpdate(t, snapshot, "notes", map[string]any{"b": 1.0}))
	if status != 409 || !strings.Contains(string(b), CodeReplicaFailed) || !strings.Contains(string(b), "SYNC_TRANSFER_TOO_LARGE") ||
		!strings.Contains(string(b), "--max-chunked-sync-diff-bytes") {
		t.Fatalf("write to a failed replica: %d %s", status, b)
	}
	door.refuse(&namespace.WriteRefusedError{Reason: namespace.RefusedTooLarge, Size: 600, Limit: 512})
	status, b = e.do("POST", path+"/update", mapUpdate(t, snapshot, "notes", map[string]any{"c": 1.0}))
	if status != 413 || !strings.Contains(string(b), CodeUpdateTooLarge) || !strings.Contains(string(b), "512") {
		t.Fatalf("too large for the connection: %d %s", status, b)
	}
	door.refuse(&namespace.WriteRefusedError{Reason: namespace.RefusedConflicted})
	e.wantError("POST", path+"/update", mapUpdate(t, snapshot, "notes", map[string]any{"d": 1.0}), 409, CodeConflicted)
	if after := docOf(t, e, ns); after != before {
		t.Fatalf("a refused write changed the replica: %s → %s", before, after)
	}

	// The target's recovery and its unreplicated bytes.
	status, b = e.do("GET", "/v1/targets", nil)
	list := decode[[]TargetJSON](t, b)
	if status != 200 || len(list) != 1 || list[0].Retry == nil || list[0].Retry.Recovery != "after-config" || list[0].Retry.Attempts != 2 ||
		list[0].Retry.At == nil || !list[0].Retry.At.Equal(failure.RetryAt) || list[0].UnreplicatedBytes != 1234 ||
		list[0].Code != "SYNC_TRANSFER_TOO_LARGE" {
		t.Fatalf("targets: %d %s", status, b)
	}
	status, b = e.do("GET", path, nil)
	if st := decode[Status](t, b); status != 200 || st.Retry == nil || st.UnreplicatedBytes != 1234 {
		t.Fatalf("status: %d %s", status, b)
	}
	if status, b := e.do("POST", "/v1/targets/"+ns+"/reset", nil); status != 200 || len(targets.resets) != 1 {
		t.Fatalf("reset: %d %s", status, b)
	}

	// Not a target any more: the replica is kept, but writes to it would never replicate.
	if status, _ := e.do("DELETE", "/v1/targets/"+ns, nil); status != 204 {
		t.Fatalf("remove: %d", status)
	}
	e.wantError("POST", path+"/update", mapUpdate(t, snapshot, "notes", map[string]any{"e": 1.0}), 409, CodeNotReplicated)
}

// docOf reads a namespace's document JSON through the API.
func docOf(t *testing.T, e *env, ns string) string {
	t.Helper()
	status, b := e.do("GET", "/v1/namespaces/"+ns+"/doc", nil)
	if status != 200 {
		t.Fatalf("doc: %d %s", status, b)
	}
	return string(b)
}
