package namespace_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
)

// TestS6_3_DrainsEndWithoutTheirDeadline: a GOAWAY drain — the hub restarting, and a
// whole-peer revocation (REAUTH_REQUIRED, a rotated token) — ends as soon as both sides'
// namespaces have closed: the CLOSE handshakes cross (each side drains) and complete.
// closeTimeoutMs and the drain deadline are an hour here, so the peer reconnecting at all
// proves that nothing waited for them. After REAUTH_REQUIRED the peer authenticates again at
// once with the token it has (still valid here) and its namespaces go live again.
func TestS6_3_DrainsEndWithoutTheirDeadline(t *testing.T) {
	cfg := clusterConfig(t)
	cfg.CloseTimeout = time.Hour
	must(t, cfg.Validate())
	c := newCluster(t, cfg, 1)
	nss := c.create(2)
	c.waitStates(nss, observer.ChannelLive)
	var mu sync.Mutex // guards states, written on the peer's controller goroutine
	var states []observer.ConnectionState
	c.peers[0].peer.Watch(func(s observer.ConnectionState) { mu.Lock(); states = append(states, s); mu.Unlock() })
	readies := func() int {
		n := 0
		for _, e := range eventsOf[observer.ConnectionStateChanged](c.rec, observer.SidePeer) {
			if e.To == observer.ConnReady {
				n++
			}
		}
		return n
	}
	for _, goAway := range []func(){
		func() { c.hub.Load().hub.GoAway(protocol.GoAwayServerRestarting, time.Hour, 0, false) },
		func() { c.table.Revoke(auth.PeerRevocation{PeerInstanceID: c.peers[0].id}) },
	} {
		before := readies()
		goAway()
		testkit.Eventually(t, wait, "the peer back after the drain", func() bool { return readies() > before })
		c.waitStates(nss, observer.ChannelLive)
		for _, ns := range nss {
			for _, side := range []observer.Side{observer.SideHub, observer.SidePeer} {
				path := channelPath(c.rec, side, ns)
				if i := slices.Index(path, observer.ChannelClosing); i < 0 || i+1 >= len(path) || path[i+1] != observer.ChannelClosed {
					t.Fatalf("%s channel path %v: the close handshake did not complete", side, path)
				}
			}
		}
	}
	// The controller's path through both: draining, then backoff (zero delay after
	// REAUTH_REQUIRED), connecting, handshaking, ready.
	want := []observer.ConnectionState{observer.ConnDraining, observer.ConnBackoff, observer.ConnConnecting, observer.ConnHandshaking, observer.ConnReady}
	mu.Lock()
	got := slices.Clone(states)
	mu.Unlock()
	if len(got) != 2*len(want) || !slices.Equal(got[:5], want) || !slices.Equal(got[5:], want) {
		t.Fatalf("peer states %v, want %v twice", got, want)
	}
	if b := eventsOf[observer.ConnectionBackoffScheduled](c.rec, observer.SidePeer); len(b) != 2 || b[1].DelayMs != 0 {
		t.Fatalf("backoffs %+v, want the second (re-authentication) immediate", b)
	}
}
