package yws

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/nomicore/nomicore/auth"
)

// Limits bound what one user and one connection may take of a node. The editor endpoint
// faces untrusted clients: a browser holding a valid token may still send anything, as
// fast as it likes. Going over a limit closes the connection with 1008 (policy violation)
// and a reason naming the limit; the provider reconnects with back-off and its resync
// carries whatever change had not been applied, so nothing of the document is lost. Each
// close is counted by limit (nomicore_client_limit_closes_total) and logged.
//
// The defaults sit far above what an editor in normal use sends (see each one), so that
// only a misbehaving client meets them. Zero fields take the defaults.
type Limits struct {
	// ConnectionsPerUser bounds the open connections of one user (see userKey); the
	// connection beyond it is closed as soon as it opens. Not applied without
	// authentication (--client-auth none), where every editor is the same anonymous user.
	ConnectionsPerUser int
	// MessagesPerSecond and BytesPerSecond bound what one connection sends: token buckets
	// refilled at that rate, holding rateBurst's worth (the byte bucket at least one
	// message of MaxMessageBytes), so short bursts above the rate pass.
	MessagesPerSecond, BytesPerSecond int
	// AwarenessUpdatesPerSecond bounds the awareness messages of one connection (a token
	// bucket as above). Options.MaxAwarenessStateBytes bounds the bytes of one state: a
	// larger one closes the connection too.
	AwarenessUpdatesPerSecond int
	// AwarenessStatesPerConnection bounds the awareness states one connection holds in its
	// namespace's table. An entry beyond it is dropped (counted with the other awareness
	// drops), not closed on: a provider announces its own state, but it also repeats the
	// states it hears from its other channels (the tabs of the same browser), so a normal
	// editor may hold a few.
	AwarenessStatesPerConnection int
}

// Defaults of Limits, with why no editor in normal use reaches them.
const (
	// A person has a handful of tabs with a few documents each; browsers themselves cap
	// WebSockets at about 200 per profile. An application that gives one static token to
	// many people makes them one user: it raises the limit, or gives each person a token.
	DefaultConnectionsPerUser = 100
	// A provider sends one message per transaction (a keystroke), one per awareness change
	// (a cursor move, at most the screen's frame rate) and echoes the awareness changes it
	// hears (at most one relay per awarenessRelayInterval): about 100 per second at the
	// busiest.
	DefaultMessagesPerSecond = 500
	// Typing is a few bytes per message; a 4 MiB paste, or the resync of 4 MiB of offline
	// changes, passes within the bucket (10 MiB).
	DefaultBytesPerSecond = 2 << 20
	// Cursor moves at the screen's frame rate (60–144 per second) plus the echoes of other
	// editors' changes (at most 20 per second).
	DefaultAwarenessUpdatesPerSecond = 200
	// A provider's own state, and the states of the other tabs of its browser it repeats.
	DefaultAwarenessStatesPerConnection = 16
)

// rateBurst is how far above its rate a connection may go for a moment: every bucket holds
// this long's worth of its rate.
const rateBurst = 5 * time.Second

func (l *Limits) fill() {
	fillInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	fillInt(&l.ConnectionsPerUser, DefaultConnectionsPerUser)
	fillInt(&l.MessagesPerSecond, DefaultMessagesPerSecond)
	fillInt(&l.BytesPerSecond, DefaultBytesPerSecond)
	fillInt(&l.AwarenessUpdatesPerSecond, DefaultAwarenessUpdatesPerSecond)
	fillInt(&l.AwarenessStatesPerConnection, DefaultAwarenessStatesPerConnection)
}

// The limits' names: the label of nomicore_client_limit_closes_total and the log's.
const (
	limitConnectionsPerUser  = "connections-per-user"
	limitMessagesPerSecond   = "messages-per-second"
	limitBytesPerSecond      = "bytes-per-second"
	limitAwarenessPerSecond  = "awareness-updates-per-second"
	limitAwarenessStateBytes = "awareness-state-bytes"
)

// The bounds of one Hocuspocus socket (HocuspocusOptions), named the same way.
const (
	limitHeldBytes          = "hocuspocus-held-bytes"
	limitHeldMessages       = "hocuspocus-held-messages"
	limitPendingDocuments   = "hocuspocus-pending-documents"
	limitDocumentsPerSocket = "hocuspocus-documents-per-socket"
)

var limitNames = []string{limitConnectionsPerUser, limitMessagesPerSecond, limitBytesPerSecond,
	limitAwarenessPerSecond, limitAwarenessStateBytes,
	limitHeldBytes, limitHeldMessages, limitPendingDocuments, limitDocumentsPerSocket}

// userKey is the user a connection counts against for ConnectionsPerUser: the user the
// grant names (a signed token's sub, the webhook's user), else its name (a static client
// token's).
func userKey(g auth.ClientGrant) string {
	if g.User != "" {
		return g.User // a signed token's sub, the webhook's user
	}
	return g.Name
}

// userConns counts the open connections of each user. Its zero value is ready.
type userConns struct {
	mu sync.Mutex // guards open
	// open holds the users with at least one connection; a user's entry goes with its
	// last connection, so the map is bounded by the open connections (MaxClients).
	open map[string]int
}

// acquire takes one of user's max places, or reports that all are taken.
func (u *userConns) acquire(user string, max int) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.open[user] >= max {
		return false
	}
	if u.open == nil {
		u.open = map[string]int{}
	}
	u.open[user]++
	return true
}

// release gives back a place acquire took.
func (u *userConns) release(user string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.open[user] <= 1 {
		delete(u.open, user)
		return
	}
	u.open[user]--
}

// tokenBucket is one rate limit of a connection: it holds at most burst tokens and gains
// rate of them per second; a message spends its cost, and one that finds fewer tokens
// than its cost is over the limit. It is not safe for concurrent use: the connection's
// reader owns it.
type tokenBucket struct {
	rate, burst, tokens float64
	last                time.Time
}

// newTokenBucket returns a full bucket of rate per second holding rateBurst's worth, and at
// least least.
func newTokenBucket(rate, least int, now time.Time) tokenBucket {
	burst := max(float64(rate)*rateBurst.Seconds(), float64(least))
	return tokenBucket{rate: float64(rate), burst: burst, tokens: burst, last: now}
}

// take spends cost tokens at now, or reports false (spending nothing) when fewer are left.
func (b *tokenBucket) take(cost int, now time.Time) bool {
	if now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
	}
	if b.tokens < float64(cost) {
		return false
	}
	b.tokens -= float64(cost)
	return true
}

// connLimits are the rate limits of one connection, owned by its reader.
type connLimits struct {
	messages, bytes, awareness tokenBucket
}

func newConnLimits(o *Options, now time.Time) connLimits {
	l := &o.Limits
	return connLimits{
		messages:  newTokenBucket(l.MessagesPerSecond, 1, now),
		bytes:     newTokenBucket(l.BytesPerSecond, o.MaxMessageBytes, now),
		awareness: newTokenBucket(l.AwarenessUpdatesPerSecond, 1, now),
	}
}

// holdUserPlace takes one of the connection's user's places, and returns the function that
// gives it back; false (after closing the connection) when the user has none left.
func (c *conn) holdUserPlace() (release func(), ok bool) {
	s := c.srv
	if s.opts.Clients == nil {
		return func() {}, true
	}
	user, max := userKey(c.grant), s.opts.Limits.ConnectionsPerUser
	if !s.users.acquire(user, max) {
		c.overLimit(limitConnectionsPerUser, fmt.Sprintf("too many connections: at most %d per user", max))
		return nil, false
	}
	return func() { s.users.release(user) }, true
}

// admitMessage charges a message of n bytes to the connection's rates; false (after
// closing the connection) when it goes over one.
func (c *conn) admitMessage(n int) bool {
	if limit, reason := c.limits.chargeMessage(&c.srv.opts, n); limit != "" {
		c.overLimit(limit, reason)
		return false
	}
	return true
}

// admitAwareness charges an awareness update to the connection's awareness rate and checks
// the size of its states; false (after closing the connection) when over a limit.
func (c *conn) admitAwareness(entries []AwarenessEntry) bool {
	if limit, reason := c.limits.chargeAwareness(&c.srv.opts, entries); limit != "" {
		c.overLimit(limit, reason)
		return false
	}
	return true
}

// chargeMessage charges a message of n bytes to the rates: the limit it goes over and the
// reason to close with, or "".
func (l *connLimits) chargeMessage(o *Options, n int) (limit, reason string) {
	now := o.Clock.Now()
	switch {
	case !l.messages.take(1, now):
		return limitMessagesPerSecond, fmt.Sprintf("too many messages: over %d per second", o.Limits.MessagesPerSecond)
	case !l.bytes.take(n, now):
		return limitBytesPerSecond, fmt.Sprintf("too many bytes: over %d per second", o.Limits.BytesPerSecond)
	}
	return "", ""
}

// chargeAwareness charges an awareness update to the awareness rate and checks the size of
// its states: the limit it goes over and the reason to close with, or "".
func (l *connLimits) chargeAwareness(o *Options, entries []AwarenessEntry) (limit, reason string) {
	if !l.awareness.take(1, o.Clock.Now()) {
		return limitAwarenessPerSecond, fmt.Sprintf("too many awareness updates: over %d per second", o.Limits.AwarenessUpdatesPerSecond)
	}
	for _, e := range entries {
		if e.State == nil { // over MaxAwarenessStateBytes (DecodeAwareness)
			return limitAwarenessStateBytes, fmt.Sprintf("awareness state too large: over %d bytes", o.MaxAwarenessStateBytes)
		}
	}
	return "", ""
}

// overLimit closes the connection for going over a limit: 1008 with reason (at most 123
// bytes, the close frame's room), counted and logged.
func (c *conn) overLimit(limit, reason string) {
	c.srv.m.limitClosed(limit)
	c.srv.log.Warn("editor over a limit; closed", slog.String("client", c.grant.Name), slog.String("user", userKey(c.grant)),
		slog.String("namespaceId", c.room.ns), slog.String("limit", limit), slog.String("reason", reason))
	c.closeWith(websocket.StatusPolicyViolation, reason, "over-limit")
}
