package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/replication/protocol"
)

// ClientEntry is an editor's client token in the tokens file: only its SHA-256, the name
// logs show, the namespaces it may open (ids or "*") and whether it may change them.
type ClientEntry struct {
	Name        string
	TokenSHA256 [sha256.Size]byte
	Namespaces  []string
	ReadOnly    bool
	// ExpiresAt is when the token stops being valid (zero: never).
	ExpiresAt time.Time
}

// checkClients validates client entries: names like instance ids, namespace ids or "*".
func checkClients(entries []ClientEntry) error {
	for i, c := range entries {
		if !protocol.ValidInstanceID(c.Name) {
			return fmt.Errorf("client entry %d: name %q does not match ^[a-z][a-z0-9-]{0,62}$", i, c.Name)
		}
		if len(c.Namespaces) == 0 {
			return fmt.Errorf("client entry %d (%s): at least one namespace (or *) is required", i, c.Name)
		}
		for _, ns := range c.Namespaces {
			if ns == AllNamespaces {
				continue
			}
			if _, err := protocol.ParseNamespaceID(ns); err != nil {
				return fmt.Errorf("client entry %d (%s): namespace %q: want ns- and 32 lowercase hex digits, or *", i, c.Name, ns)
			}
		}
	}
	return nil
}

// ClientTable is the ClientAuthenticator of static client tokens: the client entries of a
// tokens file, held in memory. A lookup compares the hash of the presented token with every
// entry's in constant time, like the peers' table. Replace swaps the whole table atomically.
// The zero value is an empty table; its methods may be called concurrently.
type ClientTable struct {
	entries atomic.Pointer[[]ClientEntry] // replaced whole, never modified in place
	clock   clock.Reader                  // for expiry; nil: the real clock (set before use)
}

// UseClock makes the table judge expiry by clk (before the table is used).
func (t *ClientTable) UseClock(clk clock.Reader) { t.clock = clk }

func (t *ClientTable) now() time.Time {
	if t.clock == nil {
		return time.Now()
	}
	return t.clock.Now()
}

// NewClientTable returns a table holding entries.
func NewClientTable(entries []ClientEntry) *ClientTable {
	t := &ClientTable{}
	t.Replace(entries)
	return t
}

// Replace installs entries (checked by the tokens file's parser, not here).
func (t *ClientTable) Replace(entries []ClientEntry) {
	cp := slices.Clone(entries)
	t.entries.Store(&cp)
}

// Len returns how many client tokens the table holds.
func (t *ClientTable) Len() int {
	if p := t.entries.Load(); p != nil {
		return len(*p)
	}
	return 0
}

// AuthenticateClient returns the grant of the entry whose hash is the token's, or
// ErrUnauthenticated.
func (t *ClientTable) AuthenticateClient(_ context.Context, c ClientCredential) (ClientGrant, error) {
	if c.Token == "" {
		return ClientGrant{}, ErrUnauthenticated
	}
	return t.lookup(HashToken(c.Token))
}

// RecheckClient looks the token a grant was found by up again: its entry's grant now, or
// ErrUnauthenticated once the token was removed.
func (t *ClientTable) RecheckClient(g ClientGrant) (ClientGrant, error) {
	return t.lookup(g.tokenSHA256)
}

func (t *ClientTable) lookup(sum [sha256.Size]byte) (ClientGrant, error) {
	p := t.entries.Load()
	if p == nil {
		return ClientGrant{}, ErrUnauthenticated
	}
	var found *ClientEntry
	for i := range *p {
		if subtle.ConstantTimeCompare((*p)[i].TokenSHA256[:], sum[:]) == 1 && found == nil {
			found = &(*p)[i]
		}
	}
	if found == nil {
		return ClientGrant{}, ErrUnauthenticated
	}
	g := ClientGrant{Name: found.Name, Namespaces: append([]string(nil), found.Namespaces...), ReadOnly: found.ReadOnly,
		Kind: CredentialClientToken, Expires: found.ExpiresAt, tokenSHA256: sum}
	if !found.ExpiresAt.IsZero() && !t.now().Before(found.ExpiresAt) {
		return ClientGrant{}, &ClientRefusal{Check: CheckExpired,
			Reason: "the client token of " + found.Name + " expired at " + found.ExpiresAt.UTC().Format(time.RFC3339)}
	}
	return g, nil
}

// AddClient draws a new client token for g (its name, namespaces, read-only flag and
// expiry: g.Expires, zero for never) from r (crypto/rand when nil), appends its hash and
// grant to the tokens file at path (creating it), and returns the token — the only time it
// exists outside the editor that will present it. A name has one token: a name whose token
// is still valid is refused (like a peer's, so that running the command twice does not
// leave two valid tokens behind); one whose token expired gets the new token in its place.
func AddClient(path string, g ClientGrant, r io.Reader) (string, error) {
	entry := ClientEntry{Name: g.Name, Namespaces: g.Namespaces, ReadOnly: g.ReadOnly, ExpiresAt: g.Expires.UTC().Truncate(time.Second)}
	if !g.Expires.IsZero() && !g.Expires.After(time.Now()) {
		return "", errors.New("the expiry is already past")
	}
	if err := checkClients([]ClientEntry{entry}); err != nil {
		return "", errors.New(strings.TrimPrefix(err.Error(), "client entry 0 ("+g.Name+"): "))
	}
	token, err := NewToken(r)
	if err != nil {
		return "", err
	}
	entry.TokenSHA256 = sha256.Sum256([]byte(token))
	now := time.Now()
	err = updateFile(path, func(f *File) error {
		kept := f.Clients[:0]
		for _, c := range f.Clients {
			if c.Name != g.Name {
				kept = append(kept, c)
				continue
			}
			if c.ExpiresAt.IsZero() || now.Before(c.ExpiresAt) {
				return &ExistingClientError{Name: g.Name, HashPrefix: HashPrefix(c.TokenSHA256), ExpiresAt: c.ExpiresAt}
			}
		}
		f.Clients = append(kept, entry)
		return nil
	})
	if err != nil {
		return "", err
	}
	return token, nil
}

// UpdateClient changes the grant of the client token named name in the tokens file at path
// (its namespaces and read-only flag; edit must not change the name or the hash), keeping
// the token: an editor keeps its token when it gets a namespace more. A running node applies
// the change to open connections at its next reload (a narrowed grant closes them). It
// returns the entry as written, or ErrNoToken when the name has no token.
func UpdateClient(path, name string, edit func(*ClientEntry)) (ClientEntry, error) {
	var out ClientEntry
	err := updateFile(path, func(f *File) error {
		for i := range f.Clients {
			if f.Clients[i].Name == name {
				sum := f.Clients[i].TokenSHA256
				edit(&f.Clients[i])
				f.Clients[i].Name, f.Clients[i].TokenSHA256 = name, sum
				out = f.Clients[i]
				return nil
			}
		}
		return fmt.Errorf("%w: no client token is named %s", ErrNoToken, name)
	})
	return out, err
}

// ExistingClientError is AddClient's refusal for a name that already has a client token.
type ExistingClientError struct {
	Name       string
	HashPrefix string    // the short hash of its token
	ExpiresAt  time.Time // when it expires (zero: never)
}

func (e *ExistingClientError) Error() string {
	return fmt.Sprintf("client %s already has a token (sha256:%s…)", e.Name, e.HashPrefix)
}

// RemoveClient deletes the client entries named name from the tokens file at path; with
// hashPrefix, only those whose tokenSha256 starts with it. It returns how many it removed.
func RemoveClient(path, name, hashPrefix string) (int, error) {
	hashPrefix = strings.ToLower(hashPrefix)
	removed := 0
	err := updateFile(path, func(f *File) error {
		kept := f.Clients[:0]
		for _, c := range f.Clients {
			if c.Name == name && strings.HasPrefix(hex.EncodeToString(c.TokenSHA256[:]), hashPrefix) {
				removed++
				continue
			}
			kept = append(kept, c)
		}
		f.Clients = kept
		return nil
	})
	return removed, err
}
