package registry_test

import (
	"context"
	"fmt"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/yjs"
)

// A hub creates a namespace and bootstraps a peer; a local write on the peer reaches the
// hub through their sessions, and the epoch bump fences the hub's session.
func Example() {
	ctx := context.Background()
	newRegistry := func(role registry.Role) (*registry.Registry, func()) {
		st, _ := persistence.NewMemoryStore(persistence.Options{Compactor: registry.Compactor()})
		reg, _ := registry.New(registry.Config{Role: role, Catalog: st, Documents: st})
		return reg, func() { reg.Close(ctx); st.Close(ctx) }
	}
	hub, closeHub := newRegistry(registry.RoleHub)
	defer closeHub()
	peer, closePeer := newRegistry(registry.RolePeer)
	defer closePeer()

	// Hub: create, open, and start a bootstrap session (OPEN without a local replica).
	created, _ := hub.Create(ctx, "default")
	hubLease, _ := hub.Open(ctx, "default", created.NamespaceID)
	defer hubLease.Release()
	toPeer, start, _ := hubLease.OpenSession(ctx, registry.SessionOptions{Peer: "peer-a", Snapshot: true})

	// Peer: import the snapshot for the target's owner, then open its session to the hub.
	peerLease, _ := peer.Import(ctx, "default", created.NamespaceID, start.Identity, start.Snapshot)
	defer peerLease.Release()
	toHub, _, _ := peerLease.OpenSession(ctx, registry.SessionOptions{Peer: "hub", Expect: &start.Identity})

	// An application writes on the peer; the update is queued for the hub session.
	app := yjs.NewDoc(yjs.WithClientID(1))
	var update []byte
	app.OnUpdate(func(u []byte, _ any) { update = u })
	app.GetText("notes").Insert(0, "hello", nil)
	peerLease.WriteLocal(ctx, update)
	for _, u := range toHub.Poll().Updates {
		res, err := toPeer.Apply(ctx, u.Bytes()) // the hub applies what the peer sent
		fmt.Println("hub applied:", res.Changed, err)
	}
	doc, _ := hubLease.JSON(ctx, registry.Root{Name: "notes", Kind: yjs.KindText})
	fmt.Println("hub notes:", doc["notes"])

	// The epoch bump fences the session of the old epoch.
	id, _ := hubLease.BumpEpoch(ctx)
	fmt.Println("epoch:", id.Epoch, "fenced:", toPeer.Poll().Fenced != nil)
	_, err := toPeer.StateVector(ctx)
	fmt.Println(registry.CodeOf(err))
	// Output:
	// hub applied: true <nil>
	// hub notes: hello
	// epoch: 2 fenced: true
	// REPLICATION_EPOCH_MISMATCH
}
