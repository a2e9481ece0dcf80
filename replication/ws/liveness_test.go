package ws_test

import (
	"testing"
	"time"

	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
	"github.com/nomicore/nomicore/replication/ws/wstest"
)

// pingOnce advances to the next ping and returns its payload, with the pong timer armed.
func pingOnce(t *testing.T, f *hubFixture, p *rawPeer, n int) []byte {
	t.Helper()
	if !f.clk.WaitForTimers(1, wait) { // the ping timer is armed just after HELLO_ACK
		t.Fatal("no ping timer")
	}
	f.clk.Advance(f.cfg.PingInterval)
	testkit.Eventually(t, wait, "ping", func() bool { return len(p.end.Pings()) == n })
	return p.end.Pings()[n-1]
}

// TestS17_PongEchoClearsTimeout: only a pong echoing the outstanding ping payload clears the
// timeout; the connection then lives through any number of rounds.
func TestS17_PongEchoClearsTimeout(t *testing.T) {
	f := newHubFixture(t, wstest.SmallConfig(t), nil)
	p := f.connect(64)
	p.end.SetAutoPong(false)
	h := f.handshake(p)
	for round := 1; round <= 3; round++ {
		payload := pingOnce(t, f, p, round)
		if len(payload) != 8 {
			t.Fatalf("fake ping payload %x", payload)
		}
		p.end.Pong(payload)
		h.do(t, func(seam.Session) {})                                                           // the pong result reached the owner
		testkit.Eventually(t, wait, "pong settled", func() bool { return f.clk.Pending() == 1 }) // only the next ping timer
	}
	if _, ok := h.closeInfo(); ok {
		t.Fatal("closed although every ping was answered")
	}
}

// TestS17_IgnoredPongs: empty, wrong, duplicate-of-an-old and unsolicited pongs do not clear
// the timeout; the pong timeout closes with 1001 after invalidating the epoch
// (docs/protocol.md#timeouts).
func TestS17_IgnoredPongs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pongs func(cur, old []byte) [][]byte
	}{
		{"none", func(cur, old []byte) [][]byte { return nil }},
		{"empty", func(cur, old []byte) [][]byte { return [][]byte{{}} }},
		{"wrong payload", func(cur, old []byte) [][]byte { return [][]byte{{0, 0, 0, 0, 0, 0, 0, 9}} }},
		{"duplicate of the previous ping", func(cur, old []byte) [][]byte { return [][]byte{old, old} }},
		{"truncated echo", func(cur, old []byte) [][]byte { return [][]byte{cur[:7]} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newHubFixture(t, wstest.SmallConfig(t), nil)
			p := f.connect(64)
			p.end.SetAutoPong(false)
			h := f.handshake(p)
			old := pingOnce(t, f, p, 1)
			p.end.Pong(old)
			testkit.Eventually(t, wait, "first pong settled", func() bool { return f.clk.Pending() == 1 })
			cur := pingOnce(t, f, p, 2)
			for _, pong := range tc.pongs(cur, old) {
				p.end.Pong(pong)
			}
			h.do(t, func(seam.Session) {})
			f.clk.Advance(f.cfg.PongTimeout - 1)
			if _, ok := h.closeInfo(); ok {
				t.Fatal("closed before pongTimeoutMs")
			}
			f.clk.Advance(1)
			code, ec := p.expectClose()
			if code != protocol.CloseGoingAway || ec != "" {
				t.Fatalf("close %d %q, want 1001 without ERROR", code, ec)
			}
			testkit.Eventually(t, wait, "closed", func() bool { _, ok := h.closeInfo(); return ok })
			info, _ := h.closeInfo()
			if info.Cause != seam.CausePongTimeout || info.Error != protocol.CodePongTimeout {
				t.Fatalf("close info %+v", info)
			}
			// A late pong after the timeout changes nothing.
			p.end.Pong(cur)
			ev := f.rec.OfType(observer.TypeConnectionFailed)
			if len(ev) != 1 || ev[0].Payload.(observer.ConnectionFailed).Code != observer.ConnErrPongTimeout {
				t.Fatalf("connection-failed events %v", ev)
			}
		})
	}
}

// TestS17_EventLoopDelaySampled: each ping timer firing reports actual − planned
// (event-loop-delay-sampled, docs/protocol.md#events). The owner goroutine is held busy while
// the clock moves 250 ms past the due time, as a long synchronous task would.
func TestS17_EventLoopDelaySampled(t *testing.T) {
	f := newHubFixture(t, wstest.SmallConfig(t), nil)
	p := f.connect(64)
	h := f.handshake(p)
	started, release := make(chan struct{}), make(chan struct{})
	h.s.Post(func() { close(started); <-release })
	<-started
	if !f.clk.WaitForTimers(1, wait) {
		t.Fatal("no ping timer")
	}
	f.clk.Advance(f.cfg.PingInterval)
	f.clk.Advance(250 * time.Millisecond)
	close(release)
	testkit.Eventually(t, wait, "sample", func() bool { return f.rec.Count(observer.TypeEventLoopDelaySampled) == 1 })
	e := f.rec.OfType(observer.TypeEventLoopDelaySampled)[0].Payload.(observer.EventLoopDelaySampled)
	if e.DelayMs != 250 || !e.ConnectionID.Present() {
		t.Fatalf("sample %+v, want delayMs 250", e)
	}
}
