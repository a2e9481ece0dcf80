package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The fault-injection suite, short form (a few seconds per fault; `make chaos` runs the long
// one): a hub, peer-a reaching it through a TCP fault proxy and peer-b directly, one
// namespace, a writer on each process posting a new key every 20 ms. For each fault: every
// write the admin API acknowledged (204) ends up on all three nodes, they converge, every
// state change in their logs is an edge of the contract's state machines
// (docs/protocol.md#peer-connection-states, docs/protocol.md#hub-connection-states), nothing
// goes blocked, failed or conflicted — and each side goes through the states the fault calls
// for.
func TestE2E_Faults(t *testing.T) {
	// Latency and a cap the traffic fits in: the connection stays up (the pong timeout is
	// far above the round trip, even on a slow machine).
	t.Run("latency", func(t *testing.T) {
		f := newFaultEnv(t, "--ping-interval", "5s", "--pong-timeout", "4s")
		f.startWriters()
		t0 := time.Now()
		f.proxy.SetLatency(150 * time.Millisecond)
		time.Sleep(2 * time.Second)
		f.proxy.SetLatency(0)
		f.finish()
		f.noReconnectSince(t0)
	})

	t.Run("bandwidth", func(t *testing.T) {
		// A capped link that drains a large write within the pong timeout stays up.
		f := newFaultEnv(t, "--ping-interval", "5s", "--pong-timeout", "4s")
		f.startWriters()
		t0 := time.Now()
		f.bigWriteOverCappedLink(16<<10, 32<<10)
		f.finish()
		f.noReconnectSince(t0)
	})

	// The same with a large write that takes longer than the pong timeout to cross: the pong
	// waits behind it. A link that is delivering data is not declared dead (the pong timeout
	// is re-armed while bytes move), so the connection stays up and the write arrives — before
	// that rule, the connection was declared dead and the catch-up on the next one was the
	// same large transfer, forever.
	t.Run("bandwidth, large write beyond the pong timeout", func(t *testing.T) {
		f := newFaultEnv(t)
		f.startWriters()
		t0 := time.Now()
		f.bigWriteOverCappedLink(16<<10, 48<<10)
		f.finish()
		f.noReconnectSince(t0)
	})

	// A peer that only receives: nothing comes back from it while a transfer of several
	// seconds crosses a capped link, so the hub can tell the link is alive only by its own
	// data being delivered (acknowledged by the peer's TCP), long after its last write left
	// it for the kernel's buffer. The connection stays up and the transfer completes once.
	t.Run("bandwidth, silent peer, transfer far beyond the pong timeout", func(t *testing.T) {
		f := newFaultEnv(t, "--ping-interval", "2s", "--pong-timeout", "1500ms")
		t0 := time.Now()
		f.bigWriteOverCappedLink(256<<10, 2<<20)
		f.noReconnectSince(t0)
	})

	t.Run("bandwidth, small writes", func(t *testing.T) {
		f := newFaultEnv(t, "--ping-interval", "5s", "--pong-timeout", "4s")
		f.startWriters()
		t0 := time.Now()
		f.proxy.SetBandwidth(16 << 10)
		time.Sleep(2 * time.Second)
		f.proxy.SetBandwidth(0)
		f.finish()
		f.noReconnectSince(t0)
	})

	t.Run("cut", func(t *testing.T) {
		f := newFaultEnv(t)
		f.startWriters()
		time.Sleep(300 * time.Millisecond)
		t0 := time.Now()
		if n := f.proxy.Cut(); n != 1 {
			t.Fatalf("the proxy cut %d connections; want peer-a's one", n)
		}
		f.waitReconnected(t0)
		time.Sleep(300 * time.Millisecond)
		f.finish()
		f.peerWent(t0, `^ready>backoff backoff>connecting connecting>handshaking handshaking>ready$`, "socket-closed")
		f.hubClosedAndReopened(t0, false)
		f.reconciledNotBootstrapped(t0)
	})

	t.Run("stall", func(t *testing.T) {
		f := newFaultEnv(t)
		f.startWriters()
		time.Sleep(300 * time.Millisecond)
		t0 := time.Now()
		f.proxy.Stall()
		// Longer than a ping interval and its pong timeout, and than a handshake's timeout:
		// the old connection is found dead, and a new one made meanwhile stalls too.
		time.Sleep(5 * time.Second)
		f.proxy.Resume()
		f.waitReconnected(t0)
		time.Sleep(300 * time.Millisecond)
		f.finish()
		f.peerWent(t0, `^ready>backoff( backoff>connecting connecting>(backoff|handshaking handshaking>backoff))* backoff>connecting connecting>handshaking handshaking>ready$`, "pong-timeout")
		f.hubClosedAndReopened(t0, true)
		f.reconciledNotBootstrapped(t0)
	})

	t.Run("half-open", func(t *testing.T) {
		f := newFaultEnv(t)
		f.startWriters()
		time.Sleep(300 * time.Millisecond)
		t0 := time.Now()
		if n := f.proxy.HalfOpen(); n != 1 {
			t.Fatalf("the proxy made %d connections half-open; want 1", n)
		}
		f.waitReconnected(t0)
		time.Sleep(300 * time.Millisecond)
		f.finish()
		f.peerWent(t0, `^ready>backoff backoff>connecting connecting>handshaking handshaking>ready$`, "pong-timeout")
		// The hub was never told (the proxy passed no close): it found out by itself.
		f.hubClosedAndReopened(t0, false)
		f.reconciledNotBootstrapped(t0)
	})

	t.Run("flapping", func(t *testing.T) {
		f := newFaultEnv(t)
		f.startWriters()
		t0 := time.Now()
		for range 5 {
			f.proxy.SetDown(true)
			f.proxy.Cut()
			time.Sleep(300 * time.Millisecond)
			f.proxy.SetDown(false)
			time.Sleep(700 * time.Millisecond)
		}
		f.waitReconnected(t0)
		f.finish()
		f.peerWent(t0, `^ready>backoff .* handshaking>ready$`, "socket-closed")
	})

	t.Run("kill -9 hub", func(t *testing.T) {
		f := newFaultEnv(t)
		f.startWriters()
		time.Sleep(500 * time.Millisecond)
		t0 := time.Now()
		f.hub.kill()
		time.Sleep(time.Second)
		f.c.startHub(liveness...)
		targetState(t, f.a, f.ns, "live")
		targetState(t, f.b, f.ns, "live")
		time.Sleep(300 * time.Millisecond)
		f.finish()
		for _, p := range []*proc{f.a, f.b} {
			trs := since(checkPeerConnection(t, p), t0)
			if !regexp.MustCompile(`^ready>backoff( backoff>connecting connecting>(backoff|handshaking handshaking>backoff))* backoff>connecting connecting>handshaking handshaking>ready$`).MatchString(seq(trs)) {
				t.Errorf("%s went %s after the hub's kill", p.name, seq(trs))
			}
		}
		if r := backoffReasons(t, f.a, t0); len(r) == 0 || r[0] != "socket-closed" {
			t.Errorf("peer-a's backoffs after the hub's kill: %v; want socket-closed first", r)
		}
	})

	t.Run("kill -9 peer", func(t *testing.T) {
		f := newFaultEnv(t)
		f.startWriters()
		time.Sleep(500 * time.Millisecond)
		t0 := time.Now()
		f.a.kill()
		time.Sleep(time.Second)
		f.c.startPeer("peer-a", f.tokA, append([]string{"--hub-url", "ws://" + f.proxy.Addr() + "/v1/replication"}, liveness...)...)
		targetState(t, f.a, f.ns, "live")
		time.Sleep(300 * time.Millisecond)
		f.finish()
		// The restarted peer: a fresh start to ready, its replica reconciled (no bootstrap).
		if got := seq(since(checkPeerConnection(t, f.a), t0)); got != "stopped>disconnected disconnected>connecting connecting>handshaking handshaking>ready" {
			t.Errorf("peer-a after its restart went %s", got)
		}
		f.hubClosedAndReopened(t0, false)
		f.reconciledNotBootstrapped(t0)
	})
}

// bigWriteOverCappedLink caps the link to peer-a at rate bytes per second, writes a value
// of size bytes on the hub, waits until peer-a has it, and lifts the cap. The transfer must
// have taken at least what the cap allows.
func (f *faultEnv) bigWriteOverCappedLink(rate int64, size int) {
	f.t.Helper()
	t0 := time.Now()
	f.proxy.SetBandwidth(rate)
	defer f.proxy.SetBandwidth(0)
	big := strings.Repeat("x", size)
	f.hub.api().set(f.ns, map[string]any{"big": big})
	eventually(f.t, 60*time.Second, "the large value at peer-a", func() error {
		if n, _ := f.a.api().notes(f.ns); n["big"] != big {
			return fmt.Errorf("not yet; peer-a went %s", seq(since(transitions(f.t, f.a, "connection-state-changed", ""), t0)))
		}
		return nil
	})
	if took, least := time.Since(t0), time.Duration(float64(int64(size)-rate/20)/float64(rate)*float64(time.Second)); took < least {
		f.t.Fatalf("%d bytes crossed a %d B/s link in %v; the cap was not applied (at least %v)", size, rate, took, least)
	}
}

// noReconnectSince checks that peer-a's connection, and the hub's end of it, stayed up.
func (f *faultEnv) noReconnectSince(t0 time.Time) {
	f.t.Helper()
	if trs := since(checkPeerConnection(f.t, f.a), t0); len(trs) > 0 {
		f.t.Errorf("peer-a's connection changed state during the fault: %s (reasons %v)", seq(trs), backoffReasons(f.t, f.a, t0))
	}
	for id, trs := range checkHubConnections(f.t, f.hub) {
		if late := since(trs, t0); len(late) > 0 {
			f.t.Errorf("hub connection %s changed state during the fault: %s", id, seq(late))
		}
	}
	if s := f.proxy.Stats(); s.BytesUp == 0 || s.BytesDown == 0 {
		f.t.Errorf("nothing went through the proxy: %+v", s)
	}
}

// waitReconnected waits until peer-a connected again after t0 and its namespace is live.
func (f *faultEnv) waitReconnected(t0 time.Time) {
	f.t.Helper()
	eventually(f.t, 30*time.Second, "peer-a connected again", func() error {
		trs := since(transitions(f.t, f.a, "connection-state-changed", ""), t0)
		if len(trs) == 0 || trs[len(trs)-1].to != "ready" {
			return fmt.Errorf("peer-a went %s", seq(trs))
		}
		return nil
	})
	targetState(f.t, f.a, f.ns, "live")
}

// peerWent checks peer-a's connection changes since t0 against a pattern, and the reason
// of its first backoff.
func (f *faultEnv) peerWent(t0 time.Time, pattern, firstReason string) {
	f.t.Helper()
	trs := since(checkPeerConnection(f.t, f.a), t0)
	if !regexp.MustCompile(pattern).MatchString(seq(trs)) {
		f.t.Errorf("peer-a went %s; want %s", seq(trs), pattern)
	}
	if r := backoffReasons(f.t, f.a, t0); len(r) == 0 || r[0] != firstReason {
		f.t.Errorf("peer-a's backoff reasons: %v; want %s first", r, firstReason)
	}
}

// hubClosedAndReopened checks the hub's side: peer-a's connection of before t0 closed after
// t0, and exactly one new connection is ready; peer-b's connection untouched. Connections
// closed during their handshake (made while the link was stalled) are allowed when
// abandoned is true.
func (f *faultEnv) hubClosedAndReopened(t0 time.Time, abandoned bool) {
	f.t.Helper()
	conns := checkHubConnections(f.t, f.hub)
	closed, opened, touched := 0, 0, 0
	for _, trs := range conns {
		before, after := len(trs)-len(since(trs, t0)), since(trs, t0)
		if len(after) == 0 {
			continue
		}
		touched++
		switch {
		case before > 0 && trs[before-1].to == "ready" && after[len(after)-1].to == "closed":
			closed++
		case before == 0 && after[len(after)-1].to == "ready":
			opened++
		case abandoned && seq(after) == "handshaking>closed":
			touched--
		}
	}
	if closed != 1 || opened != 1 || touched != 2 {
		var parts []string
		for id, trs := range conns {
			parts = append(parts, id+": "+seq(trs))
		}
		f.t.Errorf("the hub's connections after the fault: %d closed, %d opened, %d changed; want peer-a's old one closed and one new one ready, peer-b's untouched\n%s",
			closed, opened, touched, strings.Join(parts, "\n"))
	}
}

// reconciledNotBootstrapped checks that peer-a's namespace came back live after t0 by a
// state-vector exchange, keeping its replica.
func (f *faultEnv) reconciledNotBootstrapped(t0 time.Time) {
	f.t.Helper()
	trs := since(checkChannel(f.t, f.a, f.ns), t0)
	s := seq(trs)
	if !strings.Contains(s, "opening>reconciling") || strings.Contains(s, "bootstrapping") || !strings.HasSuffix(s, "reconciling>live") {
		f.t.Errorf("peer-a's namespace after the fault went %s; want a reconciliation back to live, no bootstrap", s)
	}
}
