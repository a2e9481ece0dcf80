package observer

import (
	"fmt"
	"log/slog"
	"math"
)

// fields collects an event's key/value list in documented order. Every rendering
// (Event.Attrs, MarshalJSON, LogValue) is derived from it, so keys cannot drift
// between them.
type fields struct{ a []slog.Attr }

func (f *fields) str(k, v string)        { f.a = append(f.a, slog.String(k, v)) }
func (f *fields) int(k string, v int)    { f.a = append(f.a, slog.Int(k, v)) }
func (f *fields) u32(k string, v uint32) { f.a = append(f.a, slog.Uint64(k, uint64(v))) }
func (f *fields) u64(k string, v uint64) { f.a = append(f.a, slog.Uint64(k, v)) }
func (f *fields) ms(k string, v float64) { f.a = append(f.a, slog.Float64(k, v)) }
func (f *fields) bool(k string, v bool)  { f.a = append(f.a, slog.Bool(k, v)) }

func (f *fields) optStr(k string, o Opt[string]) {
	if v, ok := o.Get(); ok {
		f.str(k, v)
	}
}

func (f *fields) optInt(k string, o Opt[int]) {
	if v, ok := o.Get(); ok {
		f.int(k, v)
	}
}

func (f *fields) optU64(k string, o Opt[uint64]) {
	if v, ok := o.Get(); ok {
		f.u64(k, v)
	}
}

func (f *fields) optMs(k string, o Opt[float64]) {
	if v, ok := o.Get(); ok {
		f.ms(k, v)
	}
}

// nullableStr renders k always: the string when present, JSON null when absent
// (schema-rearm-applied.updatedAt: an unknown value is reported as null, never
// guessed).
func (f *fields) nullableStr(k string, o Opt[string]) {
	if v, ok := o.Get(); ok {
		f.str(k, v)
		return
	}
	f.a = append(f.a, slog.Any(k, nil))
}

// connID renders connectionId?: absent before the handshake completes.
func (f *fields) connID(o Opt[string]) { f.optStr("connectionId", o) }

// InvalidEventError reports an event that breaks the vocabulary's rules: a side
// that may not emit the type, a value outside a closed vocabulary, an identifier
// or digest with the wrong grammar, a negative or non-finite number, or an
// inconsistent conditional group.
type InvalidEventError struct {
	Type    Type
	Key     string
	Problem string
}

func (e *InvalidEventError) Error() string {
	return fmt.Sprintf("observer: invalid %s event: %s: %s", e.Type, e.Key, e.Problem)
}

// checker records the first rule an event breaks.
type checker struct {
	t    Type
	side Side
	err  *InvalidEventError
}

func (c *checker) fail(key, format string, args ...any) {
	if c.err == nil {
		c.err = &InvalidEventError{Type: c.t, Key: key, Problem: fmt.Sprintf(format, args...)}
	}
}

// member checks a closed-vocabulary value.
func (c *checker) member(key string, v interface{ Valid() bool }) {
	if !v.Valid() {
		c.fail(key, "%q is not in the closed vocabulary", v)
	}
}

func (c *checker) connState(key string, s ConnectionState) {
	if !s.ValidFor(c.side) {
		c.fail(key, "%q is not a %s connection state", s, c.side)
	}
}

func (c *checker) chanState(key string, s ChannelState) {
	if !s.ValidFor(c.side) {
		c.fail(key, "%q is not a %s channel state", s, c.side)
	}
}

func (c *checker) namespaceID(v string) {
	if !ValidNamespaceID(v) {
		c.fail("namespaceId", "must match ^ns-[0-9a-f]{32}$")
	}
}

func (c *checker) connID(o Opt[string]) {
	if v, ok := o.Get(); ok && !ValidConnectionID(v) {
		c.fail("connectionId", "must be 1-64 bytes of [A-Za-z0-9._:-]")
	}
}

func (c *checker) count(key string, v int) {
	if v < 0 {
		c.fail(key, "negative count %d", v)
	}
}

func (c *checker) optCount(key string, o Opt[int]) {
	if v, ok := o.Get(); ok {
		c.count(key, v)
	}
}

// positive checks a wire uint32 that the contract numbers from 1 (sequence,
// transferId, chunkCount).
func (c *checker) positive(key string, v uint32) {
	if v == 0 {
		c.fail(key, "must be at least 1")
	}
}

func (c *checker) ms(key string, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		c.fail(key, "must be a finite non-negative duration, got %v", v)
	}
}

func (c *checker) optMs(key string, o Opt[float64]) {
	if v, ok := o.Get(); ok {
		c.ms(key, v)
	}
}

// ValidNamespaceID reports whether s is a controlled namespace identifier,
// ^ns-[0-9a-f]{32}$.
func ValidNamespaceID(s string) bool {
	return len(s) == 35 && s[:3] == "ns-" && isLowerHex(s[3:])
}

// ValidConnectionID reports whether s has the grammar this project gives the
// §6.2 observability connectionId: 1 to 64 bytes of ASCII letters, digits and
// ". _ : -" — an identifier, never free text (see docs/decisions.md).
func ValidConnectionID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// ValidSemanticFingerprint reports whether s is a schema semantic fingerprint,
// sha256:v1:<64 lowercase hex>.
func ValidSemanticFingerprint(s string) bool {
	const prefix = "sha256:v1:"
	return len(s) == len(prefix)+64 && s[:len(prefix)] == prefix && isLowerHex(s[len(prefix):])
}

// SchemaUpdatedAt projects the replicated META.schema.updatedAt for
// schema-rearm-applied: present only when raw looks like a timestamp (1 to 40
// bytes of digits and "T Z : . + -"); a legacy or corrupt carrier — or any free
// text — is absent and renders as null: a value that is not known to be safe is
// left out rather than guessed or cleaned up.
func SchemaUpdatedAt(raw string) Opt[string] {
	if !validUpdatedAt(raw) {
		return None[string]()
	}
	return Some(raw)
}

func validUpdatedAt(s string) bool {
	if len(s) == 0 || len(s) > 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || c == 'T' || c == 'Z' || c == ':' || c == '.' || c == '+' || c == '-') {
			return false
		}
	}
	return true
}
