package adminapi

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/namespace"
)

// A namespace the API used stays loaded for LeaseIdle after its last request, then unloads;
// at most MaxCachedLeases stay; Close releases them all.
func TestLeaseCacheKeepsRecentNamespacesLoaded(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	e := newEnv(t, Options{Side: observer.SideHub, Clock: fake, LeaseIdle: 10 * time.Second, MaxCachedLeases: 2})
	ids := []string{e.create().NamespaceID, e.create().NamespaceID, e.create().NamespaceID}
	waitLoaded := func(n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for e.reg.Loaded() != n {
			if time.Now().After(deadline) {
				t.Fatalf("%d namespaces loaded, want %d", e.reg.Loaded(), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	e.do("GET", "/v1/namespaces/"+ids[0]+"/doc", nil)
	waitLoaded(1)
	fake.Advance(4 * time.Second)
	e.do("GET", "/v1/namespaces/"+ids[1]+"/doc", nil)
	waitLoaded(2)
	fake.Advance(4 * time.Second)
	e.do("GET", "/v1/namespaces/"+ids[2]+"/doc", nil) // the third evicts the least recent
	waitLoaded(2)
	if e.api.leases.cached() != 2 {
		t.Fatalf("%d anchors, want 2", e.api.leases.cached())
	}
	fake.Advance(5 * time.Second) // ids[1] idle 9 s, ids[2] 5 s
	fake.Advance(5 * time.Second) // ids[1] idle 14 s: released
	waitLoaded(1)
	e.api.Close()
	waitLoaded(0)
}

// resettingTargets resets through the registry, which refuses while the namespace is loaded.
type resettingTargets struct {
	fakeTargets
	reg *registry.Registry
}

func (r *resettingTargets) Reset(ctx context.Context, id string) error {
	t, _ := r.Target(id)
	_, err := r.reg.Reset(ctx, t.Owner, id)
	return err
}

// A reset ends the namespace's event streams and drops its cached lease first, so the
// registry can reset the replica.
func TestResetUnloadsTheNamespace(t *testing.T) {
	_, hubReg := newRegistry(t, registry.RoleHub)
	ctx := context.Background()
	c, _ := hubReg.Create(ctx, "default")
	hl, _ := hubReg.Open(ctx, "default", c.NamespaceID)
	snapshot, _ := hl.EncodeState(ctx, nil)
	hl.Release()

	targets := &resettingTargets{fakeTargets: fakeTargets{list: map[string]namespace.TargetStatus{}}}
	e := newEnv(t, Options{Side: observer.SidePeer, Targets: targets})
	targets.reg = e.reg
	ns := c.NamespaceID
	targets.AddTarget(ctx, namespace.Target{NamespaceID: ns, Owner: "default"})
	l, err := e.reg.Import(ctx, "default", ns, c.Identity, snapshot)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	targets.set(ns, observer.ChannelConflicted)

	// A reader keeps the namespace loaded: a cached lease and a running event stream.
	if status, _ := e.do("GET", "/v1/namespaces/"+ns+"/doc", nil); status != 200 {
		t.Fatal(status)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, "GET", e.srv.URL+"/v1/namespaces/"+ns+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	s := &sse{bufio.NewReader(resp.Body)}
	s.r.ReadString('\n')

	if status, b := e.do("POST", "/v1/namespaces/"+ns+"/reset", nil); status != 200 {
		t.Fatalf("reset: %d %s", status, b)
	}
	if ev := s.next(t); ev.name != "closed" {
		t.Fatalf("the event stream ended with %q", ev.name)
	}
	if _, err := e.reg.Open(ctx, "default", ns); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("after the reset the replica still opens: %v", err)
	}
}
