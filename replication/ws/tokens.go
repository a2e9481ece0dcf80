package ws

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
	"github.com/nomicore/nomicore/replication/seam"
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
// hub binary reloads the tokens file); it affects new upgrades only. Revoke reports a
// revocation to the subscribed hub. The zero value has no table: Authenticate returns
// ErrVerifierMissing until Replace is called. Its methods may be called concurrently.
type TokenTable struct {
	entries atomic.Pointer[[]TokenEntry] // replaced whole, never modified in place

	mu   sync.Mutex // guards subs and next
	subs map[int]func(seam.Revocation)
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
func (t *TokenTable) AuthorizeNamespace(peer string, ns protocol.NamespaceID) (seam.Grant, bool) {
	p := t.entries.Load()
	if p == nil {
		return seam.Grant{}, false
	}
	want := ns.String()
	for _, e := range *p {
		if e.PeerInstanceID != peer || !(e.Read || e.Submit) {
			continue
		}
		if slices.Contains(e.Namespaces, "*") || slices.Contains(e.Namespaces, want) {
			return seam.Grant{Owner: e.Owner, Read: e.Read, Submit: e.Submit}, true
		}
	}
	return seam.Grant{}, false
}

// SubscribeRevocations implements RevocationSource.
func (t *TokenTable) SubscribeRevocations(f func(seam.Revocation)) func() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.subs == nil {
		t.subs = make(map[int]func(seam.Revocation))
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
func (t *TokenTable) Revoke(r seam.Revocation) {
	t.mu.Lock()
	subs := make([]func(seam.Revocation), 0, len(t.subs))
	for _, f := range t.subs {
		subs = append(subs, f)
	}
	t.mu.Unlock()
	for _, f := range subs {
		f(r)
	}
}
