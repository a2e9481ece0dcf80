package yws

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/clock"
)

func TestTokenBucket(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	b := newTokenBucket(10, 1, t0) // 10 per second, 50 held
	for i := range 50 {
		if !b.take(1, t0) {
			t.Fatalf("take %d of a full bucket of 50 refused", i+1)
		}
	}
	if b.take(1, t0) {
		t.Fatal("an empty bucket gave a token")
	}
	if !b.take(5, t0.Add(500*time.Millisecond)) || b.take(1, t0.Add(500*time.Millisecond)) {
		t.Fatal("half a second at 10 per second should refill exactly 5")
	}
	if !b.take(50, t0.Add(time.Hour)) || b.take(1, t0.Add(time.Hour)) {
		t.Fatal("a bucket refills up to what it holds, no more")
	}
	if b.take(1, t0) { // a clock going back refills nothing
		t.Fatal("a clock going back gave a token")
	}
	big := newTokenBucket(10, 1000, t0) // at least one message of 1,000
	if !big.take(1000, t0) || big.take(1, t0) {
		t.Fatal("a bucket holds at least its largest message")
	}
	if big.take(1000, t0.Add(10*time.Second)) {
		t.Fatal("a cost over what the bucket has is refused")
	}
}

// closeReason returns the status and reason the node closed c with.
func closeReason(c *client) (websocket.StatusCode, string) {
	c.t.Helper()
	code := c.waitClosed()
	var ce websocket.CloseError
	if !errors.As(c.closed(), &ce) {
		return code, ""
	}
	return code, ce.Reason
}

// waitGreeted waits for the node's SyncStep1: the connection is past the limit on
// connections (which is checked first).
func waitGreeted(c *client) {
	c.t.Helper()
	c.waitFor("the node's SyncStep1", func() bool {
		return c.count(func(m Message) bool { return m.Type == TypeSync && m.Sync == SyncStep1 }) > 0
	})
}

// A user's connections beyond ConnectionsPerUser are closed with 1008 as they open; other
// users are not affected, and a place freed is taken again.
func TestLimits_ConnectionsPerUser(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Limits.ConnectionsPerUser = 2 })
	e.tokens.set("writer-2", auth.ClientGrant{Name: "writer", Namespaces: []string{"*"}}) // the same user, another token
	a := e.dial("writer")
	b := e.dial("writer-2")
	waitGreeted(a)
	waitGreeted(b)
	over := e.dial("writer")
	code, reason := closeReason(over)
	if code != websocket.StatusPolicyViolation || !strings.Contains(reason, "at most 2 per user") {
		t.Fatalf("the third connection of a user: %d %q, want 1008 and the limit", code, reason)
	}
	if over.count(func(m Message) bool { return m.Type == TypeSync }) != 0 {
		t.Fatal("the connection over the limit was served")
	}
	other := e.dial("reader")
	other.sync()
	waitMetric(t, e, "nomicore_client_limit_closes_total", 1, "limit", "connections-per-user")
	waitMetric(t, e, "nomicore_client_disconnects_total", 1, "reason", "over-limit")

	a.ws.Close(websocket.StatusNormalClosure, "")
	waitMetric(t, e, "nomicore_client_connections", 2)
	again := e.dial("writer")
	again.sync()
	if a.closed() == nil || b.closed() != nil || again.closed() != nil {
		t.Fatalf("connections: %v, %v, %v", a.closed(), b.closed(), again.closed())
	}
}

// Without authentication every editor is the same anonymous user: the limit on
// connections per user does not apply (MaxClients does).
func TestLimits_ConnectionsPerUserWithoutAuth(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Clients = nil; o.Limits.ConnectionsPerUser = 1 })
	a := e.dial("")
	b := e.dial("")
	a.sync()
	b.sync()
}

// A connection that sends more messages than its rate allows (beyond the burst) is
// closed with 1008; within the rate it is served.
func TestLimits_MessagesPerSecond(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	e := newEnv(t, func(o *Options) { o.Clock = clk; o.Limits.MessagesPerSecond = 2 }) // holds 10
	c := e.dial("writer")
	waitGreeted(c)
	answers := func() int { return c.count(func(m Message) bool { return m.Type == TypeAwareness }) }
	query := func(n int) {
		for range n {
			c.write([]byte{TypeQueryAwareness})
		}
	}
	query(9) // and its SyncStep2, which the helper sends when it hears the node's SyncStep1
	c.waitFor("9 answers", func() bool { return answers() == 9 })
	clk.Advance(time.Second) // 2 more
	query(2)
	c.waitFor("11 answers", func() bool { return answers() == 11 })
	query(1)
	code, reason := closeReason(c)
	if code != websocket.StatusPolicyViolation || !strings.Contains(reason, "over 2 per second") {
		t.Fatalf("over the message rate: %d %q", code, reason)
	}
	waitMetric(t, e, "nomicore_client_limit_closes_total", 1, "limit", "messages-per-second")
	e.dial("writer").sync() // the node still serves
}

// Bytes: the bucket holds at least one message of MaxMessageBytes, so the largest message
// passes on a rested connection; more than the rate allows closes with 1008.
func TestLimits_BytesPerSecond(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	e := newEnv(t, func(o *Options) { o.Clock = clk; o.MaxMessageBytes = 64 << 10; o.Limits.BytesPerSecond = 1000 })
	c := e.dial("writer")
	c.sync()
	c.insert(0, strings.Repeat("x", 60<<10)) // within the 64 KiB the bucket holds
	late := e.dial("writer")
	late.sync()
	late.waitText(strings.Repeat("x", 60<<10))
	c.insert(0, strings.Repeat("y", 5000))
	code, reason := closeReason(c)
	if code != websocket.StatusPolicyViolation || !strings.Contains(reason, "over 1000 per second") {
		t.Fatalf("over the byte rate: %d %q", code, reason)
	}
	waitMetric(t, e, "nomicore_client_limit_closes_total", 1, "limit", "bytes-per-second")
	if strings.Contains(e.docText(), "y") {
		t.Fatal("the message over the byte rate was applied")
	}
}

// Awareness: more updates than the awareness rate allows, or a state over
// MaxAwarenessStateBytes, close with 1008; nothing of the message is relayed.
func TestLimits_Awareness(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	e := newEnv(t, func(o *Options) {
		o.Clock = clk
		o.Limits.AwarenessUpdatesPerSecond = 1
		o.MaxAwarenessStateBytes = 100
	}) // holds 5
	watcher := e.dial("reader")
	watcher.sync()
	flood := e.dial("writer")
	waitGreeted(flood)
	for i := range 6 {
		flood.write(AppendAwareness(nil, AppendAwarenessUpdate(nil, []AwarenessEntry{{ClientID: 7, Clock: uint64(i + 1), State: []byte(`{}`)}})))
		clk.Advance(awarenessRelayInterval) // each relayed at once
	}
	code, reason := closeReason(flood)
	if code != websocket.StatusPolicyViolation || !strings.Contains(reason, "awareness updates: over 1 per second") {
		t.Fatalf("over the awareness rate: %d %q", code, reason)
	}
	// The removal of the closed connection's state: the clock of its fifth update + 1.
	watcher.waitFor("the removal", func() bool {
		clk.Advance(awarenessRelayInterval) // a relay that waits
		return hasAwareness(watcher, 7, 6, "null")
	})
	if hasAwareness(watcher, 7, 6, "{}") {
		t.Fatal("the update over the rate was relayed")
	}

	big := e.dial("writer")
	waitGreeted(big)
	big.write(AppendAwareness(nil, AppendAwarenessUpdate(nil, []AwarenessEntry{
		{ClientID: 8, Clock: 1, State: []byte(`{}`)},
		{ClientID: 9, Clock: 1, State: []byte(`{"name":"` + strings.Repeat("x", 100) + `"}`)},
	})))
	code, reason = closeReason(big)
	if code != websocket.StatusPolicyViolation || !strings.Contains(reason, "awareness state too large: over 100 bytes") {
		t.Fatalf("a state over the bound: %d %q", code, reason)
	}
	if hasAwareness(watcher, 8, 1, "{}") {
		t.Fatal("a message with a state over the bound was applied in part")
	}
	waitMetric(t, e, "nomicore_client_limit_closes_total", 1, "limit", "awareness-updates-per-second")
	waitMetric(t, e, "nomicore_client_limit_closes_total", 1, "limit", "awareness-state-bytes")
	waitMetric(t, e, "nomicore_client_awareness_states", 0)
}
