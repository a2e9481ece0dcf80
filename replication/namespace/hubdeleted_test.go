package namespace_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/namespace"
)

// While a peer is still removing the target and deleting the replica of a namespace the hub
// deleted, the namespace cannot be added as a target again: nobody sees the target gone and
// the namespace still addable before its tombstone is written.
func TestHubDeletedRefusesTheTargetUntilTheTombstone(t *testing.T) {
	reg, _ := newRegistry(t, registry.RolePeer, persistence.Options{})
	const ns = "ns-0000000000000000000000000000000d"
	tc, err := namespace.NewTargetController(namespace.TargetControllerOptions{Registry: reg,
		Targets: []namespace.Target{{NamespaceID: ns, Owner: owner}}})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()

	started, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(release) }) // before tc.Close, which waits for the deletion
	*namespace.HubDeletedStarting = func() { close(started); <-release }
	t.Cleanup(func() { *namespace.HubDeletedStarting = nil })
	tc.HubDeleted(ns)
	<-started
	if err := tc.AddTarget(namespace.Target{NamespaceID: ns, Owner: owner}); !errors.Is(err, registry.ErrDeleted) {
		t.Fatalf("adding the target while its deletion runs: %v, want registry.ErrDeleted", err)
	}
	releaseOnce.Do(func() { close(release) })
	tc.Close() // waits for the deletion
	if _, ok := tc.Target(ns); ok {
		t.Fatal("the target is still there after the deletion")
	}
}
