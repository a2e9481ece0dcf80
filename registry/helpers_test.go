package registry

import (
	"bytes"
	"context"
	"errors"
	"os"
	"reflect"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/yjs"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		os.Exit(killChild(dir))
	}
	goleak.VerifyTestMain(m)
}

const owner = "default"

// ctxT is the context of a test's calls: it ends after 30 s, or with the test.
func ctxT(t testing.TB) context.Context { return testkit.Context(t, 30*time.Second) }

// must fails the test at once when err is not nil.
var must = testkit.Must

func wantErr(t testing.TB, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("got error %v, want %v", err, kind)
	}
}

// env is a registry over a memory store.
type env struct {
	reg   *Registry
	store persistence.Store
}

func newMemStore(t testing.TB, opts persistence.Options) persistence.Store {
	t.Helper()
	if opts.Compactor == nil {
		opts.Compactor = Compactor()
	}
	st, err := persistence.NewMemoryStore(opts)
	must(t, err)
	return st
}

// newEnv returns a registry of role over a fresh memory store; both are closed at cleanup
// in the docs/protocol.md#restart-and-shutdown order (registry, then store).
func newEnv(t testing.TB, role Role, cfg Config, opts persistence.Options) *env {
	t.Helper()
	st := newMemStore(t, opts)
	return newEnvOn(t, role, cfg, st, true)
}

func newEnvOn(t testing.TB, role Role, cfg Config, st persistence.Store, closeStore bool) *env {
	t.Helper()
	cfg.Role = role
	cfg.Catalog, cfg.Documents = st, st
	reg, err := New(cfg)
	must(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := reg.Close(ctx); err != nil {
			t.Errorf("registry close: %v", err)
		}
		if closeStore {
			if err := st.Close(ctx); err != nil {
				t.Errorf("store close: %v", err)
			}
		}
	})
	return &env{reg: reg, store: st}
}

// create makes a namespace on a hub env and opens it.
func (e *env) create(t testing.TB) (Created, *Lease) {
	t.Helper()
	c, err := e.reg.Create(ctxT(t), owner)
	must(t, err)
	l, err := e.reg.Open(ctxT(t), owner, c.NamespaceID)
	must(t, err)
	t.Cleanup(l.Release)
	return c, l
}

// replica is a hub namespace and its peer replica, bootstrapped from a hub session's
// snapshot, with a hub session open on the replica: the test can apply to the replica
// whatever the hub (or a forged hub document) produces.
type replica struct {
	hub, peer *env
	start     SessionStart // what the hub's session began with (identity, snapshot)
	hl, pl    *Lease
	hubSess   *Session // the hub's session, opened with the snapshot
	ps        *Session // the replica's session with its hub (trusted updates)
}

// newReplica sets up a replica; the peer registry has peerCfg over a memory store of
// peerOpts.
func newReplica(t testing.TB, peerCfg Config, peerOpts persistence.Options) *replica {
	t.Helper()
	e := &replica{hub: newEnv(t, RoleHub, Config{}, persistence.Options{})}
	var c Created
	c, e.hl = e.hub.create(t)
	var err error
	e.hubSess, e.start, err = openSession(t, e.hl, SessionOptions{Snapshot: true})
	must(t, err)
	e.peer = newEnv(t, RolePeer, peerCfg, peerOpts)
	e.pl, err = e.peer.reg.Import(ctxT(t), owner, c.NamespaceID, e.start.Identity, e.start.Snapshot)
	must(t, err)
	t.Cleanup(e.pl.Release)
	e.ps, _, err = openSession(t, e.pl, SessionOptions{Expect: &e.start.Identity})
	must(t, err)
	return e
}

// fromHub applies to the replica everything the hub fanned out since the last call, and
// returns the results.
func (e *replica) fromHub(t testing.TB) []ApplyResult {
	t.Helper()
	var out []ApplyResult
	for _, u := range e.hubSess.Poll().Updates {
		r, err := e.ps.Apply(ctxT(t), u.Bytes())
		must(t, err)
		out = append(out, r)
	}
	return out
}

// reload closes the sessions opened from l, releases it, waits until the namespace has
// unloaded, and opens it again: the caller releases the new lease.
func (e *env) reload(t testing.TB, l *Lease) *Lease {
	t.Helper()
	ns, rt := l.NamespaceID(), l.rt
	for s := range l.sessions {
		s.Close()
	}
	l.Release()
	<-rt.done
	l2, err := e.reg.Open(ctxT(t), owner, ns)
	must(t, err)
	return l2
}

// client is an application document that produces updates, like a remote editor.
type client struct {
	doc     *yjs.Doc
	updates [][]byte
}

func newClient(id uint32) *client {
	c := &client{doc: yjs.NewDoc(yjs.WithClientID(id))}
	c.doc.OnUpdate(func(u []byte, _ any) { c.updates = append(c.updates, u) })
	return c
}

// sync applies a state to the client without recording it as the client's own update.
func (c *client) sync(t testing.TB, state []byte) {
	t.Helper()
	n := len(c.updates)
	must(t, yjs.ApplyUpdate(c.doc, state, "remote"))
	c.updates = c.updates[:n]
}

// do runs fn in one transaction and returns its update.
func (c *client) do(t testing.TB, fn func(d *yjs.Doc) error) []byte {
	t.Helper()
	n := len(c.updates)
	var err error
	c.doc.Transact(nil, func(*yjs.Transaction) { err = fn(c.doc) })
	must(t, err)
	if len(c.updates) != n+1 {
		t.Fatalf("transaction produced %d updates", len(c.updates)-n)
	}
	return c.updates[n]
}

func (c *client) set(t testing.TB, root, key string, v any) []byte {
	t.Helper()
	return c.do(t, func(d *yjs.Doc) error { return d.GetMap(root).Set(key, v) })
}

func (c *client) del(t testing.TB, root, key string) []byte {
	t.Helper()
	return c.do(t, func(d *yjs.Doc) error { return d.GetMap(root).Delete(key) })
}

func (c *client) insertText(t testing.TB, root string, at int, s string) []byte {
	t.Helper()
	return c.do(t, func(d *yjs.Doc) error { return d.GetText(root).Insert(at, s, nil) })
}

// docOf builds a document from updates.
func docOf(t testing.TB, updates ...[]byte) *yjs.Doc {
	t.Helper()
	d := yjs.NewDoc(yjs.WithClientID(7))
	for _, u := range updates {
		must(t, yjs.ApplyUpdate(d, u, nil))
	}
	return d
}

// sameDoc fails unless a and b have equal JSON and state vectors.
func sameDoc(t testing.TB, a, b *yjs.Doc) {
	t.Helper()
	if ja, jb := a.ToJSON(), b.ToJSON(); !reflect.DeepEqual(ja, jb) {
		t.Fatalf("documents differ:\n%v\n%v", ja, jb)
	}
	if !bytes.Equal(a.EncodeStateVector(), b.EncodeStateVector()) {
		t.Fatalf("state vectors differ")
	}
}

// leaseDoc returns a copy of the lease's document.
func leaseDoc(t testing.TB, l *Lease) *yjs.Doc {
	t.Helper()
	state, err := l.EncodeState(ctxT(t), nil)
	must(t, err)
	return docOf(t, state)
}

// block occupies the runtime of l with a slot until the returned function is called; it
// returns once the slot runs.
func block(t testing.TB, l *Lease) (unblock func()) {
	t.Helper()
	running := make(chan struct{})
	release := make(chan struct{})
	err := enqueue(l.rt, nil, func(*nsRuntime, *slot) (struct{}, error) {
		close(running)
		<-release
		return struct{}{}, nil
	}, func(struct{}, error) {})
	must(t, err)
	<-running
	return func() { close(release) }
}

// queued returns the number of admitted slots waiting in l's runtime (not yet taken by its
// goroutine).
func queued(l *Lease) int {
	l.rt.mu.Lock()
	defer l.rt.mu.Unlock()
	return len(l.rt.queue)
}

// waitFor polls cond until it holds or fails the test after 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// updateBytes returns the bytes of polled updates.
func updateBytes(us []*yjs.Shared) [][]byte {
	out := make([][]byte, len(us))
	for i, u := range us {
		out[i] = u.Bytes()
	}
	return out
}
