package registry

import (
	"context"
	"errors"
	"io"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/yjs"
)

func TestS1_CreateNamespaceIDAndIdentity(t *testing.T) {
	e := newEnv(t, RoleHub, Config{}, persistence.Options{})
	seen := map[string]bool{}
	for range 5 {
		c, err := e.reg.Create(ctxT(t), owner)
		must(t, err)
		if !ValidNamespaceID(c.NamespaceID) {
			t.Fatalf("namespace id %q does not match ^ns-[0-9a-f]{32}$", c.NamespaceID)
		}
		if !ValidReplicationID(c.Identity.ReplicationID) || c.Identity.Epoch != 1 {
			t.Fatalf("identity %v: want 32 lowercase hex and epoch 1", c.Identity)
		}
		if seen[c.NamespaceID] || seen[c.Identity.ReplicationID] {
			t.Fatal("ids repeat")
		}
		seen[c.NamespaceID], seen[c.Identity.ReplicationID] = true, true

		// The identity is in the document, written by the registry itself.
		l, err := e.reg.Open(ctxT(t), owner, c.NamespaceID)
		must(t, err)
		if l.Identity() != c.Identity {
			t.Fatalf("opened identity %v, created %v", l.Identity(), c.Identity)
		}
		j, err := l.JSON(ctxT(t))
		must(t, err)
		want := map[string]any{MetaReplicationID: c.Identity.ReplicationID, MetaEpoch: float64(1)}
		if !reflect.DeepEqual(j[MetaRoot], want) {
			t.Fatalf("meta = %v, want %v", j[MetaRoot], want)
		}
		l.Release()
	}
	if e.reg.Loaded() != 0 && !waitUnloadedAll(e) {
		t.Fatal("namespaces stay loaded")
	}
}

func waitUnloadedAll(e *env) bool {
	for range 10000 {
		if e.reg.Loaded() == 0 && e.store.Stats().Resident == 0 {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// collidingStore makes CreateEntry report a collision a given number of times.
type collidingStore struct {
	persistence.Store
	collisions int
	calls      atomic.Int32
	ids        []string
}

func (s *collidingStore) CreateEntry(ctx context.Context, e persistence.Entry, snap []byte) error {
	n := int(s.calls.Add(1))
	s.ids = append(s.ids, e.NamespaceID)
	if n <= s.collisions {
		return persistence.ErrExists
	}
	return s.Store.CreateEntry(ctx, e, snap)
}

func TestS1_CreateRetriesAtMostEightTimes(t *testing.T) {
	for _, tc := range []struct {
		collisions int
		ok         bool
	}{{0, true}, {3, true}, {8, true}, {9, false}, {20, false}} {
		mem := newMemStore(t, persistence.Options{})
		st := &collidingStore{Store: mem, collisions: tc.collisions}
		e := newEnvOn(t, RoleHub, Config{}, st, true)
		c, err := e.reg.Create(ctxT(t), owner)
		if tc.ok {
			must(t, err)
			if got := int(st.calls.Load()); got != tc.collisions+1 {
				t.Fatalf("%d collisions: %d attempts", tc.collisions, got)
			}
			if st.ids[len(st.ids)-1] != c.NamespaceID {
				t.Fatal("created id is not the last one tried")
			}
		} else {
			wantErr(t, err, ErrInternal)
			if got := int(st.calls.Load()); got != 1+MaxCreateRetries {
				t.Fatalf("%d collisions: %d attempts, want %d", tc.collisions, got, 1+MaxCreateRetries)
			}
		}
		// Every attempt draws a fresh id.
		for i := range st.ids {
			for j := range i {
				if st.ids[i] == st.ids[j] {
					t.Fatal("an attempt reused an id")
				}
			}
		}
	}
}

func TestS1_CreateDrawsIDsFromTheRandomSource(t *testing.T) {
	// An all-zero source: the first namespace gets the zero id, the second collides on
	// every attempt.
	e := newEnv(t, RoleHub, Config{Random: zeroReader{}}, persistence.Options{})
	c, err := e.reg.Create(ctxT(t), owner)
	must(t, err)
	if c.NamespaceID != "ns-00000000000000000000000000000000" || c.Identity.ReplicationID != "00000000000000000000000000000000" {
		t.Fatalf("got %+v", c)
	}
	_, err = e.reg.Create(ctxT(t), owner)
	wantErr(t, err, ErrInternal)
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestS1_CreateIsHubOnly(t *testing.T) {
	e := newEnv(t, RolePeer, Config{}, persistence.Options{})
	_, err := e.reg.Create(ctxT(t), owner)
	wantErr(t, err, ErrRoleViolation)
}

func TestS19_OwnerMismatchIsNotFound(t *testing.T) {
	e := newEnv(t, RoleHub, Config{}, persistence.Options{})
	c, l := e.create(t)
	cases := map[string]struct{ owner, ns string }{
		"other owner":        {"other", c.NamespaceID},
		"missing namespace":  {owner, "ns-0123456789abcdef0123456789abcdef"},
		"malformed id":       {owner, "ns-XYZ"},
		"other owner loaded": {"someone", c.NamespaceID},
	}
	for name, tc := range cases {
		_, err := e.reg.Open(ctxT(t), tc.owner, tc.ns)
		wantErr(t, err, ErrNotFound)
		if CodeOf(err) != CodeNamespaceNotFound {
			t.Fatalf("%s: code %s", name, CodeOf(err))
		}
	}
	// Also when the namespace is not loaded.
	l.Release()
	waitFor(t, "unload", func() bool { return e.reg.Loaded() == 0 })
	_, err := e.reg.Open(ctxT(t), "other", c.NamespaceID)
	wantErr(t, err, ErrNotFound)
	if e.reg.Loaded() != 0 {
		t.Fatal("a refused open loaded the namespace")
	}
	// An archived namespace is not found either.
	_, err = e.reg.Archive(ctxT(t), owner, c.NamespaceID)
	must(t, err)
	_, err = e.reg.Open(ctxT(t), owner, c.NamespaceID)
	wantErr(t, err, ErrNotFound)
}

func TestLeaseRefcountLoadsOnceAndUnloadsOnLastRelease(t *testing.T) {
	e := newEnv(t, RoleHub, Config{}, persistence.Options{})
	c, err := e.reg.Create(ctxT(t), owner)
	must(t, err)
	if e.reg.Loaded() != 0 || e.store.Stats().Resident != 0 {
		t.Fatal("Create left the namespace loaded")
	}
	l1, err := e.reg.Open(ctxT(t), owner, c.NamespaceID)
	must(t, err)
	l2, err := e.reg.Open(ctxT(t), owner, c.NamespaceID)
	must(t, err)
	if l1.rt != l2.rt {
		t.Fatal("two leases, two runtimes")
	}
	if e.reg.Loaded() != 1 || e.store.Stats().Resident != 1 {
		t.Fatalf("loaded %d, resident %d", e.reg.Loaded(), e.store.Stats().Resident)
	}
	cl := newClient(11)
	u := cl.set(t, "app", "k", "v")
	_, err = l1.WriteLocal(ctxT(t), u)
	must(t, err)

	l1.Release()
	l1.Release() // idempotent
	if e.reg.Loaded() != 1 {
		t.Fatal("released one of two leases and the namespace unloaded")
	}
	_, err = l1.StateVector(ctxT(t))
	wantErr(t, err, ErrClosed)
	rt := l2.rt
	l2.Release()
	<-rt.done
	if e.reg.Loaded() != 0 {
		t.Fatalf("after the last release: loaded %d", e.reg.Loaded())
	}
	// The store forgets the namespace once its queued appends are committed.
	waitFor(t, "the store to drop the namespace", func() bool { return e.store.Stats().Resident == 0 })
	// Opening again loads a new runtime from the store, with the write.
	l3, err := e.reg.Open(ctxT(t), owner, c.NamespaceID)
	must(t, err)
	defer l3.Release()
	if l3.rt == rt {
		t.Fatal("reused an unloaded runtime")
	}
	j, err := l3.JSON(ctxT(t), Root{"app", yjs.KindMap})
	must(t, err)
	if !reflect.DeepEqual(j["app"], map[string]any{"k": "v"}) {
		t.Fatalf("reloaded app = %v", j["app"])
	}
}

func TestOpenDuringUnloadWaitsForIt(t *testing.T) {
	e := newEnv(t, RoleHub, Config{SnapshotOnUnloadAfter: 1}, persistence.Options{})
	c, err := e.reg.Create(ctxT(t), owner)
	must(t, err)
	cl := newClient(3)
	for round := range 20 {
		l, err := e.reg.Open(ctxT(t), owner, c.NamespaceID)
		must(t, err)
		_, err = l.WriteLocal(ctxT(t), cl.set(t, "app", "n", float64(round)))
		must(t, err)
		l.Release() // unloads with a snapshot while the next Open starts
	}
	l, err := e.reg.Open(ctxT(t), owner, c.NamespaceID)
	must(t, err)
	defer l.Release()
	j, err := l.JSON(ctxT(t), Root{"app", yjs.KindMap})
	must(t, err)
	if !reflect.DeepEqual(j["app"], map[string]any{"n": float64(19)}) {
		t.Fatalf("app = %v", j["app"])
	}
}

func TestLocalReplica(t *testing.T) {
	hub := newEnv(t, RoleHub, Config{}, persistence.Options{})
	c, hl := hub.create(t)
	peer := newEnv(t, RolePeer, Config{}, persistence.Options{})
	_, ok, err := peer.reg.LocalReplica(ctxT(t), owner, c.NamespaceID)
	must(t, err)
	if ok {
		t.Fatal("peer reports a replica before bootstrap")
	}
	_, start, err := openSession(t, hl, SessionOptions{Snapshot: true})
	must(t, err)
	pl, err := peer.reg.Import(ctxT(t), owner, c.NamespaceID, start.Identity, start.Snapshot)
	must(t, err)
	pl.Release()
	id, ok, err := peer.reg.LocalReplica(ctxT(t), owner, c.NamespaceID)
	must(t, err)
	if !ok || id != c.Identity {
		t.Fatalf("LocalReplica = %v %v, want %v", id, ok, c.Identity)
	}
	if _, ok, _ := peer.reg.LocalReplica(ctxT(t), "other", c.NamespaceID); ok {
		t.Fatal("replica visible to another owner")
	}
}

func openSession(t testing.TB, l *Lease, opts SessionOptions) (*Session, SessionStart, error) {
	t.Helper()
	s, st, err := l.OpenSession(ctxT(t), opts)
	if err == nil {
		t.Cleanup(s.Close)
	}
	return s, st, err
}

func TestCloseIsIdempotentAndRefusesWork(t *testing.T) {
	st := newMemStore(t, persistence.Options{})
	defer st.Close(context.Background())
	reg, err := New(Config{Role: RoleHub, Catalog: st, Documents: st})
	must(t, err)
	c, err := reg.Create(ctxT(t), owner)
	must(t, err)
	l, err := reg.Open(ctxT(t), owner, c.NamespaceID)
	must(t, err)
	s, _, err := l.OpenSession(ctxT(t), SessionOptions{})
	must(t, err)
	cl := newClient(5)
	// Admitted work completes before the namespace unloads
	// (docs/protocol.md#restart-and-shutdown).
	unblock := block(t, l)
	res := make(chan error, 1)
	must(t, s.ApplyAsync(cl.set(t, "app", "a", 1.0), func(_ ApplyResult, err error) { res <- err }))
	closed := make(chan error, 2)
	go func() { closed <- reg.Close(context.Background()) }()
	go func() { closed <- reg.Close(context.Background()) }()
	waitFor(t, "close to start", func() bool { return l.rt.isStopping() })
	unblock()
	must(t, <-res)
	must(t, <-closed)
	must(t, <-closed)
	must(t, reg.Close(context.Background()))
	if p := s.Poll(); !p.Closed {
		t.Fatal("session not told about the shutdown")
	}
	_, err = reg.Open(ctxT(t), owner, c.NamespaceID)
	wantErr(t, err, ErrClosed)
	_, err = l.WriteLocal(ctxT(t), cl.set(t, "app", "b", 1.0))
	wantErr(t, err, ErrClosed)
	_, err = reg.Create(ctxT(t), owner)
	wantErr(t, err, ErrClosed)
	l.Release()
	// The admitted write was handed to the store before the runtime unloaded.
	doc, err := st.Load(ctxT(t), owner, c.NamespaceID)
	must(t, err)
	d := docOf(t, append([][]byte{doc.Snapshot}, doc.Updates...)...)
	if v, _ := d.GetMap("app").Get("a"); v != 1.0 {
		t.Fatalf("admitted write lost: %v", d.ToJSON())
	}
}

func TestOverloadedQueueRefusesAtOnce(t *testing.T) {
	e := newEnv(t, RoleHub, Config{MaxQueuedSlots: 2}, persistence.Options{})
	_, l := e.create(t)
	unblock := block(t, l)
	done := make(chan error, 2)
	for range 2 {
		must(t, l.WriteLocalAsync([]byte{0, 0}, func(_ ApplyResult, err error) { done <- err }))
	}
	err := l.WriteLocalAsync([]byte{0, 0}, func(ApplyResult, error) { t.Error("refused slot ran") })
	wantErr(t, err, ErrOverloaded)
	unblock()
	must(t, <-done)
	must(t, <-done)
}

func TestCompactorFoldsLikeApplying(t *testing.T) {
	cl := newClient(9)
	var ups [][]byte
	for i := range 50 {
		ups = append(ups, cl.insertText(t, "t", i, "x"))
	}
	ups = append(ups, cl.set(t, "m", "k", "v"))
	snap, err := Compactor()(ups[0], ups[1:])
	must(t, err)
	sameDoc(t, docOf(t, snap), cl.doc)
	empty, err := Compactor()(nil, nil)
	must(t, err)
	if len(docOf(t, empty).ToJSON()) != 0 {
		t.Fatal("empty fold is not an empty document")
	}
}

func TestCodeOf(t *testing.T) {
	if CodeOf(ErrFenced.with("", nil)) != CodeReplicationEpochMismatch || CodeOf(io.EOF) != CodeInternalError {
		t.Fatal("codes")
	}
	if !errors.Is(ErrFenced.with("", nil), ErrFenced) || errors.Is(ErrFenced.with("", nil), ErrEpochMismatch) {
		t.Fatal("kinds")
	}
}

// unreachableLog is a hub cluster's shared log that is never reached.
type unreachableLog struct{}

func (unreachableLog) OpenLog(context.Context, string, string, LogHost) (NamespaceLog, error) {
	return nil, persistence.ErrUnavailable
}

func (unreachableLog) Healthy() bool { return true }

// A registry keeps its documents in exactly one place, named by its configuration: a
// document store of this process or a hub cluster's shared log. A cluster's registry has no
// document store, so what needs one — importing a bootstrap snapshot, archiving, resetting —
// is refused before anything is written.
func TestConfig_DocumentsOrSharedLog(t *testing.T) {
	st := newMemStore(t, persistence.Options{})
	t.Cleanup(func() { st.Close(context.Background()) })
	for name, cfg := range map[string]Config{
		"no catalog":   {Role: RoleHub, Documents: st},
		"no documents": {Role: RoleHub, Catalog: st},
		"both":         {Role: RoleHub, Catalog: st, Documents: st, Shared: unreachableLog{}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	reg, err := New(Config{Role: RoleHub, Catalog: st, Shared: unreachableLog{}})
	must(t, err)
	defer reg.Close(context.Background())
	const ns = "ns-0123456789abcdef0123456789abcdef"
	_, err = reg.Import(ctxT(t), owner, ns, Identity{ReplicationID: "0123456789abcdef0123456789abcdef", Epoch: 1}, []byte{0, 0})
	wantErr(t, err, ErrRoleViolation)
	_, err = reg.Archive(ctxT(t), owner, ns)
	wantErr(t, err, ErrRoleViolation)
	_, err = reg.Reset(ctxT(t), owner, ns)
	wantErr(t, err, ErrRoleViolation)
	if list, err := st.Entries(ctxT(t), ""); err != nil || len(list) != 0 {
		t.Fatalf("entries written: %v %v", list, err)
	}
}
