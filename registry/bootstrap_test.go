package registry

import (
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/yjs"
)

// hubSnapshot creates a namespace with some content on a hub and returns a bootstrap
// snapshot of it.
func hubSnapshot(t *testing.T) (Created, SessionStart, *Lease) {
	t.Helper()
	hub := newEnv(t, RoleHub, Config{}, persistence.Options{})
	c, hl := hub.create(t)
	cl := newClient(40)
	cl.sync(t, mustState(t, hl, nil))
	_, err := hl.WriteLocal(ctxT(t), cl.insertText(t, "text", 0, "hub content"))
	must(t, err)
	_, start, err := openSession(t, hl, SessionOptions{Snapshot: true})
	must(t, err)
	return c, start, hl
}

func TestS8_1_BootstrapImport(t *testing.T) {
	c, start, hl := hubSnapshot(t)
	peer := newEnv(t, RolePeer, Config{}, persistence.Options{})
	pl, err := peer.reg.Import(ctxT(t), owner, c.NamespaceID, c.Identity, start.Snapshot)
	must(t, err)
	if pl.Identity() != c.Identity {
		t.Fatalf("imported identity %v", pl.Identity())
	}
	sameDoc(t, leaseDoc(t, pl), leaseDoc(t, hl))
	// The replica is stored for the target's owner.
	ent, err := peer.store.Entry(ctxT(t), c.NamespaceID)
	must(t, err)
	if ent.Owner != owner {
		t.Fatalf("stored for owner %q", ent.Owner)
	}
	pl.Release()
	waitFor(t, "unload", func() bool { return peer.reg.Loaded() == 0 })
	l2, err := peer.reg.Open(ctxT(t), owner, c.NamespaceID)
	must(t, err)
	defer l2.Release()
	sameDoc(t, leaseDoc(t, l2), leaseDoc(t, hl))
}

func TestS8_1_BootstrapRefusals(t *testing.T) {
	c, start, _ := hubSnapshot(t)
	noMeta := newClient(41)
	noMeta.insertText(t, "text", 0, "x")
	noMetaSnap, err := yjs.EncodeStateAsUpdate(noMeta.doc, nil)
	must(t, err)
	other := c.Identity
	other.ReplicationID = "00000000000000000000000000000001"
	later := c.Identity
	later.Epoch++
	cases := []struct {
		name     string
		ns       string
		want     Identity
		snapshot []byte
		kind     error
	}{
		{"malformed snapshot", c.NamespaceID, c.Identity, []byte{9, 9, 9}, ErrBootstrapFailed},
		{"truncated snapshot", c.NamespaceID, c.Identity, start.Snapshot[:len(start.Snapshot)/2], ErrBootstrapFailed},
		{"no identity", c.NamespaceID, c.Identity, noMetaSnap, ErrBootstrapFailed},
		{"replication id differs", c.NamespaceID, other, start.Snapshot, ErrIDMismatch},
		{"epoch differs", c.NamespaceID, later, start.Snapshot, ErrEpochMismatch},
		{"invalid namespace id", "ns-1", c.Identity, start.Snapshot, ErrBootstrapFailed},
	}
	peer := newEnv(t, RolePeer, Config{}, persistence.Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := peer.reg.Import(ctxT(t), owner, tc.ns, tc.want, tc.snapshot)
			wantErr(t, err, tc.kind)
			if _, err := peer.store.Entry(ctxT(t), c.NamespaceID); !errors.Is(err, persistence.ErrNotFound) {
				t.Fatal("a refused import stored something")
			}
		})
	}
}

func TestS8_1_DuplicateImportOverwritesNothing(t *testing.T) {
	c, start, _ := hubSnapshot(t)
	peer := newEnv(t, RolePeer, Config{}, persistence.Options{})
	pl, err := peer.reg.Import(ctxT(t), owner, c.NamespaceID, c.Identity, start.Snapshot)
	must(t, err)
	local := newClient(42)
	local.sync(t, start.Snapshot)
	_, err = pl.WriteLocal(ctxT(t), local.set(t, "app", "mine", true))
	must(t, err)
	want := leaseDoc(t, pl)

	// While loaded, and after unloading, a second import of the same namespace fails —
	// under the same owner or another one.
	_, err = peer.reg.Import(ctxT(t), owner, c.NamespaceID, c.Identity, start.Snapshot)
	wantErr(t, err, ErrBootstrapFailed)
	pl.Release()
	waitFor(t, "unload", func() bool { return peer.reg.Loaded() == 0 })
	for _, o := range []string{owner, "other"} {
		_, err = peer.reg.Import(ctxT(t), o, c.NamespaceID, c.Identity, start.Snapshot)
		wantErr(t, err, ErrBootstrapFailed)
		if CodeOf(err) != CodeBootstrapFailed {
			t.Fatal(CodeOf(err))
		}
	}
	l, err := peer.reg.Open(ctxT(t), owner, c.NamespaceID)
	must(t, err)
	defer l.Release()
	sameDoc(t, leaseDoc(t, l), want)
}

func TestS8_1_ConcurrentImportsOneWins(t *testing.T) {
	c, start, _ := hubSnapshot(t)
	for round := range 5 {
		peer := newEnv(t, RolePeer, Config{}, persistence.Options{})
		const n = 8
		var wg sync.WaitGroup
		leases := make(chan *Lease, n)
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				o := owner
				if i%2 == 1 {
					o = "other" // a duplicate under another owner is refused as well
				}
				l, err := peer.reg.Import(ctxT(t), o, c.NamespaceID, c.Identity, start.Snapshot)
				if err != nil {
					errs <- err
					return
				}
				leases <- l
			}()
		}
		wg.Wait()
		close(leases)
		close(errs)
		if len(leases) != 1 {
			t.Fatalf("round %d: %d imports succeeded", round, len(leases))
		}
		for err := range errs {
			wantErr(t, err, ErrBootstrapFailed)
		}
		for l := range leases {
			l.Release()
		}
	}
}

func TestResetForgetsTheReplica(t *testing.T) {
	c, start, _ := hubSnapshot(t)
	peer := newEnv(t, RolePeer, Config{}, persistence.Options{})
	pl, err := peer.reg.Import(ctxT(t), owner, c.NamespaceID, c.Identity, start.Snapshot)
	must(t, err)
	_, err = peer.reg.Reset(ctxT(t), owner, c.NamespaceID)
	wantErr(t, err, ErrInUse)
	pl.Release()
	_, err = peer.reg.Reset(ctxT(t), "other", c.NamespaceID)
	wantErr(t, err, ErrNotFound)
	info, err := peer.reg.Reset(ctxT(t), owner, c.NamespaceID)
	must(t, err)
	if info.Reason != persistence.ReasonReset || !info.HasDoc {
		t.Fatalf("archive %+v", info)
	}
	if _, ok, err := peer.reg.LocalReplica(ctxT(t), owner, c.NamespaceID); err != nil || ok {
		t.Fatalf("replica still there: %v %v", ok, err)
	}
	_, err = peer.reg.Reset(ctxT(t), owner, c.NamespaceID)
	wantErr(t, err, ErrNotFound)
	// The archive keeps the old replica; a new bootstrap works.
	arch, err := peer.store.LoadArchive(ctxT(t), c.NamespaceID, info.ID)
	must(t, err)
	if len(arch.Snapshot) == 0 {
		t.Fatal("archive is empty")
	}
	l, err := peer.reg.Import(ctxT(t), owner, c.NamespaceID, c.Identity, start.Snapshot)
	must(t, err)
	defer l.Release()
	j, err := l.JSON(ctxT(t), Root{"text", yjs.KindText})
	must(t, err)
	if !reflect.DeepEqual(j["text"], "hub content") {
		t.Fatalf("text = %v", j["text"])
	}
}
