package registry

import (
	"errors"
	"reflect"
	"testing"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/yjs"
)

// A hub that lost a namespace re-creates it from a replica's whole state: same id, same
// identity, same content, and a peer's replica reconciles with it. A namespace the hub has is
// not overwritten; a state that is not a replica's, or a peer registry, is refused.
func TestRecreateFromAReplica(t *testing.T) {
	r := newReplica(t, Config{}, persistence.Options{})
	ns := r.hl.NamespaceID()
	_, err := r.pl.WriteLocal(ctxT(t), newClient(3).set(t, "notes", "k", "from the peer"))
	must(t, err)
	state := mustState(t, r.pl, nil)

	fresh := newEnv(t, RoleHub, Config{}, persistence.Options{})
	id, err := fresh.reg.Recreate(ctxT(t), owner, ns, state)
	must(t, err)
	if id != r.start.Identity {
		t.Fatalf("re-created identity %v, the replica's %v", id, r.start.Identity)
	}
	l, err := fresh.reg.Open(ctxT(t), owner, ns)
	must(t, err)
	defer l.Release()
	if l.Identity() != r.start.Identity {
		t.Fatalf("opened identity %v", l.Identity())
	}
	got, err := l.JSON(ctxT(t))
	must(t, err)
	want, err := r.pl.JSON(ctxT(t))
	must(t, err)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("re-created document %v, the replica's %v", got, want)
	}
	// The replica's session expects that identity, and reconciles.
	sess, _, err := openSession(t, l, SessionOptions{Expect: &r.start.Identity})
	must(t, err)
	sess.Close()

	if _, err := fresh.reg.Recreate(ctxT(t), owner, ns, state); !errors.Is(err, ErrExists) {
		t.Fatalf("re-creating a namespace the hub has: %v", err)
	}
	if _, err := fresh.reg.Recreate(ctxT(t), owner, "ns-00000000000000000000000000000001", []byte{1, 2, 3}); !errors.Is(err, ErrApplyFailed) {
		t.Fatalf("a state that does not apply: %v", err)
	}
	plain := yjs.NewDoc()
	if err := plain.GetMap("notes").Set("k", "v"); err != nil {
		t.Fatal(err)
	}
	noMeta, err := yjs.EncodeStateAsUpdate(plain, nil)
	must(t, err)
	if _, err := fresh.reg.Recreate(ctxT(t), owner, "ns-00000000000000000000000000000001", noMeta); !errors.Is(err, ErrApplyFailed) {
		t.Fatalf("a state without identity: %v", err)
	}
	if _, err := r.peer.reg.Recreate(ctxT(t), owner, "ns-00000000000000000000000000000001", state); !errors.Is(err, ErrRoleViolation) {
		t.Fatalf("Recreate on a peer: %v", err)
	}
}
