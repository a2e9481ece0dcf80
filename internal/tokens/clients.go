package tokens

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"strings"

	"encoding/hex"

	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/yws"
)

// ClientEntry is an editor's client token in the tokens file: only its SHA-256, the name
// logs show, the namespaces it may open (ids or "*") and whether it may change them.
type ClientEntry struct {
	Name        string
	TokenSHA256 [sha256.Size]byte
	Namespaces  []string
	ReadOnly    bool
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

// clientTable answers yws.Clients over a list of client entries. A lookup compares the
// presented hash with every entry in constant time, like the peers' table.
type clientTable []ClientEntry

func (t clientTable) lookup(sum [sha256.Size]byte) (yws.Grant, bool) {
	var found *ClientEntry
	for i := range t {
		if subtle.ConstantTimeCompare(t[i].TokenSHA256[:], sum[:]) == 1 && found == nil {
			found = &t[i]
		}
	}
	if found == nil {
		return yws.Grant{}, false
	}
	return yws.Grant{Name: found.Name, Namespaces: append([]string(nil), found.Namespaces...), ReadOnly: found.ReadOnly}, true
}

// ClientGrant is what a new client token allows.
type ClientGrant struct {
	Name       string
	Namespaces []string // namespace ids, or AllNamespaces
	ReadOnly   bool
}

// AddClient draws a new client token for g from r (crypto/rand when nil), appends its hash
// and grant to the tokens file at path (creating it), and returns the token — the only
// time it exists outside the editor that will present it. A name has one token: a name
// that already has one is refused (like a peer's, so that running the command twice does
// not leave two valid tokens behind).
func AddClient(path string, g ClientGrant, r io.Reader) (string, error) {
	entry := ClientEntry{Name: g.Name, Namespaces: g.Namespaces, ReadOnly: g.ReadOnly}
	if err := checkClients([]ClientEntry{entry}); err != nil {
		return "", errors.New(strings.TrimPrefix(err.Error(), "client entry 0 ("+g.Name+"): "))
	}
	token, err := NewToken(r)
	if err != nil {
		return "", err
	}
	entry.TokenSHA256 = sha256.Sum256([]byte(token))
	err = updateFile(path, func(f *File) error {
		for _, c := range f.Clients {
			if c.Name == g.Name {
				return &ExistingClientError{Name: g.Name, HashPrefix: HashPrefix(c.TokenSHA256)}
			}
		}
		f.Clients = append(f.Clients, entry)
		return nil
	})
	if err != nil {
		return "", err
	}
	return token, nil
}

// ExistingClientError is AddClient's refusal for a name that already has a client token.
type ExistingClientError struct {
	Name       string
	HashPrefix string // the short hash of its token
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
