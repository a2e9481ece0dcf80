package yjs

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/nomicore/nomicore/lib0"
)

// JS value semantics the Yjs format depends on: JSON.stringify and JSON.parse (legacy JSON,
// embed and format contents), Number::toString and String() (XML rendering).

func itoa(i int) string { return strconv.Itoa(i) }

func sortStrings(s []string) { slices.Sort(s) }

// jsNumberString formats f as JS Number.prototype.toString does.
func jsNumberString(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		return "0"
	case f < 0:
		return "-" + jsNumberString(-f)
	}
	// shortest round-trip digits d1.d2…dk × 10^e
	s := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(s, "e")
	digits := strings.Replace(mant, ".", "", 1)
	e, _ := strconv.Atoi(exp)
	k := len(digits)
	n := e + 1 // value = 0.digits × 10^n
	switch {
	case k <= n && n <= 21:
		return digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		return digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		return "0." + strings.Repeat("0", -n) + digits
	}
	sign := "+"
	if n-1 < 0 {
		sign = "-"
	}
	ex := strconv.Itoa(abs(n - 1))
	if k == 1 {
		return digits + "e" + sign + ex
	}
	return digits[:1] + "." + digits[1:] + "e" + sign + ex
}

// jsonStringify is JSON.stringify for values of the model (undefined at the top renders as
// null; callers avoid it).
func jsonStringify(v any) string {
	var sb strings.Builder
	writeJSON(&sb, v)
	return sb.String()
}

func writeJSON(sb *strings.Builder, v any) {
	switch x := v.(type) {
	case nil, lib0.Undefined:
		sb.WriteString("null")
	case bool:
		if x {
			sb.WriteString("true")
		} else {
			sb.WriteString("false")
		}
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			sb.WriteString("null")
		} else {
			sb.WriteString(jsNumberString(x))
		}
	case lib0.BigInt:
		sb.WriteString(strconv.FormatInt(int64(x), 10))
	case string:
		writeJSONString(sb, x)
	case []any:
		sb.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				sb.WriteByte(',')
			}
			writeJSON(sb, e)
		}
		sb.WriteByte(']')
	case []byte:
		sb.WriteByte('{')
		for i, e := range x {
			if i > 0 {
				sb.WriteByte(',')
			}
			writeJSONString(sb, strconv.Itoa(i))
			sb.WriteByte(':')
			sb.WriteString(strconv.Itoa(int(e)))
		}
		sb.WriteByte('}')
	case lib0.Object:
		sb.WriteByte('{')
		first := true
		for _, f := range x {
			if _, undef := f.Value.(lib0.Undefined); undef {
				continue
			}
			if !first {
				sb.WriteByte(',')
			}
			first = false
			writeJSONString(sb, f.Key)
			sb.WriteByte(':')
			writeJSON(sb, f.Value)
		}
		sb.WriteByte('}')
	default:
		sb.WriteString("{}")
	}
}

const hexDigits = "0123456789abcdef"

func writeJSONString(sb *strings.Builder, s string) {
	sb.WriteByte('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		sb.WriteString(s[start:i])
		switch c {
		case '"':
			sb.WriteString(`\"`)
		case '\\':
			sb.WriteString(`\\`)
		case '\b':
			sb.WriteString(`\b`)
		case '\f':
			sb.WriteString(`\f`)
		case '\n':
			sb.WriteString(`\n`)
		case '\r':
			sb.WriteString(`\r`)
		case '\t':
			sb.WriteString(`\t`)
		default:
			sb.WriteString(`\u00`)
			sb.WriteByte(hexDigits[c>>4])
			sb.WriteByte(hexDigits[c&15])
		}
		start = i + 1
	}
	sb.WriteString(s[start:])
	sb.WriteByte('"')
}

// maxJSONDepth bounds nesting in parsed JSON.
const maxJSONDepth = lib0.MaxAnyDepth

var errJSONDepth = errors.New("JSON nested too deeply")

// parseJSON is JSON.parse into the model: numbers are float64, objects lib0.Object in JS
// property order (a repeated key keeps its first position and last value; "__proto__" is an
// ordinary key), arrays []any. A lone surrogate escape becomes U+FFFD.
func parseJSON(s string) (any, error) {
	p := jsonParser{s: s}
	p.ws()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i != len(p.s) {
		return nil, p.fail()
	}
	return v, nil
}

type jsonParser struct {
	s string
	i int
}

func (p *jsonParser) fail() error {
	return fmt.Errorf("%w at %d", ErrJSON, p.i)
}

func (p *jsonParser) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) lit(word string, v any) (any, error) {
	if strings.HasPrefix(p.s[p.i:], word) {
		p.i += len(word)
		return v, nil
	}
	return nil, p.fail()
}

func (p *jsonParser) value(depth int) (any, error) {
	if p.i >= len(p.s) {
		return nil, p.fail()
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.str()
	case c == 't':
		return p.lit("true", true)
	case c == 'f':
		return p.lit("false", false)
	case c == 'n':
		return p.lit("null", nil)
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return nil, p.fail()
}

func (p *jsonParser) object(depth int) (any, error) {
	if depth >= maxJSONDepth {
		return nil, errJSONDepth
	}
	p.i++
	var obj lib0.ObjectBuilder
	obj.JSONParse = true // JSON.parse keeps an own "__proto__" property
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return obj.Object(), nil
	}
	for {
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return nil, p.fail()
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, p.fail()
		}
		p.i++
		p.ws()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		obj.Set(k.(string), v)
		p.ws()
		if p.i >= len(p.s) {
			return nil, p.fail()
		}
		if p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.s[p.i] == '}' {
			p.i++
			return obj.Object(), nil
		}
		return nil, p.fail()
	}
}

func (p *jsonParser) array(depth int) (any, error) {
	if depth >= maxJSONDepth {
		return nil, errJSONDepth
	}
	p.i++
	arr := make([]any, 0, 1)
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return arr, nil
	}
	for {
		p.ws()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
		p.ws()
		if p.i >= len(p.s) {
			return nil, p.fail()
		}
		if p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.s[p.i] == ']' {
			p.i++
			return arr, nil
		}
		return nil, p.fail()
	}
}

func (p *jsonParser) str() (any, error) {
	p.i++ // opening quote
	var sb strings.Builder
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			sb.WriteString(p.s[start:p.i])
			p.i++
			return sb.String(), nil
		case c < 0x20:
			return nil, p.fail()
		case c == '\\':
			sb.WriteString(p.s[start:p.i])
			p.i++
			if p.i >= len(p.s) {
				return nil, p.fail()
			}
			e := p.s[p.i]
			p.i++
			switch e {
			case '"', '\\', '/':
				sb.WriteByte(e)
			case 'b':
				sb.WriteByte('\b')
			case 'f':
				sb.WriteByte('\f')
			case 'n':
				sb.WriteByte('\n')
			case 'r':
				sb.WriteByte('\r')
			case 't':
				sb.WriteByte('\t')
			case 'u':
				r, ok := p.hex4()
				if !ok {
					return nil, p.fail()
				}
				if utf16.IsSurrogate(r) {
					if r < 0xdc00 && strings.HasPrefix(p.s[p.i:], `\u`) {
						save := p.i
						p.i += 2
						if r2, ok := p.hex4(); ok && r2 >= 0xdc00 && r2 <= 0xdfff {
							sb.WriteRune(utf16.DecodeRune(r, r2))
							break
						}
						p.i = save
					}
					sb.WriteRune(utf8.RuneError)
					break
				}
				sb.WriteRune(r)
			default:
				return nil, p.fail()
			}
			start = p.i
		default:
			p.i++
		}
	}
	return nil, p.fail()
}

func (p *jsonParser) hex4() (rune, bool) {
	if p.i+4 > len(p.s) {
		return 0, false
	}
	v, err := strconv.ParseUint(p.s[p.i:p.i+4], 16, 32)
	if err != nil {
		return 0, false
	}
	p.i += 4
	return rune(v), true
}

func (p *jsonParser) number() (any, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.i < len(p.s) && p.s[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return nil, p.fail()
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, p.fail()
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, p.fail()
		}
	}
	f, err := strconv.ParseFloat(p.s[start:p.i], 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, p.fail()
	}
	return f, nil
}

// normalizeJSON converts an application value into what a remote reader of its JSON sees.
func normalizeJSON(v any) (any, error) {
	n, err := normalizeAny(v)
	if err != nil {
		return nil, err
	}
	if !jsonable(n) {
		return nil, fmt.Errorf("%w: not representable as JSON", ErrUnsupportedValue)
	}
	return parseJSON(jsonStringify(n))
}

func jsonable(v any) bool {
	switch x := v.(type) {
	case lib0.Undefined, lib0.BigInt:
		return false
	case []any:
		for _, e := range x {
			if _, ok := e.(lib0.BigInt); ok {
				return false
			}
			if _, ok := e.(lib0.Undefined); !ok && !jsonable(e) {
				return false
			}
		}
	case lib0.Object:
		for _, f := range x {
			if _, ok := f.Value.(lib0.Undefined); !ok && !jsonable(f.Value) {
				return false
			}
		}
	}
	return true
}

// jsStringAt is JS String(v) for values of the model and shared types, depth
// levels below the value being converted.
func jsStringAt(v any, depth int) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case lib0.Undefined:
		return "undefined"
	case bool:
		if x {
			return "true"
		}
		return "false"
	case float64:
		return jsNumberString(x)
	case lib0.BigInt:
		return strconv.FormatInt(int64(x), 10)
	case string:
		return x
	case []byte:
		parts := make([]string, len(x))
		for i, b := range x {
			parts[i] = strconv.Itoa(int(b))
		}
		return strings.Join(parts, ",")
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			switch e.(type) {
			case nil, lib0.Undefined:
			default:
				parts[i] = jsStringAt(e, depth+1)
			}
		}
		return strings.Join(parts, ",")
	}
	if t := typeOf(v); t != nil {
		return t.renderAt(depth + 1)
	}
	return "[object Object]"
}

// jsonValue converts a value of the document into plain JSON (the comparison rules of the
// project): Uint8Array → {"$bytes":hex}, bigint → {"$bigint":"n"}, subdocument →
// {"$doc":guid}, undefined → {"$undefined":true}, non-finite numbers → {"$number":…}, -0 → 0,
// shared types → their JSON.
func jsonValue(v any) any { return jsonValueAt(v, 0) }

// maxTypeDepth bounds how deep nested shared types are rendered (JS runs out of stack
// sooner); deeper types render as {"$truncated":true}.
const maxTypeDepth = 2000

func jsonValueAt(v any, depth int) any {
	switch x := v.(type) {
	case nil, bool, string:
		return x
	case lib0.Undefined:
		return map[string]any{"$undefined": true}
	case float64:
		switch {
		case math.IsNaN(x):
			return map[string]any{"$number": "NaN"}
		case math.IsInf(x, 1):
			return map[string]any{"$number": "Infinity"}
		case math.IsInf(x, -1):
			return map[string]any{"$number": "-Infinity"}
		case x == 0:
			return float64(0)
		}
		return x
	case lib0.BigInt:
		return map[string]any{"$bigint": strconv.FormatInt(int64(x), 10)}
	case []byte:
		return map[string]any{"$bytes": hex.EncodeToString(x)}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValueAt(e, depth)
		}
		return out
	case lib0.Object:
		out := make(map[string]any, len(x))
		for _, f := range x {
			out[f.Key] = jsonValueAt(f.Value, depth)
		}
		return out
	case *Doc:
		return map[string]any{"$doc": x.guid}
	}
	if t := typeOf(v); t != nil {
		return t.toJSONAt(depth + 1)
	}
	return nil
}

// undefined is the JS value undefined.
var undefined = lib0.Undefined{}
