package protocol

import (
	"errors"
	"fmt"
)

// NamespaceID is a namespace key, `^ns-[0-9a-f]{32}$`
// (docs/protocol.md#terms-and-invariants). It is a comparable value (usable as a map key,
// decoded without allocating); the zero value means "no namespace" and is never a valid id.
// Build one with ParseNamespaceID.
type NamespaceID struct {
	text [namespaceIDLen]byte
}

const namespaceIDLen = 35 // "ns-" + 32 lowercase hex

var errNamespaceID = errors.New("namespaceId does not match ^ns-[0-9a-f]{32}$")

// ParseNamespaceID checks s against `^ns-[0-9a-f]{32}$`.
func ParseNamespaceID(s string) (NamespaceID, error) {
	var id NamespaceID
	if !isNamespaceID(s) {
		return id, fmt.Errorf("%w: %q", errNamespaceID, truncateForError(s))
	}
	copy(id.text[:], s)
	return id, nil
}

// MustNamespaceID is ParseNamespaceID for constants in tests and examples; it panics on a bad id.
func MustNamespaceID(s string) NamespaceID {
	id, err := ParseNamespaceID(s)
	if err != nil {
		panic(err)
	}
	return id
}

// namespaceIDFromBytes is ParseNamespaceID for decoded wire bytes, without allocating.
func namespaceIDFromBytes(b []byte) (NamespaceID, bool) {
	var id NamespaceID
	if !isNamespaceID(b) {
		return id, false
	}
	copy(id.text[:], b)
	return id, true
}

func isNamespaceID[T string | []byte](s T) bool {
	if len(s) != namespaceIDLen || s[0] != 'n' || s[1] != 's' || s[2] != '-' {
		return false
	}
	for i := 3; i < namespaceIDLen; i++ {
		if !isLowerHex(s[i]) {
			return false
		}
	}
	return true
}

// IsZero reports whether id is the zero value (no namespace).
func (id NamespaceID) IsZero() bool { return id.text[0] == 0 }

// String returns the id ("ns-…"), or "" for the zero value.
func (id NamespaceID) String() string {
	if id.IsZero() {
		return ""
	}
	return string(id.text[:])
}

// MarshalText implements encoding.TextMarshaler; the zero value is an error.
func (id NamespaceID) MarshalText() ([]byte, error) {
	if id.IsZero() {
		return nil, errors.New("protocol: zero NamespaceID")
	}
	return append([]byte(nil), id.text[:]...), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseNamespaceID's rule.
func (id *NamespaceID) UnmarshalText(b []byte) error {
	v, ok := namespaceIDFromBytes(b)
	if !ok {
		return fmt.Errorf("%w: %q", errNamespaceID, truncateForError(string(b)))
	}
	*id = v
	return nil
}

func (id NamespaceID) appendTo(dst []byte) []byte {
	dst = append(dst, namespaceIDLen)
	return append(dst, id.text[:]...)
}

// ValidInstanceID reports whether s follows the instance-id grammar `^[a-z][a-z0-9-]{0,62}$`
// (docs/protocol.md#field-rules).
func ValidInstanceID(s string) bool {
	if len(s) < 1 || len(s) > 63 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// ValidReplicationID reports whether s is a replication lineage id: 32 lowercase hex.
func ValidReplicationID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isLowerHex(s[i]) {
			return false
		}
	}
	return true
}

// MaxCodeLen is the longest code, reasonCode or safeMessage accepted.
const MaxCodeLen = 256

// validStableText reports whether s is printable ASCII of at most MaxCodeLen bytes: the rule
// for code, reasonCode and safeMessage.
func validStableText(s string) bool {
	if len(s) > MaxCodeLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func isLowerHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

func truncateForError(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
