package oracle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
)

// EqualJSON compares two JSON texts structurally: object key order is ignored and numbers are
// compared as float64 values (so 1 and 1.0 are equal, and -0 equals 0). On a mismatch it
// returns a short description of the first difference, with its path (for example
// `$.map["🔑"][2]: 1 vs "1"`).
func EqualJSON(a, b []byte) (bool, string) {
	va, err := decodeJSON(a)
	if err != nil {
		return false, "invalid JSON (first): " + err.Error()
	}
	vb, err := decodeJSON(b)
	if err != nil {
		return false, "invalid JSON (second): " + err.Error()
	}
	if d := diffJSON("$", va, vb); d != "" {
		return false, d
	}
	return true, ""
}

// decodeJSON decodes one JSON value with numbers as float64, rounded as JSON.parse does
// (1e400 is +Inf).
func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	return toFloats(v), nil
}

func toFloats(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := strconv.ParseFloat(string(x), 64) // out of range: ±Inf or ±0, as in JS
		return f
	case []any:
		for i := range x {
			x[i] = toFloats(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = toFloats(x[k])
		}
	}
	return v
}

func diffJSON(path string, a, b any) string {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return mismatch(path, a, b)
		}
		keys := make([]string, 0, len(x)+len(y))
		for k := range x {
			keys = append(keys, k)
		}
		for k := range y {
			if _, dup := x[k]; !dup {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			va, inA := x[k]
			vb, inB := y[k]
			p := path + keyPath(k)
			switch {
			case !inA:
				return p + ": missing in the first"
			case !inB:
				return p + ": missing in the second"
			}
			if d := diffJSON(p, va, vb); d != "" {
				return d
			}
		}
		return ""
	case []any:
		y, ok := b.([]any)
		if !ok {
			return mismatch(path, a, b)
		}
		for i := range min(len(x), len(y)) {
			if d := diffJSON(path+"["+strconv.Itoa(i)+"]", x[i], y[i]); d != "" {
				return d
			}
		}
		if len(x) != len(y) {
			return fmt.Sprintf("%s: array length %d vs %d", path, len(x), len(y))
		}
		return ""
	case string:
		if y, ok := b.(string); ok && x == y {
			return ""
		}
		if y, ok := b.(string); ok {
			i := 0
			for i < len(x) && i < len(y) && x[i] == y[i] {
				i++
			}
			return fmt.Sprintf("%s: strings differ at byte %d: %s vs %s", path, i, short(x[i:]), short(y[i:]))
		}
		return mismatch(path, a, b)
	case float64, bool, nil:
		if a == b { // float64 ==: -0 == 0
			return ""
		}
		return mismatch(path, a, b)
	}
	return mismatch(path, a, b)
}

var identifier = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

func keyPath(k string) string {
	if identifier.MatchString(k) {
		return "." + k
	}
	return "[" + strconv.Quote(k) + "]"
}

func mismatch(path string, a, b any) string {
	return fmt.Sprintf("%s: %s vs %s", path, render(a), render(b))
}

func render(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(raw) > 60 {
		return string(raw[:60]) + "…"
	}
	return string(raw)
}

// short cuts s to about 60 bytes for messages.
func short(s string) string {
	const max = 60
	if len(s) <= max {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:max]) + "…"
}
