package registry

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/nomicore/nomicore/lib0"
	"github.com/nomicore/nomicore/yjs"
)

// The active schema: the schema a namespace runs with, taken from meta.schema and re-armed on
// a peer when its hub changes it (docs/protocol.md#document-layout). There is no schema
// compiler in this project (docs/protocol.md#implementation-conventions), so installing a
// schema means: check the shape of meta.schema ({"updatedAt": string, "definition": object}),
// compute the semantic fingerprint of its definition, and make it the namespace's active
// schema.

// ActiveSchema is the schema a namespace runs with: the meta.schema the registry last
// installed.
type ActiveSchema struct {
	// UpdatedAt is meta.schema.updatedAt as written by the hub (never a local clock
	// reading); HasUpdatedAt is false when it is absent or not a string (the re-arm event's
	// updatedAt is then null).
	UpdatedAt    string
	HasUpdatedAt bool
	// Definition is meta.schema.definition.
	Definition lib0.Object
	// Fingerprint is SemanticFingerprint(Definition).
	Fingerprint string
}

// RearmFailure is the code of a failed schema re-arm. The strings equal the observer's
// SchemaRearmCode values; they are not namespace error codes and never go on the wire.
type RearmFailure string

// Re-arm failure codes.
const (
	// RearmInvalid: meta.schema is not {"updatedAt"?, "definition": JSON object} — the
	// definition is missing, not an object, holds a value JSON cannot carry, or the schema
	// was removed.
	RearmInvalid RearmFailure = "NSRT-FATAL-SCHEMA-REARM-INVALID"
	// RearmInternal: an unexpected failure while installing.
	RearmInternal RearmFailure = "NSRT-FATAL-SCHEMA-REARM-INTERNAL"
)

// SchemaRearm is what an apply did to the active schema (ApplyResult.Rearm): on a peer, an
// update from the hub that changed meta.schema re-arms it, in the apply's slot, before the
// dirty notification. Exactly one of Installed and Failed is set. A failed re-arm leaves the
// namespace without an active schema.
type SchemaRearm struct {
	Installed *ActiveSchema
	Failed    RearmFailure
}

// fingerprintDomain separates the semantic fingerprint's hash input from every other use
// of SHA-256 (the NUL never occurs in canonical JSON, where it is escaped).
const fingerprintDomain = "nomicore:schema:semantic-fingerprint:v1\x00"

// maxSchemaDepth bounds the nesting of a definition the canonical form walks.
const maxSchemaDepth = 512

var errNotJSON = errors.New("schema definition is not a JSON object")

// SemanticFingerprint returns the semantic fingerprint of a schema definition (a safe
// digest, docs/protocol.md#safe-fields): "sha256:v1:" and the lowercase hex SHA-256 of the
// domain separator "nomicore:schema:semantic-fingerprint:v1" NUL followed by the canonical
// JSON of definition. The canonical JSON is ECMAScript JSON.stringify of the value with
// every object's keys sorted by UTF-16 code units (RFC 8785), so key order and formatting do
// not change the fingerprint. A definition holding anything JSON cannot carry (undefined,
// bigint, bytes, NaN or an infinity, a Yjs type) or nested deeper than 512 is refused.
func SemanticFingerprint(definition lib0.Object) (string, error) {
	canon, err := appendCanonical(nil, definition, 0)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write([]byte(fingerprintDomain))
	h.Write(canon)
	return "sha256:v1:" + hex.EncodeToString(h.Sum(nil)), nil
}

// appendCanonical appends the canonical JSON of v.
func appendCanonical(b []byte, v any, depth int) ([]byte, error) {
	if depth > maxSchemaDepth {
		return nil, fmt.Errorf("%w: nested deeper than %d", errNotJSON, maxSchemaDepth)
	}
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: a non-finite number", errNotJSON)
		}
		return appendESNumber(b, v), nil
	case string:
		return appendJSONString(b, v)
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendCanonical(b, e, depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case lib0.Object:
		fields := slices.Clone(v)
		slices.SortFunc(fields, func(x, y lib0.Field) int { return compareUTF16(x.Key, y.Key) })
		b = append(b, '{')
		for i, f := range fields {
			if i > 0 {
				if fields[i-1].Key == f.Key {
					return nil, fmt.Errorf("%w: a repeated key", errNotJSON)
				}
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSONString(b, f.Key); err != nil {
				return nil, err
			}
			b = append(b, ':')
			if b, err = appendCanonical(b, f.Value, depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("%w: a %T value", errNotJSON, v)
}

// compareUTF16 orders strings by their UTF-16 code units, as JavaScript's default sort and
// RFC 8785 do (it differs from UTF-8 byte order for characters above U+FFFF, whose lead
// surrogate sorts below U+E000–U+FFFF).
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			if ua, ub := firstUnit(ra), firstUnit(rb); ua != ub {
				return int(ua) - int(ub)
			}
			// Two characters above U+FFFF with the same lead surrogate: the trail surrogates
			// order them as the characters themselves.
			return int(ra) - int(rb)
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

// firstUnit is the first UTF-16 code unit of r.
func firstUnit(r rune) rune {
	if r >= 0x10000 {
		hi, _ := utf16.EncodeRune(r)
		return hi
	}
	return r
}

// appendJSONString appends s as JSON.stringify writes it: `"` and `\` escaped, the control
// characters below U+0020 as \b \t \n \f \r or \u00xx, everything else as is.
func appendJSONString(b []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("%w: a string that is not UTF-8", errNotJSON)
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\b':
			b = append(b, `\b`...)
		case c == '\t':
			b = append(b, `\t`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '\f':
			b = append(b, `\f`...)
		case c == '\r':
			b = append(b, `\r`...)
		case c < 0x20:
			b = append(b, `\u00`...)
			b = append(b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"'), nil
}

// appendESNumber appends a finite number as ECMAScript Number::toString does (which is what
// JSON.stringify writes): the shortest digits that round-trip, in plain notation for
// exponents from -7 to 20, else as d.ddde±n; -0 is "0".
func appendESNumber(b []byte, f float64) []byte {
	if f == 0 {
		return append(b, '0')
	}
	if f < 0 {
		b = append(b, '-')
		f = -f
	}
	// "d.ddddde±XX": the shortest round-trip digits and the decimal exponent.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := bytes.Cut([]byte(e), []byte("e"))
	digits := bytes.Replace(mant, []byte("."), nil, 1)
	x, _ := strconv.Atoi(string(exp))
	k, n := len(digits), x+1 // value = 0.digits × 10^n
	switch {
	case k <= n && n <= 21:
		b = append(b, digits...)
		for range n - k {
			b = append(b, '0')
		}
	case 0 < n && n <= 21:
		b = append(b, digits[:n]...)
		b = append(b, '.')
		b = append(b, digits[n:]...)
	case -6 < n && n <= 0:
		b = append(b, "0."...)
		for range -n {
			b = append(b, '0')
		}
		b = append(b, digits...)
	default:
		b = append(b, digits[0])
		if k > 1 {
			b = append(b, '.')
			b = append(b, digits[1:]...)
		}
		b = append(b, 'e')
		if n-1 >= 0 {
			b = append(b, '+')
		}
		b = strconv.AppendInt(b, int64(n-1), 10)
	}
	return b
}

// parseSchema checks the shape of a meta.schema value and builds the active schema.
func parseSchema(v any) (*ActiveSchema, error) {
	obj, ok := v.(lib0.Object)
	if !ok {
		return nil, fmt.Errorf("%w: meta.schema is a %T", errNotJSON, v)
	}
	s := &ActiveSchema{}
	var def any
	var hasDef bool
	for _, f := range obj {
		switch f.Key {
		case "updatedAt":
			s.UpdatedAt, s.HasUpdatedAt = f.Value.(string)
		case "definition":
			def, hasDef = f.Value, true
		}
	}
	if !hasDef {
		return nil, fmt.Errorf("%w: no definition", errNotJSON)
	}
	if s.Definition, ok = def.(lib0.Object); !ok {
		return nil, fmt.Errorf("%w: the definition is a %T", errNotJSON, def)
	}
	fp, err := SemanticFingerprint(s.Definition)
	if err != nil {
		return nil, err
	}
	s.Fingerprint = fp
	return s, nil
}

// schemaValue returns the raw meta.schema value of doc.
func schemaValue(doc *yjs.Doc) (any, bool) {
	t, err := doc.Get(MetaRoot, yjs.KindMap)
	if err != nil {
		return nil, false
	}
	return (*yjs.Map)(t).Get(MetaSchema)
}

// schemaState is the runtime's record of meta.schema: what it last saw (to tell a change
// from another meta write, such as an epoch bump) and what it installed. Owned by the
// runtime goroutine; the installed schema is published for readers.
type schemaState struct {
	present bool
	raw     []byte // the lib0 encoding of the value last seen; nil if it has none
	// fatal: the value last seen could not be installed. A peer then opens
	// no replication session on the namespace (ErrSchemaInvalid) until a valid schema is
	// installed or the replica is reset: it must not go on converging under a schema it
	// cannot run.
	fatal bool
}

// encodeSchemaValue is the comparison key of a meta.schema value: its lib0 encoding, which
// keeps key order (a reformatted definition is a new write to install). A value lib0
// cannot encode (a Yjs type) has no key and always counts as changed.
func encodeSchemaValue(v any) []byte {
	e := lib0.NewEncoder(64)
	if err := e.WriteAny(v); err != nil {
		return nil
	}
	return e.Bytes()
}

// loadSchema installs meta.schema when a runtime loads, silently (no re-arm reported); an
// invalid value leaves no active schema.
func (rt *nsRuntime) loadSchema() {
	v, present := schemaValue(rt.doc)
	rt.schemaSeen = schemaState{present: present}
	rt.schema.Store(nil)
	if !present {
		return
	}
	rt.schemaSeen.raw = encodeSchemaValue(v)
	s, err := parseSchema(v)
	if err != nil {
		rt.schemaSeen.fatal = true
		return
	}
	rt.schema.Store(s)
}

// rearmHook, when set by a test, runs inside every re-arm (to inject an internal failure).
var rearmHook func()

// rearmSchema re-arms the active schema after an apply that may have changed meta.schema
// (a peer applying its hub's update): nil when meta.schema is as it was; else the new
// schema installed, or the failure (and no active schema).
func (rt *nsRuntime) rearmSchema() (r *SchemaRearm) {
	defer func() {
		if p := recover(); p != nil {
			rt.schema.Store(nil)
			rt.schemaSeen = schemaState{present: true, fatal: true}
			rt.reg.logError("schema re-arm failed", rt.ns, fmt.Errorf("%v", p))
			r = &SchemaRearm{Failed: RearmInternal}
		}
	}()
	v, present := schemaValue(rt.doc)
	var raw []byte
	if present {
		raw = encodeSchemaValue(v)
	}
	if present == rt.schemaSeen.present && (!present || raw != nil && bytes.Equal(raw, rt.schemaSeen.raw)) {
		return nil
	}
	rt.schemaSeen = schemaState{present: present, raw: raw}
	if rearmHook != nil {
		rearmHook()
	}
	if !present {
		// The schema was removed: the namespace can no longer run with it.
		rt.schema.Store(nil)
		rt.schemaSeen.fatal = true
		return &SchemaRearm{Failed: RearmInvalid}
	}
	s, err := parseSchema(v)
	if err != nil {
		rt.schema.Store(nil)
		rt.schemaSeen.fatal = true
		return &SchemaRearm{Failed: RearmInvalid}
	}
	rt.schema.Store(s)
	return &SchemaRearm{Installed: s}
}
