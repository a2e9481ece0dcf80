package protocol

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/nomicore/nomicore/lib0"
)

// The JSON form of frames (docs/protocol.md#json-form), used by `nmcr frame` and the
// golden-vector tests:
//
//	{"type":"HELLO","sequence":1,"payload":{…}}
//
// type is the contract's message name; payload keys are the contract's field names, in the
// contract's order (the message's field list, fields.go); bytes are lowercase hex strings; absent optionals are omitted; bools are
// JSON bools; list(varUint) is an array of numbers; capability bitsets and u8 enums are
// numbers. UPDATE_CHUNK's binding fields are replicationId, replicationEpoch and syncRoundId.

// AppendFrameJSON appends the frame JSON of f to dst.
func AppendFrameJSON(dst []byte, f Frame) []byte {
	dst = append(dst, `{"type":`...)
	dst = appendJSONString(dst, f.Message.Type().String())
	dst = append(dst, `,"sequence":`...)
	dst = strconv.AppendUint(dst, uint64(f.Sequence), 10)
	dst = append(dst, `,"payload":`...)
	w := walker{op: opWriteJSON, buf: append(dst, '{')}
	walk(f.Message, &w)
	return append(w.buf, '}', '}')
}

var messageTypesByName = func() map[string]MessageType {
	m := make(map[string]MessageType)
	for _, r := range MessageRules() {
		m[r.Name] = r.Type
	}
	return m
}()

// ParseFrameJSON reads one frame JSON object. Every payload field the message has must be
// present (optionals only when present on the wire) and no other key is allowed. It checks
// the JSON's shape and value ranges only; the Codec applies the field rules when the frame is
// encoded. A failure is an *Error with code MALFORMED_FRAME.
func ParseFrameJSON(b []byte) (Frame, error) {
	var env struct {
		Type     *string         `json:"type"`
		Sequence json.RawMessage `json:"sequence"`
		Payload  json.RawMessage `json:"payload"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		return Frame{}, jsonErr("frame: %v", err)
	}
	if dec.More() {
		return Frame{}, jsonErr("frame: data after the object")
	}
	if env.Type == nil || env.Sequence == nil || env.Payload == nil {
		return Frame{}, jsonErr("frame: needs type, sequence and payload")
	}
	t, ok := messageTypesByName[*env.Type]
	if !ok {
		return Frame{}, jsonErr("frame: unknown type %q", *env.Type)
	}
	seq, err := parseJSONUint(env.Sequence, math.MaxUint32)
	if err != nil {
		return Frame{}, jsonErr("frame.sequence: %v", err)
	}
	r := jsonReader{t: t}
	if err := json.Unmarshal(env.Payload, &r.fields); err != nil || r.fields == nil {
		return Frame{}, jsonErr("%v payload: not an object", t)
	}
	m := newMessage(t)
	w := walker{op: opReadJSON, jr: &r}
	walk(m, &w)
	if r.err == nil && r.used != len(r.fields) {
		for k := range r.fields {
			if !r.seen[k] {
				r.fail(k, "not a field of this message")
				break
			}
		}
	}
	if r.err != nil {
		return Frame{}, r.err
	}
	return Frame{Sequence: uint32(seq), Message: m}, nil
}

func jsonErr(format string, args ...any) *Error {
	return connErr(CodeMalformedFrame, "frame JSON: "+fmt.Sprintf(format, args...))
}

// ---- writing ----

// The frame JSON writer: walker methods that append one payload key and its value to w.buf,
// counting the keys in w.n for the commas.

func (w *walker) jsonKey(k string) {
	if w.n > 0 {
		w.buf = append(w.buf, ',')
	}
	w.n++
	w.buf = appendJSONString(w.buf, k)
	w.buf = append(w.buf, ':')
}

func (w *walker) jsonStr(k, v string) { w.jsonKey(k); w.buf = appendJSONString(w.buf, v) }

func (w *walker) jsonNum(k string, v uint64) {
	w.jsonKey(k)
	w.buf = strconv.AppendUint(w.buf, v, 10)
}

func (w *walker) jsonBool(k string, v bool) { w.jsonKey(k); w.buf = strconv.AppendBool(w.buf, v) }

func (w *walker) jsonNS(k string, v NamespaceID) {
	w.jsonKey(k)
	w.buf = append(append(append(w.buf, '"'), v.text[:]...), '"')
}

func (w *walker) jsonHex(k string, v []byte) {
	w.jsonKey(k)
	w.buf = append(w.buf, '"')
	w.buf = hex.AppendEncode(w.buf, v)
	w.buf = append(w.buf, '"')
}

func (w *walker) jsonNums(k string, v []uint64) {
	w.jsonKey(k)
	w.buf = append(w.buf, '[')
	for i, x := range v {
		if i > 0 {
			w.buf = append(w.buf, ',')
		}
		w.buf = strconv.AppendUint(w.buf, x, 10)
	}
	w.buf = append(w.buf, ']')
}

// appendJSONString quotes s as JSON does (RFC 8259), like JSON.stringify: only '"', '\' and
// control characters are escaped. Invalid UTF-8 (never produced by the decoder) becomes U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		case c < utf8.RuneSelf:
			dst = append(dst, c)
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			dst = utf8.AppendRune(dst, r)
			i += size
			continue
		}
		i++
	}
	return append(dst, '"')
}

// ---- reading ----

type jsonReader struct {
	t      MessageType
	fields map[string]json.RawMessage
	seen   map[string]bool
	used   int
	err    *Error
}

func (r *jsonReader) fail(k, format string, args ...any) {
	if r.err == nil {
		r.err = jsonErr("%v.%s: %s", r.t, k, fmt.Sprintf(format, args...))
	}
}

// get returns the raw value of key k; a missing required key is an error.
func (r *jsonReader) get(k string, optional bool) (json.RawMessage, bool) {
	if r.err != nil {
		return nil, false
	}
	v, ok := r.fields[k]
	if !ok {
		if !optional {
			r.fail(k, "missing")
		}
		return nil, false
	}
	if r.seen == nil {
		r.seen = make(map[string]bool)
	}
	r.seen[k] = true
	r.used++
	return v, true
}

func (r *jsonReader) str(k string) string {
	v, ok := r.get(k, false)
	if !ok {
		return ""
	}
	var s string
	if v[0] != '"' || json.Unmarshal(v, &s) != nil {
		r.fail(k, "not a string")
	}
	return s
}

func (r *jsonReader) uintMax(k string, max uint64, optional bool) (uint64, bool) {
	v, ok := r.get(k, optional)
	if !ok {
		return 0, false
	}
	n, err := parseJSONUint(v, max)
	if err != nil {
		r.fail(k, "%v", err)
	}
	return n, true
}

// num, u32 and u8 read required numbers: a missing field fails r, so the presence
// uintMax reports carries nothing more.
func (r *jsonReader) num(k string) uint64 {
	n, _ := r.uintMax(k, lib0.MaxSafeInteger, false)
	return n
}

func (r *jsonReader) u32(k string) uint32 {
	n, _ := r.uintMax(k, math.MaxUint32, false)
	return uint32(n)
}

func (r *jsonReader) u8(k string) uint8 {
	n, _ := r.uintMax(k, math.MaxUint8, false)
	return uint8(n)
}

func (r *jsonReader) boolean(k string) bool {
	v, ok := r.get(k, false)
	if !ok {
		return false
	}
	switch string(v) {
	case "true":
		return true
	case "false":
		return false
	}
	r.fail(k, "not a bool")
	return false
}

func (r *jsonReader) hex(k string) []byte {
	s := r.str(k)
	if r.err != nil {
		return nil
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		r.fail(k, "not hex")
	}
	if b == nil {
		b = []byte{}
	}
	return b
}

func (r *jsonReader) nonce(k string) (n [16]byte) {
	b := r.hex(k)
	if r.err == nil && len(b) != len(n) {
		r.fail(k, "not 16 bytes")
		return n
	}
	copy(n[:], b)
	return n
}

func (r *jsonReader) ns(k string) NamespaceID {
	s := r.str(k)
	if r.err != nil {
		return NamespaceID{}
	}
	id, err := ParseNamespaceID(s)
	if err != nil {
		r.fail(k, "%v", err)
	}
	return id
}

func (r *jsonReader) nums(k string) []uint64 {
	v, ok := r.get(k, false)
	if !ok {
		return nil
	}
	var raw []json.RawMessage
	if v[0] != '[' || json.Unmarshal(v, &raw) != nil {
		r.fail(k, "not an array")
		return nil
	}
	out := make([]uint64, len(raw))
	for i, x := range raw {
		n, err := parseJSONUint(x, lib0.MaxSafeInteger)
		if err != nil {
			r.fail(k, "entry %d: %v", i, err)
			return nil
		}
		out[i] = n
	}
	return out
}

// parseJSONUint reads a JSON number that must be a non-negative integer no larger than max,
// written without fraction or exponent.
func parseJSONUint(v json.RawMessage, max uint64) (uint64, error) {
	s := string(bytes.TrimSpace(v))
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%q is not a plain non-negative integer", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not a plain non-negative integer", s)
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > max {
		return 0, fmt.Errorf("%s is over %d", s, max)
	}
	return n, nil
}
