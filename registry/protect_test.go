package registry

import (
	"bytes"
	"errors"
	"testing"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/yjs"
)

// zeroWrite runs fn and fails unless the live document, the fan-out and the store were left
// untouched.
func zeroWrite(t *testing.T, e *env, l *Lease, others []*Session, fn func()) {
	t.Helper()
	before := mustState(t, l, nil)
	sv, err := l.StateVector(ctxT(t))
	must(t, err)
	stats := e.store.Stats()
	fn()
	after := mustState(t, l, nil)
	sv2, err := l.StateVector(ctxT(t))
	must(t, err)
	if !bytes.Equal(sv, sv2) || !bytes.Equal(before, after) {
		t.Fatal("the live document changed")
	}
	if s := e.store.Stats(); s.Committed+uint64(s.Queued) != stats.Committed+uint64(stats.Queued) {
		t.Fatal("something was appended to the store")
	}
	for _, s := range others {
		if p := s.Poll(); len(p.Updates) != 0 {
			t.Fatal("something was fanned out")
		}
	}
}

func TestS20_ProtectedApply(t *testing.T) {
	e, l, ss, cl := hubWithSessions(t, 2, SessionOptions{})
	must(t, l.ReplaceSchema(ctxT(t), "t0", map[string]any{"a": 1.0}))
	cl.sync(t, mustState(t, l, nil))
	a, b := ss[0], ss[1]
	b.Poll()

	state := mustState(t, l, nil)
	// Each case comes from its own client, synced to the namespace, so that no case depends
	// on another (refused) one.
	next := uint32(1000)
	from := func(fn func(c *client) []byte) []byte {
		next++
		c := newClient(next)
		c.sync(t, state)
		return fn(c)
	}
	refused := map[string][]byte{
		"rewrite epoch": from(func(c *client) []byte { return c.set(t, MetaRoot, MetaEpoch, 9.0) }),
		"rewrite id": from(func(c *client) []byte {
			return c.set(t, MetaRoot, MetaReplicationID, "ffffffffffffffffffffffffffffffff")
		}),
		"delete schema": from(func(c *client) []byte { return c.del(t, MetaRoot, MetaSchema) }),
		"new key":       from(func(c *client) []byte { return c.set(t, MetaRoot, "extra", true) }),
		"nested type":   from(func(c *client) []byte { return c.set(t, MetaRoot, "nested", yjs.NewMap()) }),
		"replace schema": from(func(c *client) []byte {
			return c.set(t, MetaRoot, MetaSchema, map[string]any{"updatedAt": "x", "definition": map[string]any{}})
		}),
		"meta and app at once": from(func(c *client) []byte {
			return c.do(t, func(d *yjs.Doc) error {
				if err := d.GetMap("app").Set("k", 1.0); err != nil {
					return err
				}
				return d.GetMap(MetaRoot).Set(MetaEpoch, 2.0)
			})
		}),
		"merged with an ordinary update": from(func(c *client) []byte {
			u1 := c.set(t, "app", "x", 1.0)
			u2 := c.set(t, MetaRoot, MetaEpoch, 3.0)
			m, err := yjs.MergeUpdates([][]byte{u1, u2})
			must(t, err)
			return m
		}),
	}
	for name, u := range refused {
		t.Run(name, func(t *testing.T) {
			zeroWrite(t, e, l, []*Session{b}, func() {
				_, err := a.Apply(ctxT(t), u)
				wantErr(t, err, ErrProtected)
				if CodeOf(err) != CodeProtectedFieldMutation {
					t.Fatal(CodeOf(err))
				}
				_, err = l.WriteLocal(ctxT(t), u)
				wantErr(t, err, ErrProtected)
			})
		})
	}
	malformed := map[string][]byte{
		"garbage":   {1, 2, 3},
		"truncated": from(func(c *client) []byte { return c.set(t, "app", "k", "v")[:5] }),
		"trailing":  from(func(c *client) []byte { return append(c.set(t, "app", "k2", "v"), 0) }),
		"empty":     {},
	}
	for name, u := range malformed {
		t.Run(name, func(t *testing.T) {
			zeroWrite(t, e, l, []*Session{b}, func() {
				_, err := a.Apply(ctxT(t), u)
				wantErr(t, err, ErrApplyFailed)
				if CodeOf(err) != CodeApplyFailed {
					t.Fatal(CodeOf(err))
				}
			})
		})
	}
	// Updates elsewhere pass, the meta check does not stop them.
	res, err := a.Apply(ctxT(t), from(func(c *client) []byte { return c.set(t, "app", "ok", true) }))
	must(t, err)
	if !res.Changed {
		t.Fatal("an ordinary update did not apply")
	}
	if l.Identity().Epoch != 1 {
		t.Fatal("identity changed")
	}
}

func TestS20_LocalWritesOnAPeerAreProtectedButHubUpdatesAreTrusted(t *testing.T) {
	e := newReplica(t, Config{}, persistence.Options{})
	cl := newClient(50)
	cl.sync(t, e.start.Snapshot)
	u := cl.set(t, MetaRoot, MetaSchema, map[string]any{"updatedAt": "x", "definition": map[string]any{}})
	_, err := e.pl.WriteLocal(ctxT(t), u)
	wantErr(t, err, ErrProtected)
	// The same bytes from the hub session apply.
	_, err = e.ps.Apply(ctxT(t), u)
	must(t, err)
	if _, ok, _ := e.pl.Schema(ctxT(t)); !ok {
		t.Fatal("hub update to meta not applied on the peer")
	}
}

// A struct held pending can reach meta only when it is released. The check must keep meta
// unchanged whatever the arrival order: either the pending struct is refused when it arrives
// or the update that would release it is.
func TestS20_PendingStructsCannotSmuggleAMetaChange(t *testing.T) {
	_, l, ss, _ := hubWithSessions(t, 1, SessionOptions{})
	a := ss[0]
	before := l.Identity()
	x := newClient(77)
	x.sync(t, mustState(t, l, nil))
	first := x.set(t, "app", "k", 1.0)              // clock 0 of client 77
	smuggled := x.set(t, MetaRoot, MetaEpoch, 42.0) // clock 1: pending without clock 0
	refusals := 0
	for _, u := range [][]byte{smuggled, first} {
		_, err := a.Apply(ctxT(t), u)
		switch {
		case err == nil:
		case errors.Is(err, ErrProtected):
			refusals++
		default:
			t.Fatal(err)
		}
	}
	if refusals == 0 {
		t.Fatal("nothing refused")
	}
	j, err := l.JSON(ctxT(t))
	must(t, err)
	if j[MetaRoot].(map[string]any)[MetaEpoch] != float64(before.Epoch) {
		t.Fatalf("meta changed: %v", j[MetaRoot])
	}
	// The namespace keeps working for updates that release nothing protected.
	y := newClient(78)
	y.sync(t, mustState(t, l, nil))
	_, err = a.Apply(ctxT(t), y.set(t, "app", "fine", true))
	must(t, err)
}
