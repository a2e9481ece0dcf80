package namespace_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/lib0"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/ws/wstest"
)

// The definitions and fingerprint come from the independent JS generator of the registry's
// fingerprint vectors (registry/testdata/fingerprint/vectors.json, "flat" and "reordered"):
// the same definition in two key orders has one semantic fingerprint.
var (
	flatDefinition = lib0.Object{{Key: "type", Value: "object"}, {Key: "title", Value: "Note"},
		{Key: "required", Value: true}, {Key: "version", Value: 3.0}}
	reorderedDefinition = lib0.Object{{Key: "version", Value: 3.0}, {Key: "required", Value: true},
		{Key: "title", Value: "Note"}, {Key: "type", Value: "object"}}
	flatFingerprint = "sha256:v1:09dbb49948fae214c76b743260f8c4a9b27d2066815b60d3efdc657b6d8d0c58"
)

func schemaValue(updatedAt any, definition any) lib0.Object {
	var o lib0.Object
	if updatedAt != nil {
		o = append(o, lib0.Field{Key: "updatedAt", Value: updatedAt})
	}
	return append(o, lib0.Field{Key: "definition", Value: definition})
}

// rearmEvents returns the peer's schema-rearm-applied and schema-rearm-failed events of ns.
func rearmEvents(f *nsPeer, ns protocol.NamespaceID) ([]observer.SchemaRearmApplied, []observer.SchemaRearmFailed) {
	var applied []observer.SchemaRearmApplied
	var failed []observer.SchemaRearmFailed
	for _, e := range eventsOf[observer.SchemaRearmApplied](f.rec, observer.SidePeer) {
		if e.NamespaceID == ns.String() {
			applied = append(applied, e)
		}
	}
	for _, e := range eventsOf[observer.SchemaRearmFailed](f.rec, observer.SidePeer) {
		if e.NamespaceID == ns.String() {
			failed = append(failed, e)
		}
	}
	return applied, failed
}

// settledRearms waits for the n-th schema-rearm-applied of ns, lets the wire settle, and
// checks that there are exactly n and no schema-rearm-failed.
func settledRearms(t *testing.T, f *nsPeer, w *wire, ns protocol.NamespaceID, n int) []observer.SchemaRearmApplied {
	t.Helper()
	testkit.Eventually(t, wait, fmt.Sprintf("%d schema-rearm-applied", n), func() bool {
		applied, _ := rearmEvents(f, ns)
		return len(applied) >= n
	})
	w.quiet()
	applied, failed := rearmEvents(f, ns)
	if len(applied) != n || len(failed) != 0 {
		t.Fatalf("%d schema-rearm-applied and %d -failed, want %d and 0", len(applied), len(failed), n)
	}
	return applied
}

// activeSchema reads the active schema of own's replica of ns.
func activeSchema(t *testing.T, reg *registry.Registry, own string, ns protocol.NamespaceID) (registry.ActiveSchema, bool) {
	t.Helper()
	l, err := reg.Open(ctxT(t), own, ns.String())
	must(t, err)
	defer l.Release()
	return l.ActiveSchema()
}

// sendUpdate sends a live UPDATE and waits for its UPDATE_ACK.
func sendUpdate(t *testing.T, w *wire, ns protocol.NamespaceID, u []byte) {
	t.Helper()
	seq := w.send(&protocol.Update{NamespaceID: ns, Update: u})
	ack, _ := expect[*protocol.UpdateAck](w)
	if ack.NamespaceID != ns || ack.AckedSequence != seq {
		t.Fatalf("UPDATE_ACK %+v, want %d", ack, seq)
	}
}

// TestS23_1_PeerSchemaRearmApplied: every hub update that installs a new meta.schema emits
// exactly one schema-rearm-applied, after its UPDATE_ACK, with the definition's semantic
// fingerprint and the replicated updatedAt (null when absent); a format-only change installs
// again with the same fingerprint; updates that leave meta.schema as it is emit nothing.
func TestS23_1_PeerSchemaRearmApplied(t *testing.T) {
	f := newNSPeer(t, nsConfig(t))
	ns, _, w, hubDoc := f.liveTarget()
	if a, fl := rearmEvents(f, ns); len(a)+len(fl) != 0 {
		t.Fatalf("re-arm events before any schema change: %+v %+v", a, fl)
	}

	steps := []struct {
		name      string
		value     lib0.Object
		updatedAt observer.Opt[string]
	}{
		{"install", schemaValue("2026-11-29T10:00:00.000Z", flatDefinition), observer.Some("2026-11-29T10:00:00.000Z")},
		{"format-only", schemaValue("2026-11-29T10:05:00.000Z", reorderedDefinition), observer.Some("2026-11-29T10:05:00.000Z")},
		{"no updatedAt", schemaValue(nil, flatDefinition), observer.None[string]()},
		{"free-text updatedAt", schemaValue("set by bob", flatDefinition), observer.None[string]()},
	}
	for i, st := range steps {
		sendUpdate(t, w, ns, hubDoc.setMeta(registry.MetaSchema, st.value))
		got := settledRearms(t, f, w, ns, i+1)[i]
		if got.SemanticFingerprint != flatFingerprint || got.UpdatedAt != st.updatedAt || got.ConnectionID != observer.Some("c-test-1") {
			t.Fatalf("%s: %+v, want fingerprint %s updatedAt %v", st.name, got, flatFingerprint, st.updatedAt)
		}
		as, ok := activeSchema(t, f.reg, owner, ns)
		if !ok || as.Fingerprint != flatFingerprint {
			t.Fatalf("%s: active schema %+v %v", st.name, as, ok)
		}
	}

	// An app update, and a meta write that leaves the schema as it is, re-arm nothing.
	sendUpdate(t, w, ns, hubDoc.set("k", 1.0))
	sendUpdate(t, w, ns, hubDoc.setMeta("other", "x"))
	w.quiet()
	if applied, _ := rearmEvents(f, ns); len(applied) != len(steps) {
		t.Fatalf("%d applied events after updates that kept the schema, want %d", len(applied), len(steps))
	}
	// The key set is frozen: no latency or timestamp of this side
	// (docs/protocol.md#delivery-and-clocks: no clock read).
	for _, e := range f.rec.OfType(observer.TypeSchemaRearmApplied) {
		if got, want := strings.Join(e.Keys(), ","), "type,side,connectionId,namespaceId,semanticFingerprint,updatedAt"; got != want {
			t.Fatalf("schema-rearm-applied keys %s, want %s", got, want)
		}
	}
	if f.state(ns) != observer.ChannelLive {
		t.Fatalf("state %s after re-arms", f.state(ns))
	}
}

// TestS23_1_PeerSchemaRearmCatchUp: a schema replaced while the peer was offline is
// re-armed by the reconcile round's Step2 apply on the next connection.
func TestS23_1_PeerSchemaRearmCatchUp(t *testing.T) {
	f := newNSPeer(t, nsConfig(t))
	ns, id, w, hubDoc := f.liveTarget()

	w.end.(*wstest.End).Drop()
	f.waitState(ns, observer.ChannelDisconnected)
	hubDoc.setMeta(registry.MetaSchema, schemaValue("2026-11-29T11:00:00Z", flatDefinition))
	w = f.reconnect()
	expect[*protocol.OpenNamespace](w)
	w.send(&protocol.OpenOK{NamespaceID: ns, Mode: protocol.ModeReconcile, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
	f.hubRound(w, ns, hubDoc)
	f.waitState(ns, observer.ChannelLive)
	if got := settledRearms(t, f, w, ns, 1)[0]; got.SemanticFingerprint != flatFingerprint ||
		got.UpdatedAt != observer.Some("2026-11-29T11:00:00Z") || got.ConnectionID != observer.Some("c-test-2") {
		t.Fatalf("applied %+v", got)
	}
}

// TestS23_1_PeerSchemaRearmFailedClosesTheNamespace: an invalid replicated meta.schema
// emits exactly one schema-rearm-failed and the namespace closes itself with one
// CLOSE_NAMESPACE — the update itself is applied and acknowledged, so no namespace-failed.
// A second invalid update admitted around it adds no event and no close (the latch); a
// reconnect does not reopen the namespace; removing and adding the target back reopens it,
// but its replication session is refused while the replica's schema is invalid
// (session-open-failed); a reset recovers. Without an observer the channel behaves the same.
func TestS23_1_PeerSchemaRearmFailedClosesTheNamespace(t *testing.T) {
	for _, observed := range []bool{true, false} {
		t.Run(fmt.Sprintf("observed=%v", observed), func(t *testing.T) {
			f := newNSPeerOpts(t, nsConfig(t), nsPeerOptions{unobserved: !observed})
			ns, id, w, hubDoc := f.liveTarget()
			other, oid, otherDoc := f.addLiveTarget(w, 301)
			sendUpdate(t, w, ns, hubDoc.setMeta(registry.MetaSchema, schemaValue("2026-11-29T12:00:00Z", flatDefinition)))

			// Two invalid schemas back to back: a definition that is not an object, then a
			// definition whose text must never reach an event.
			const secret = "corrupt-schema-text-7f3a"
			bad1 := hubDoc.setMeta(registry.MetaSchema, schemaValue("2026-11-29T12:01:00Z", secret))
			bad2 := hubDoc.setMeta(registry.MetaSchema, schemaValue("2026-11-29T12:02:00Z", []any{secret}))
			s1 := w.send(&protocol.Update{NamespaceID: ns, Update: bad1})
			w.send(&protocol.Update{NamespaceID: ns, Update: bad2})
			var acks, closes int
			var closeSeq uint32
			for closes == 0 {
				fr := w.recv()
				switch m := fr.Message.(type) {
				case *protocol.UpdateAck:
					if m.AckedSequence != s1 && acks == 0 {
						t.Fatalf("first UPDATE_ACK acks %d, want %d", m.AckedSequence, s1)
					}
					acks++
				case *protocol.CloseNamespace:
					if m.NamespaceID != ns || m.ReasonCode != "schema-rearm-failed" {
						t.Fatalf("CLOSE_NAMESPACE %+v", m)
					}
					closes++
					closeSeq = fr.Sequence
				default:
					t.Fatalf("unexpected %s", describe(fr))
				}
			}
			if acks == 0 {
				t.Fatal("the update that carried the invalid schema was not acknowledged before the close")
			}
			w.send(&protocol.CloseOK{NamespaceID: ns, AckedSequence: closeSeq})
			f.waitState(ns, observer.ChannelClosed)
			for _, fr := range w.barrier() {
				if _, ok := fr.Message.(*protocol.CloseNamespace); ok {
					t.Fatalf("a second CLOSE_NAMESPACE: %s", describe(fr))
				}
			}
			if _, ok := activeSchema(t, f.reg, owner, ns); ok {
				t.Fatal("an active schema after a failed re-arm")
			}
			if st, _ := f.tc.Target(ns.String()); !st.SchemaFailed {
				t.Fatalf("target status %+v", st)
			}
			if f.state(other) != observer.ChannelLive {
				t.Fatalf("the other namespace is %s", f.state(other))
			}
			if observed {
				applied, failed := rearmEvents(f, ns)
				if len(applied) != 1 || len(failed) != 1 || failed[0].Code != observer.SchemaRearmInvalid {
					t.Fatalf("applied %+v failed %+v", applied, failed)
				}
				for _, e := range eventsOf[observer.NamespaceFailed](f.rec, observer.SidePeer) {
					t.Fatalf("namespace-failed %+v", e)
				}
				f.rec.AssertSafe(t, secret)
				for _, e := range f.rec.OfType(observer.TypeSchemaRearmFailed) {
					if got, want := strings.Join(e.Keys(), ","), "type,side,connectionId,namespaceId,code"; got != want {
						t.Fatalf("schema-rearm-failed keys %s, want %s", got, want)
					}
				}
			} else if n := len(f.rec.Events()); n != 0 {
				t.Fatalf("%d events without an observer", n)
			}

			// A new connection opens only the other target; the failed one stays closed.
			w = f.reconnectOpeningOnly(w, other, oid, otherDoc)
			if f.state(ns) != observer.ChannelClosed {
				t.Fatalf("state %s after the reconnect, want closed", f.state(ns))
			}

			// Removing and adding the target back reopens it on this connection (where the
			// namespace had no lifecycle yet), but the replica's schema is still invalid: its
			// replication session is refused and the namespace fails (session-open-failed).
			must(t, f.tc.RemoveTarget(ctxT(t), ns.String()))
			f.target(ns)
			open, _ := expect[*protocol.OpenNamespace](w)
			if open.NamespaceID != ns || !open.HasLocalReplica {
				t.Fatalf("OPEN %+v after the re-add", open)
			}
			w.send(&protocol.OpenOK{NamespaceID: ns, Mode: protocol.ModeReconcile, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
			w.expectError(ns, protocol.CodeInternalError)
			f.waitState(ns, observer.ChannelFailed)
			if observed {
				waitFailed(t, f.rec, observer.SidePeer, ns, observer.FailedSessionOpenFailed)
			}

			// The way out: the hub's schema is fixed and the target reset — the replica is
			// archived and bootstrapped again from the hub's state, whose schema is installed
			// when it loads. The namespace had its lifecycle on this connection, so the reset
			// reopens it on the next one; the other target is removed first, so that
			// connection carries this one only.
			removed := make(chan error, 1)
			go func() { removed <- f.tc.RemoveTarget(ctxT(t), other.String()) }()
			if cn, cseq := expect[*protocol.CloseNamespace](w); cn.NamespaceID == other {
				w.send(&protocol.CloseOK{NamespaceID: other, AckedSequence: cseq})
			} else {
				t.Fatalf("CLOSE_NAMESPACE %+v", cn)
			}
			must(t, <-removed)
			hubDoc.setMeta(registry.MetaSchema, schemaValue("2026-11-29T12:10:00Z", reorderedDefinition))
			must(t, f.tc.Reset(ctxT(t), ns.String()))
			w = f.reconnect()
			f.bootstrapOn(w, ns, id, hubDoc.diff(nil))
			f.hubRound(w, ns, hubDoc)
			f.waitState(ns, observer.ChannelLive)
			if as, ok := activeSchema(t, f.reg, owner, ns); !ok || as.Fingerprint != flatFingerprint || as.UpdatedAt != "2026-11-29T12:10:00Z" {
				t.Fatalf("active schema after the reset %+v %v", as, ok)
			}
			w.quiet()
			if st, _ := f.tc.Target(ns.String()); st.SchemaFailed {
				t.Fatalf("target status %+v after the reset", st)
			}
			if observed {
				if applied, failed := rearmEvents(f, ns); len(applied) != 1 || len(failed) != 1 {
					t.Fatalf("after the reset: applied %+v failed %+v", applied, failed)
				}
			}
		})
	}
}

// TestE2E_S23_1_HubReplaceSchemaRearmsEveryPeer: over real WebSockets, the hub's
// ReplaceSchema re-arms the schema on every peer with exactly one schema-rearm-applied each,
// carrying the hub's semantic fingerprint and updatedAt; the hub emits no re-arm event.
func TestE2E_S23_1_HubReplaceSchemaRearmsEveryPeer(t *testing.T) {
	c := newCluster(t, clusterConfig(t), 2)
	nss := c.create(1)
	ns := nss[0]
	c.waitStates(nss, observer.ChannelLive)

	l, err := c.hubReg().Open(ctxT(t), hubOwner, ns.String())
	must(t, err)
	const updatedAt = "2026-11-29T13:00:00.000Z"
	must(t, l.ReplaceSchema(ctxT(t), updatedAt, map[string]any{"type": "object", "title": "Note", "required": true, "version": 3.0}))
	hubSchema, ok := l.ActiveSchema()
	l.Release()
	if !ok || hubSchema.Fingerprint != flatFingerprint {
		t.Fatalf("hub active schema %+v %v", hubSchema, ok)
	}
	c.converged(nss)
	byConn := func() map[string]int {
		n := map[string]int{}
		for _, e := range c.rec.OfType(observer.TypeSchemaRearmApplied) {
			a := e.Payload.(observer.SchemaRearmApplied)
			if e.Side != observer.SidePeer || a.NamespaceID != ns.String() || a.SemanticFingerprint != hubSchema.Fingerprint ||
				a.UpdatedAt != observer.Some(updatedAt) {
				t.Fatalf("schema-rearm-applied %+v on %s", a, e.Side)
			}
			id, _ := a.ConnectionID.Get()
			n[id]++
		}
		return n
	}
	testkit.Eventually(t, wait, "one schema-rearm-applied per peer", func() bool { return len(byConn()) == len(c.peers) })
	for _, p := range c.peers {
		as, ok := activeSchema(t, p.reg, peerOwner, ns)
		if !ok || as.Fingerprint != hubSchema.Fingerprint || as.UpdatedAt != updatedAt {
			t.Fatalf("%s active schema %+v %v", p.id, as, ok)
		}
	}
	for conn, n := range byConn() {
		if n != 1 {
			t.Fatalf("%d schema-rearm-applied on connection %s, want 1", n, conn)
		}
	}
	if n := len(c.rec.OfType(observer.TypeSchemaRearmFailed)); n != 0 {
		t.Fatalf("%d schema-rearm-failed", n)
	}
}
