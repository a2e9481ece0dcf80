package namespace_test

import (
	"testing"

	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/ws/wstest"
)

// TestS15_1_PeerWorkingOnceTargetsLive: the peer's namespace layer reports a connection as
// working (seam.Session.Working) once every target it took up is live or has ended, with
// at least one live; the connection controller then restarts its backoff. A connection
// whose targets never got live does not, so its loss keeps counting attempts.
func TestS15_1_PeerWorkingOnceTargetsLive(t *testing.T) {
	f := newNSPeer(t, nsConfig(t))
	live, liveID, liveSnap := f.create()
	gone, _, _ := f.create()
	f.target(live)
	f.target(gone)
	attempts := func() []int {
		var out []int
		for _, e := range eventsOf[observer.ConnectionBackoffScheduled](f.rec, observer.SidePeer) {
			out = append(out, e.Attempt)
		}
		return out
	}
	dropAndCount := func(w *wire, want int) {
		t.Helper()
		n := len(attempts())
		w.end.(*wstest.End).Drop()
		testkit.Eventually(t, wait, "a backoff", func() bool { return len(attempts()) == n+1 })
		if got := attempts()[n]; got != want {
			t.Fatalf("backoff attempt %d, want %d (all: %v)", got, want, attempts())
		}
	}
	// Two connections on which nothing gets live: the attempts add up.
	w := f.connect()
	expect[*protocol.OpenNamespace](w)
	dropAndCount(w, 0)
	w = f.reconnect()
	expect[*protocol.OpenNamespace](w)
	dropAndCount(w, 1)
	// One target live while the other is still opening: not yet working.
	w = f.reconnect()
	opens := map[protocol.NamespaceID]uint32{}
	for range 2 {
		o, seq := expect[*protocol.OpenNamespace](w)
		opens[o.NamespaceID] = seq
	}
	w.send(&protocol.OpenOK{NamespaceID: live, Mode: protocol.ModeBootstrap, ReplicationID: liveID.ReplicationID, ReplicationEpoch: liveID.Epoch})
	w.send(&protocol.BootstrapSnapshot{NamespaceID: live, ReplicationID: liveID.ReplicationID, ReplicationEpoch: liveID.Epoch, Snapshot: liveSnap})
	expect[*protocol.BootstrapAck](w)
	hubDoc := newYDoc(t, 300)
	hubDoc.apply(liveSnap)
	f.hubRound(w, live, hubDoc)
	f.waitState(live, observer.ChannelLive)
	w.quiet()
	dropAndCount(w, 2)
	// Both settled — one live, the other refused for good: working, the backoff restarts.
	w = f.reconnect()
	for range 2 {
		o, seq := expect[*protocol.OpenNamespace](w)
		opens[o.NamespaceID] = seq
	}
	w.send(&protocol.OpenOK{NamespaceID: live, Mode: protocol.ModeReconcile, ReplicationID: liveID.ReplicationID, ReplicationEpoch: liveID.Epoch})
	f.hubRound(w, live, hubDoc)
	m, err := protocol.NewErrorMessage(protocol.ScopeNamespace, protocol.CodeNamespaceNotFound, gone, "gone")
	must(t, err)
	w.send(m.WithRelatedSequence(opens[gone]))
	f.waitState(live, observer.ChannelLive)
	f.waitState(gone, observer.ChannelFailed)
	w.quiet()
	dropAndCount(w, 0)
}
