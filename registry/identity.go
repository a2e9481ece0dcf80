package registry

import (
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/nomicore/nomicore/lib0"
	"github.com/nomicore/nomicore/yjs"
)

// The document layout (docs/protocol.md#document-layout): the root map `meta` holds the
// replication identity and the schema; only the registry writes it.
const (
	MetaRoot          = "meta"
	MetaReplicationID = "replicationId"
	MetaEpoch         = "replicationEpoch"
	MetaSchema        = "schema"
)

// Identity is the replication identity of a namespace
// (docs/protocol.md#terms-and-invariants): its lineage (32 lowercase hex) and its generation
// (a safe integer ≥ 1).
type Identity struct {
	ReplicationID string
	Epoch         uint64
}

// Valid reports whether id is well formed.
func (id Identity) Valid() bool {
	return ValidReplicationID(id.ReplicationID) && id.Epoch >= 1 && id.Epoch <= lib0.MaxSafeInteger
}

func (id Identity) String() string { return fmt.Sprintf("%s@%d", id.ReplicationID, id.Epoch) }

// compare returns nil when got equals want, else ErrIDMismatch or ErrEpochMismatch.
func (want Identity) compare(got Identity) error {
	switch {
	case got.ReplicationID != want.ReplicationID:
		return ErrIDMismatch.with("", nil)
	case got.Epoch != want.Epoch:
		return ErrEpochMismatch.with("", nil)
	}
	return nil
}

// ValidNamespaceID reports whether s matches ^ns-[0-9a-f]{32}$.
func ValidNamespaceID(s string) bool {
	return len(s) == 35 && s[:3] == "ns-" && isLowerHex(s[3:])
}

// ValidReplicationID reports whether s is 32 lowercase hex.
func ValidReplicationID(s string) bool { return len(s) == 32 && isLowerHex(s) }

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Schema is the `meta.schema` value: when it was last replaced, and its definition.
type Schema struct {
	UpdatedAt  string
	Definition lib0.Object
}

// readIdentity reads the identity from the meta root of doc.
func readIdentity(doc *yjs.Doc) (Identity, error) {
	t, err := doc.Get(MetaRoot, yjs.KindMap)
	if err != nil {
		return Identity{}, fmt.Errorf("meta root: %w", err)
	}
	m := (*yjs.Map)(t)
	var id Identity
	v, _ := m.Get(MetaReplicationID)
	s, ok := v.(string)
	if !ok || !ValidReplicationID(s) {
		return Identity{}, fmt.Errorf("meta.%s is missing or not 32 lowercase hex", MetaReplicationID)
	}
	id.ReplicationID = s
	v, _ = m.Get(MetaEpoch)
	f, ok := v.(float64)
	if !ok || f < 1 || f > lib0.MaxSafeInteger || f != math.Trunc(f) {
		return Identity{}, fmt.Errorf("meta.%s is missing or not a safe integer >= 1", MetaEpoch)
	}
	id.Epoch = uint64(f)
	return id, nil
}

// readSchema reads meta.schema from doc.
func readSchema(doc *yjs.Doc) (Schema, bool) {
	t, err := doc.Get(MetaRoot, yjs.KindMap)
	if err != nil {
		return Schema{}, false
	}
	v, ok := (*yjs.Map)(t).Get(MetaSchema)
	if !ok {
		return Schema{}, false
	}
	obj, ok := v.(lib0.Object)
	if !ok {
		return Schema{}, false
	}
	var s Schema
	for _, f := range obj {
		switch f.Key {
		case "updatedAt":
			s.UpdatedAt, _ = f.Value.(string)
		case "definition":
			s.Definition, _ = f.Value.(lib0.Object)
		}
	}
	return s, true
}

// writeMeta sets keys of the meta root of doc in one transaction with the given origin.
func writeMeta(doc *yjs.Doc, origin any, kv ...any) error {
	t, err := doc.Get(MetaRoot, yjs.KindMap)
	if err != nil {
		return err
	}
	m := (*yjs.Map)(t)
	doc.Transact(origin, func(*yjs.Transaction) {
		for i := 0; i+1 < len(kv) && err == nil; i += 2 {
			err = m.Set(kv[i].(string), kv[i+1])
		}
	})
	return err
}

// lockedReader makes a random source safe for concurrent use.
type lockedReader struct {
	mu sync.Mutex // guards reads of r
	r  io.Reader
}

func (l *lockedReader) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return io.ReadFull(l.r, p)
}

// randomHex returns 32 lowercase hex digits (128 bits) from r.
func randomHex(r io.Reader) (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
