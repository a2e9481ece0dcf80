package ws_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
	"github.com/nomicore/nomicore/replication/ws"
	"github.com/nomicore/nomicore/replication/ws/wstest"
)

// busy dials the live hub with the peer's own dialer and expects the admission refusal: a
// 503 whose Retry-After the dialer read.
func busy(t *testing.T, l *liveHub) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	tr, err := ws.WebSocketDialer{}.Dial(ctx, l.url, http.Header{"Authorization": {"Bearer secret-a"}})
	if err == nil {
		_ = tr.Close(protocol.CloseNormal, "")
		t.Fatal("upgrade admitted beyond the admission limit")
	}
	var de *ws.DialError
	if !errors.As(err, &de) || de.StatusCode != http.StatusServiceUnavailable || de.RetryAfter != 2*time.Second {
		t.Fatalf("dial error %v (%+v), want 503 with Retry-After 2s", err, de)
	}
}

// TestAdmission_HandshakeLimit: while MaxHandshakes connections are between their upgrade
// and their HELLO_ACK, a new upgrade is refused with 503 and Retry-After (and reported as
// auth-upgrade-rejected hub-busy) before its token is checked; a handshake that completes,
// or a connection that closes during its handshake, gives its place back.
func TestAdmission_HandshakeLimit(t *testing.T) {
	l := newLiveHubWith(t, wstest.SmallConfig(t), nil, func(o *ws.HubOptions) {
		o.MaxHandshakes, o.AdmissionRetryAfter = 2, 1500*time.Millisecond // advertised as 2 s
	})
	a, err := l.dialClient(t, "secret-a")
	must(t, err)
	b, err := l.dialClient(t, "secret-a")
	must(t, err)
	busy(t, l)
	if _, err := l.dialClient(t, "not-a-token"); err == nil || !errors.As(err, new(*ws.DialError)) || err.(*ws.DialError).StatusCode != 503 {
		t.Fatalf("an unknown token while busy: %v, want 503 (admission comes first)", err)
	}
	if n := countRejected(l, observer.AuthHubBusy); n != 2 {
		t.Fatalf("%d hub-busy rejections reported, want 2", n)
	}
	if s := l.hub.Load().Admission(); s.Handshakes != 2 || s.Refused != 2 {
		t.Fatalf("admission %+v", s)
	}
	must(t, a.handshake())
	c, err := l.dialClient(t, "secret-a") // a's place
	must(t, err)
	busy(t, l)
	b.c.CloseNow()
	testkit.Eventually(t, wait, "b's place given back", func() bool { return l.hub.Load().Admission().Handshakes == 1 })
	d, err := l.dialClient(t, "secret-a")
	must(t, err)
	for _, x := range []*client{a, c, d} {
		x.c.CloseNow()
	}
	testkit.Eventually(t, wait, "every place given back", func() bool { return l.hub.Load().Admission().Handshakes == 0 })
}

// TestAdmission_OpenLimit: while MaxOpening OPEN_NAMESPACE requests are with the namespace
// layer across the hub, new upgrades are refused; an answer (OPEN_OK or a namespace ERROR),
// or the close of the connection that had them, lets upgrades in again.
func TestAdmission_OpenLimit(t *testing.T) {
	l := newLiveHubWith(t, wstest.SmallConfig(t), nil, func(o *ws.HubOptions) {
		o.MaxOpening, o.AdmissionRetryAfter = 2, 2*time.Second
	})
	a, err := l.dialClient(t, "secret-a")
	must(t, err)
	must(t, a.handshake())
	h := l.hs.next(t)
	must(t, a.send(&protocol.OpenNamespace{NamespaceID: ns1}))
	must(t, a.send(&protocol.OpenNamespace{NamespaceID: ns2}))
	testkit.Eventually(t, wait, "two OPENs with the namespace layer", func() bool { return len(h.framesOf(protocol.TypeOpenNamespace)) == 2 })
	busy(t, l)
	h.do(t, func(s seam.Session) {
		_, err := s.Send(&protocol.OpenOK{NamespaceID: ns1, Mode: protocol.ModeBootstrap, ReplicationID: "0123456789abcdef0123456789abcdef", ReplicationEpoch: 1})
		must(t, err)
	})
	b, err := l.dialClient(t, "secret-a")
	must(t, err)
	must(t, b.handshake())
	h2 := l.hs.next(t)
	must(t, b.send(&protocol.OpenNamespace{NamespaceID: ns3}))
	testkit.Eventually(t, wait, "the third OPEN with the namespace layer", func() bool { return len(h2.framesOf(protocol.TypeOpenNamespace)) == 1 })
	busy(t, l)
	a.c.CloseNow() // with ns2's OPEN unanswered
	testkit.Eventually(t, wait, "a's OPEN given back", func() bool { return l.hub.Load().Admission().Opening == 1 })
	c, err := l.dialClient(t, "secret-a")
	must(t, err)
	b.c.CloseNow()
	c.c.CloseNow()
	testkit.Eventually(t, wait, "nothing in admission", func() bool { s := l.hub.Load().Admission(); return s.Opening == 0 && s.Handshakes == 0 })
}

// TestAdmission_RetryAfterHeader: the peer reads Retry-After in seconds, ignores what it
// cannot read, and bounds it.
func TestAdmission_RetryAfterHeader(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 0, "3": 3 * time.Second, " 1 ": time.Second, "0": 0, "-2": 0,
		"Wed, 21 Oct 2015 07:28:00 GMT": 0, "1.5": 0, "999999999999": time.Hour} {
		h := http.Header{}
		if v != "" {
			h.Set("Retry-After", v)
		}
		if got := ws.RetryAfter(h); got != want {
			t.Errorf("Retry-After %q: %v, want %v", v, got, want)
		}
	}
}

func countRejected(l *liveHub, r observer.AuthRejectReason) int {
	n := 0
	for _, e := range l.rec.OfType(observer.TypeAuthUpgradeRejected) {
		if e.Payload.(observer.AuthUpgradeRejected).Reason == r {
			n++
		}
	}
	return n
}
