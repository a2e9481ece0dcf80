package auth

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nomicore/nomicore/replication/protocol"
)

// FileName is the tokens file inside a node's data directory: DATA/tokens.json.
const FileName = "tokens.json"

// TokenBytes is how many random bytes a token carries (256 bits).
const TokenBytes = 32

// AllNamespaces grants every namespace of the hub.
const AllNamespaces = "*"

// Read loads the peers of the tokens file at path. A file that does not exist is an empty
// table (exists=false): a fresh hub starts with no peers and refuses every upgrade with 401.
// Anything else that stops the file from being read or parsed is an error.
func Read(path string) (entries []PeerEntry, exists bool, err error) {
	f, exists, err := ReadFile(path)
	return f.Peers, exists, err
}

// ReadFile loads the whole tokens file at path (peers and clients); a file that does not
// exist is empty (exists=false).
func ReadFile(path string) (f File, exists bool, err error) {
	data, exists, err := readRaw(path)
	if err != nil {
		return File{}, false, err
	}
	if f, err = parseFile(path, data); err != nil {
		return File{}, true, err
	}
	return f, exists, nil
}

// readRaw reads the tokens file at path; a file that does not exist is no data (exists=false).
func readRaw(path string) (data []byte, exists bool, err error) {
	data, err = os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("tokens file %s: %w", path, err)
	}
	return data, true, nil
}

// parseFile is ParseAll naming the file in its error.
func parseFile(path string, data []byte) (File, error) {
	f, err := ParseAll(data)
	if err != nil {
		return File{}, fmt.Errorf("tokens file %s: %w", path, err)
	}
	return f, nil
}

// Parse decodes and validates a tokens file and returns its peers: the format of ParseFile,
// and the checks of PeerTable.Replace (instance ids, namespace ids), so a file the hub
// would refuse is refused here with the same words.
func Parse(data []byte) ([]PeerEntry, error) {
	f, err := ParseAll(data)
	return f.Peers, err
}

// ParseAll is Parse returning the clients too (names and namespaces checked as well).
func ParseAll(data []byte) (File, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return File{}, nil // an empty file is an empty table
	}
	f, err := ParseFile(data)
	if err != nil {
		return File{}, err
	}
	if _, err := NewPeerTable(f.Peers); err != nil {
		return File{}, err
	}
	if err := checkClients(f.Clients); err != nil {
		return File{}, err
	}
	return f, nil
}

// NewToken draws a token of TokenBytes random bytes from r (crypto/rand when nil), encoded
// base64url without padding (43 characters, safe in a header, a file or an environment
// variable).
func NewToken(r io.Reader) (string, error) {
	if r == nil {
		r = rand.Reader
	}
	var b [TokenBytes]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", fmt.Errorf("drawing a token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// PeerGrant is what a new peer token allows.
type PeerGrant struct {
	PeerInstanceID string
	Owner          string   // the hub's local owner (storage partition) of this peer's namespaces
	Namespaces     []string // namespace ids, or AllNamespaces
	Read, Submit   bool
}

func (g PeerGrant) check() error {
	if !protocol.ValidInstanceID(g.PeerInstanceID) {
		return fmt.Errorf("peer instance id %q does not match ^[a-z][a-z0-9-]{0,62}$", g.PeerInstanceID)
	}
	if g.Owner == "" {
		return errors.New("owner must not be empty")
	}
	if len(g.Namespaces) == 0 {
		return errors.New("at least one namespace (or *) is required")
	}
	for _, ns := range g.Namespaces {
		if ns == AllNamespaces {
			continue
		}
		if _, err := protocol.ParseNamespaceID(ns); err != nil {
			return fmt.Errorf("namespace %q: want ns- and 32 lowercase hex digits, or *", ns)
		}
	}
	if !g.Read && !g.Submit {
		return errors.New("a token must allow read or submit")
	}
	return nil
}

// Add draws a new token for g from r (crypto/rand when nil), appends its hash and grant to
// the tokens file at path (creating it), and returns the token — the only time it exists
// outside the peer that will present it. When the peer already has a token, nothing is
// written and the error is an *ExistingTokenError: a second token would silently leave the
// first one valid. Rotate replaces a token; AddAnother adds a second one on purpose.
func Add(path string, g PeerGrant, r io.Reader) (string, error) {
	return add(path, g, r, false)
}

// AddAnother is Add for a peer that may already have tokens: they stay valid. It is the
// first step of a rotation with overlap (add, install the new token on the peer, remove
// the old one).
func AddAnother(path string, g PeerGrant, r io.Reader) (string, error) {
	return add(path, g, r, true)
}

func add(path string, g PeerGrant, r io.Reader, another bool) (string, error) {
	if err := g.check(); err != nil {
		return "", err
	}
	token, err := NewToken(r)
	if err != nil {
		return "", err
	}
	err = Update(path, func(entries []PeerEntry) ([]PeerEntry, error) {
		if !another {
			if have := hashPrefixes(entries, g.PeerInstanceID, ""); len(have) > 0 {
				return nil, &ExistingTokenError{PeerInstanceID: g.PeerInstanceID, HashPrefixes: have}
			}
		}
		return append(entries, PeerEntry{PeerInstanceID: g.PeerInstanceID, TokenSHA256: HashToken(token),
			Owner: g.Owner, Namespaces: g.Namespaces, Read: g.Read, Submit: g.Submit}), nil
	})
	if err != nil {
		return "", err
	}
	return token, nil
}

// HashPrefixLen is how many hex digits of a token's SHA-256 identify it to an operator
// (`hub token list`, --sha256 PREFIX).
const HashPrefixLen = 12

// HashPrefix returns the short form of a token hash an operator sees and types.
func HashPrefix(sum [sha256.Size]byte) string { return hex.EncodeToString(sum[:])[:HashPrefixLen] }

// hashPrefixes lists the short hashes of the tokens of peer whose SHA-256 starts with
// prefix (every token of peer when prefix is empty).
func hashPrefixes(entries []PeerEntry, peer, prefix string) []string {
	var out []string
	for _, e := range entries {
		if e.PeerInstanceID == peer && strings.HasPrefix(hex.EncodeToString(e.TokenSHA256[:]), prefix) {
			out = append(out, HashPrefix(e.TokenSHA256))
		}
	}
	return out
}

// ExistingTokenError is Add's refusal for a peer that already has a token.
type ExistingTokenError struct {
	PeerInstanceID string
	HashPrefixes   []string // the short hashes of its tokens
}

func (e *ExistingTokenError) Error() string {
	return fmt.Sprintf("%s already has a token (sha256:%s…)", e.PeerInstanceID, strings.Join(e.HashPrefixes, "…, sha256:"))
}

// ErrNoToken is Rotate's refusal for a peer without a (matching) token.
var ErrNoToken = errors.New("no such token")

// Rotate replaces the token of peer with a new one in a single write of the tokens file at
// path, keeping its grant (owner, namespaces, permissions), and returns the new token, once.
// The old token stops being valid at the same moment: a running hub revokes the peer's
// connections, and the peer must present the new token to come back.
//
// With hashPrefix, only the peer's tokens whose SHA-256 starts with it are replaced (its
// other tokens stay); without, all of them. The replaced tokens must share one grant (else
// name one with hashPrefix). A peer with no matching token is ErrNoToken.
func Rotate(path, peer, hashPrefix string, r io.Reader) (string, error) {
	hashPrefix = strings.ToLower(hashPrefix)
	token, err := NewToken(r)
	if err != nil {
		return "", err
	}
	err = Update(path, func(entries []PeerEntry) ([]PeerEntry, error) {
		var grant *PeerEntry
		kept := make([]PeerEntry, 0, len(entries))
		for _, e := range entries {
			if e.PeerInstanceID != peer || !strings.HasPrefix(hex.EncodeToString(e.TokenSHA256[:]), hashPrefix) {
				kept = append(kept, e)
				continue
			}
			if grant != nil && !sameGrant(*grant, e) {
				return nil, fmt.Errorf("%s has tokens with different grants (sha256:%s…); name the one to replace with its hash prefix",
					peer, strings.Join(hashPrefixes(entries, peer, hashPrefix), "…, sha256:"))
			}
			grant = &e
		}
		if grant == nil {
			if hashPrefix != "" {
				return nil, fmt.Errorf("%w: %s has no token whose SHA-256 starts with %s", ErrNoToken, peer, hashPrefix)
			}
			return nil, fmt.Errorf("%w: %s has no token", ErrNoToken, peer)
		}
		fresh := *grant
		fresh.TokenSHA256 = HashToken(token)
		return append(kept, fresh), nil
	})
	if err != nil {
		return "", err
	}
	return token, nil
}

// sameGrant reports whether two entries allow the same (their tokens aside).
func sameGrant(a, b PeerEntry) bool {
	return a.Owner == b.Owner && a.Read == b.Read && a.Submit == b.Submit && slices.Equal(a.Namespaces, b.Namespaces)
}

// Remove deletes the entries of peer from the tokens file at path; with hashPrefix, only
// those whose tokenSha256 starts with it (to retire one token of a peer during rotation).
// It returns how many entries it removed.
func Remove(path, peer, hashPrefix string) (int, error) {
	hashPrefix = strings.ToLower(hashPrefix)
	removed := 0
	err := Update(path, func(entries []PeerEntry) ([]PeerEntry, error) {
		kept := entries[:0]
		for _, e := range entries {
			if e.PeerInstanceID == peer && strings.HasPrefix(hex.EncodeToString(e.TokenSHA256[:]), hashPrefix) {
				removed++
				continue
			}
			kept = append(kept, e)
		}
		return kept, nil
	})
	return removed, err
}

// Update rewrites the peers of the tokens file at path with edit's result (its clients
// stay), under the file's advisory lock (two `token` commands never lose each other's
// change) and atomically (the node never reads a half-written file).
func Update(path string, edit func([]PeerEntry) ([]PeerEntry, error)) error {
	return updateFile(path, func(f *File) error {
		peers, err := edit(f.Peers)
		f.Peers = peers
		return err
	})
}

// updateFile rewrites the whole tokens file at path with edit's change, locked and atomic.
func updateFile(path string, edit func(*File) error) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("tokens file directory: %w", err)
	}
	unlock, err := lockFile(path + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	f, _, err := ReadFile(path)
	if err != nil {
		return err
	}
	if err := edit(&f); err != nil {
		return err
	}
	if _, err := NewPeerTable(f.Peers); err != nil {
		return err
	}
	if err := checkClients(f.Clients); err != nil {
		return err
	}
	return WriteAtomic(path, EncodeFile(f), 0o600)
}

// WriteAtomic replaces the file at path with data: a temporary file in the same directory,
// written, synced and renamed over path, then the directory synced.
func WriteAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	name := tmp.Name()
	fail := func(err error) error {
		tmp.Close()
		os.Remove(name)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		return fail(err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(name)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(name, path); err != nil {
		os.Remove(name)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
