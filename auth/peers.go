package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/nomicore/nomicore/replication/protocol"
)

// PeerEntry is one peer's credentials and authorizations, as the tokens file holds them:
// the SHA-256 of its token, never the token.
type PeerEntry struct {
	PeerInstanceID string
	TokenSHA256    [sha256.Size]byte
	Owner          string
	// Namespaces lists the namespaces the peer may replicate; "*" allows all. An entry with
	// no namespace authenticates but is forbidden to connect (HTTP 403).
	Namespaces []string
	Read       bool
	Submit     bool
}

// HashToken returns the SHA-256 of a token, the form the tokens file stores.
func HashToken(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

// ParseTokenSHA256 decodes the 64 lowercase hex digits of a tokens file entry.
func ParseTokenSHA256(s string) ([sha256.Size]byte, error) {
	var h [sha256.Size]byte
	if len(s) != 2*sha256.Size {
		return h, fmt.Errorf("auth: tokenSha256 must be %d hex digits", 2*sha256.Size)
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("auth: tokenSha256: %w", err)
	}
	return h, nil
}

// PeerTable authenticates peers over token hashes held in memory: the replication
// listener's Authenticator and RevocationSource (package ws). Lookups compare the hash of
// the presented token with every entry's hash in constant time (crypto/subtle), so neither
// a match nor its position leaks through timing. Replace swaps the whole table atomically
// (the node reloads the tokens file); it affects new upgrades only. Revoke reports a
// revocation to the subscribed hub. The zero value has no table: Authenticate returns
// ErrVerifierMissing until Replace is called. Its methods may be called concurrently.
type PeerTable struct {
	entries atomic.Pointer[[]PeerEntry] // replaced whole, never modified in place

	mu   sync.Mutex // guards subs and next
	subs map[int]func(PeerRevocation)
	next int
}

// NewPeerTable returns a table holding entries.
func NewPeerTable(entries []PeerEntry) (*PeerTable, error) {
	t := &PeerTable{}
	if err := t.Replace(entries); err != nil {
		return nil, err
	}
	return t, nil
}

// Replace validates entries and installs them atomically.
func (t *PeerTable) Replace(entries []PeerEntry) error {
	for i, e := range entries {
		if !protocol.ValidInstanceID(e.PeerInstanceID) {
			return fmt.Errorf("auth: token entry %d: peer instance id is not ^[a-z][a-z0-9-]{0,62}$", i)
		}
		for _, ns := range e.Namespaces {
			if ns == AllNamespaces {
				continue
			}
			if _, err := protocol.ParseNamespaceID(ns); err != nil {
				return fmt.Errorf("auth: token entry %d: %w", i, err)
			}
		}
	}
	cp := slices.Clone(entries)
	t.entries.Store(&cp)
	return nil
}

// Authenticate verifies a peer's bearer token and returns the trusted peer instance id:
// ErrUnauthenticated for a missing or unknown token, ErrForbidden for a known token that
// may not connect (no namespace, neither read nor submit), ErrVerifierMissing before the
// first Replace.
func (t *PeerTable) Authenticate(ctx context.Context, token string) (PeerIdentity, error) {
	p := t.entries.Load()
	if p == nil {
		return PeerIdentity{}, ErrVerifierMissing
	}
	if token == "" {
		return PeerIdentity{}, ErrUnauthenticated
	}
	if err := ctx.Err(); err != nil {
		return PeerIdentity{}, err
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
		return PeerIdentity{}, ErrUnauthenticated
	}
	e := (*p)[found]
	if len(e.Namespaces) == 0 || !(e.Read || e.Submit) {
		return PeerIdentity{}, ErrForbidden
	}
	return PeerIdentity{PeerInstanceID: e.PeerInstanceID}, nil
}

// AuthorizeNamespace decides whether peer may replicate ns: the first entry of peer that
// lists ns or "*".
func (t *PeerTable) AuthorizeNamespace(peer string, ns protocol.NamespaceID) (NamespaceGrant, bool) {
	p := t.entries.Load()
	if p == nil {
		return NamespaceGrant{}, false
	}
	want := ns.String()
	for _, e := range *p {
		if e.PeerInstanceID != peer || !(e.Read || e.Submit) {
			continue
		}
		if slices.Contains(e.Namespaces, AllNamespaces) || slices.Contains(e.Namespaces, want) {
			return NamespaceGrant{Owner: e.Owner, Read: e.Read, Submit: e.Submit}, true
		}
	}
	return NamespaceGrant{}, false
}

// SubscribeRevocations calls f with every revocation Revoke reports, until the returned
// function is called. f is called from the revoking goroutine and must not block.
func (t *PeerTable) SubscribeRevocations(f func(PeerRevocation)) func() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.subs == nil {
		t.subs = make(map[int]func(PeerRevocation))
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
func (t *PeerTable) Revoke(r PeerRevocation) {
	t.mu.Lock()
	subs := make([]func(PeerRevocation), 0, len(t.subs))
	for _, f := range t.subs {
		subs = append(subs, f)
	}
	t.mu.Unlock()
	for _, f := range subs {
		f(r)
	}
}
