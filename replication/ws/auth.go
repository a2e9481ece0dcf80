package ws

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/nomicore/nomicore/replication/protocol"
)

// Authenticator is the hub's authentication and authorization adapter (§2, §19). The hub
// calls Authenticate before the WebSocket upgrade; the namespace layer calls
// AuthorizeNamespace at each OPEN_NAMESPACE.
type Authenticator interface {
	// Authenticate verifies a bearer token and returns the trusted peer instance id. It
	// returns ErrUnauthenticated for a missing or unknown token (HTTP 401), ErrForbidden for
	// a known token that may not connect (HTTP 403), ErrVerifierMissing when it has nothing
	// to verify against (HTTP 503). It must honour ctx (the hub's authTimeoutMs). It must
	// never log the token.
	Authenticate(ctx context.Context, token string) (Identity, error)
	// AuthorizeNamespace decides whether the authenticated peer may replicate ns (§19:
	// "denied | allowed {localOwner, permissions}").
	AuthorizeNamespace(peer string, ns protocol.NamespaceID) (Grant, bool)
}

// Identity is what a successful authentication yields: the trusted peer instance id (§2).
// The HELLO's self-declared id must equal it.
type Identity struct {
	PeerInstanceID string
}

// Grant is an allowed namespace authorization (§19): the hub's local owner (never on the
// wire) and the peer's permissions.
type Grant struct {
	Owner  string
	Read   bool
	Submit bool
}

// Revocation withdraws authorization from a connected peer (§19, §15.2): for the listed
// namespaces (the namespace layer ends them with a terminal namespace ERROR), or, when
// Namespaces is empty, for the peer as a whole (its connections drain with GOAWAY
// REAUTH_REQUIRED).
type Revocation struct {
	PeerInstanceID string
	Namespaces     []protocol.NamespaceID
}

// RevocationSource is implemented by authenticators that report revocations. The hub
// subscribes once at construction and unsubscribes at Shutdown; f is called from the
// revoking goroutine and must not block.
type RevocationSource interface {
	SubscribeRevocations(f func(Revocation)) (unsubscribe func())
}

// Authentication errors (§2). The hub maps them to HTTP statuses and to the
// auth-upgrade-rejected reasons of §23.1.
var (
	ErrUnauthenticated = errors.New("ws: missing or invalid token")        // 401
	ErrForbidden       = errors.New("ws: token not allowed to replicate")  // 403
	ErrVerifierMissing = errors.New("ws: no token verifier is configured") // 503
)

// TokenEntry is one peer's credentials and authorizations, as the tokens file holds them
// (GUIDE §7): the SHA-256 of its token, never the token.
type TokenEntry struct {
	PeerInstanceID string
	TokenSHA256    [sha256.Size]byte
	Owner          string
	// Namespaces lists the namespaces the peer may replicate; "*" allows all. An entry with
	// no namespace authenticates but is forbidden to connect (HTTP 403).
	Namespaces []string
	Read       bool
	Submit     bool
}

// HashToken returns the SHA-256 of a token, the form TokenEntry stores.
func HashToken(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

// ParseTokenSHA256 decodes the 64 lowercase hex digits of a tokens file entry.
func ParseTokenSHA256(s string) ([sha256.Size]byte, error) {
	var h [sha256.Size]byte
	if len(s) != 2*sha256.Size {
		return h, fmt.Errorf("ws: tokenSha256 must be %d hex digits", 2*sha256.Size)
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("ws: tokenSha256: %w", err)
	}
	return h, nil
}

// TokenTable is an in-memory Authenticator over token hashes. Lookups compare the hash of
// the presented token with every entry's hash in constant time (crypto/subtle), so neither a
// match nor its position leaks through timing. Replace swaps the whole table atomically (the
// hub binary reloads the tokens file); it affects new upgrades only (§15.2). Revoke reports a
// revocation to the subscribed hub. The zero value has no table: Authenticate returns
// ErrVerifierMissing until Replace is called.
type TokenTable struct {
	entries atomic.Pointer[[]TokenEntry]

	mu   sync.Mutex
	subs map[int]func(Revocation)
	next int
}

// NewTokenTable returns a table holding entries.
func NewTokenTable(entries []TokenEntry) (*TokenTable, error) {
	t := &TokenTable{}
	if err := t.Replace(entries); err != nil {
		return nil, err
	}
	return t, nil
}

// Replace validates entries and installs them atomically.
func (t *TokenTable) Replace(entries []TokenEntry) error {
	for i, e := range entries {
		if !protocol.ValidInstanceID(e.PeerInstanceID) {
			return fmt.Errorf("ws: token entry %d: peer instance id is not ^[a-z][a-z0-9-]{0,62}$", i)
		}
		for _, ns := range e.Namespaces {
			if ns == "*" {
				continue
			}
			if _, err := protocol.ParseNamespaceID(ns); err != nil {
				return fmt.Errorf("ws: token entry %d: %w", i, err)
			}
		}
	}
	cp := slices.Clone(entries)
	t.entries.Store(&cp)
	return nil
}

// Authenticate implements Authenticator.
func (t *TokenTable) Authenticate(ctx context.Context, token string) (Identity, error) {
	p := t.entries.Load()
	if p == nil {
		return Identity{}, ErrVerifierMissing
	}
	if token == "" {
		return Identity{}, ErrUnauthenticated
	}
	if err := ctx.Err(); err != nil {
		return Identity{}, err
	}
	h := HashToken(token)
	found := -1
	for i := range *p {
		// Visit every entry: the time taken does not depend on which one matches.
		if subtle.ConstantTimeCompare(h[:], (*p)[i].TokenSHA256[:]) == 1 && found < 0 {
			found = i
		}
	}
	if found < 0 {
		return Identity{}, ErrUnauthenticated
	}
	e := (*p)[found]
	if len(e.Namespaces) == 0 || !(e.Read || e.Submit) {
		return Identity{}, ErrForbidden
	}
	return Identity{PeerInstanceID: e.PeerInstanceID}, nil
}

// AuthorizeNamespace implements Authenticator: the first entry of peer that lists ns or "*".
func (t *TokenTable) AuthorizeNamespace(peer string, ns protocol.NamespaceID) (Grant, bool) {
	p := t.entries.Load()
	if p == nil {
		return Grant{}, false
	}
	want := ns.String()
	for _, e := range *p {
		if e.PeerInstanceID != peer || !(e.Read || e.Submit) {
			continue
		}
		if slices.Contains(e.Namespaces, "*") || slices.Contains(e.Namespaces, want) {
			return Grant{Owner: e.Owner, Read: e.Read, Submit: e.Submit}, true
		}
	}
	return Grant{}, false
}

// SubscribeRevocations implements RevocationSource.
func (t *TokenTable) SubscribeRevocations(f func(Revocation)) func() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.subs == nil {
		t.subs = make(map[int]func(Revocation))
	}
	id := t.next
	t.next++
	t.subs[id] = f
	return func() {
		t.mu.Lock()
		delete(t.subs, id)
		t.mu.Unlock()
	}
}

// Revoke reports r to the subscribers (the hub), which close the affected namespaces or
// connections. Call it after Replace has removed the authorization, so a reconnect does not
// regain it.
func (t *TokenTable) Revoke(r Revocation) {
	t.mu.Lock()
	subs := make([]func(Revocation), 0, len(t.subs))
	for _, f := range t.subs {
		subs = append(subs, f)
	}
	t.mu.Unlock()
	for _, f := range subs {
		f(r)
	}
}
