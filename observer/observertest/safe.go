package observertest

import (
	"fmt"
	"log/slog"
	"reflect"
	"strings"

	"github.com/nomicore/nomicore/observer"
)

// Problems returns every safe-field violation in e, empty when it is safe:
//
//   - anything Scan finds in the event value (bytes, errors, non-data values,
//     sentinels);
//   - Validate's verdict (closed vocabularies, identifier and digest grammars);
//   - in the rendered attributes: a value kind other than string, number, bool
//     or null; a string under a key with no registered safe grammar, or not
//     matching it (free text); a sentinel as a substring of the JSON rendering.
func Problems(e observer.Event, sentinels ...string) []string {
	problems := Scan(e, sentinels...)
	if err := e.Validate(); err != nil {
		problems = append(problems, err.Error())
	}
	for _, a := range e.Attrs() {
		switch a.Value.Kind() {
		case slog.KindString:
			grammar, ok := stringKeys[a.Key]
			if !ok {
				problems = append(problems, fmt.Sprintf("string key %q has no registered safe grammar", a.Key))
			} else if !grammar(a.Value.String()) {
				problems = append(problems, fmt.Sprintf("%s=%q is free text, not a safe value", a.Key, a.Value.String()))
			}
		case slog.KindInt64, slog.KindUint64, slog.KindFloat64, slog.KindBool:
		case slog.KindAny:
			if a.Value.Any() != nil {
				problems = append(problems, fmt.Sprintf("%s carries a %T value", a.Key, a.Value.Any()))
			}
		default:
			problems = append(problems, fmt.Sprintf("%s has value kind %s", a.Key, a.Value.Kind()))
		}
	}
	js, err := e.MarshalJSON()
	if err != nil {
		problems = append(problems, err.Error())
	}
	for _, s := range sentinels {
		if s != "" && strings.Contains(string(js), s) {
			problems = append(problems, fmt.Sprintf("JSON rendering contains sentinel %q", s))
		}
	}
	return problems
}

// stringKeys is the grammar of every key allowed to hold a string: stable
// literals (closed vocabularies, codes), controlled identifiers, documented
// digests and the replicated schema timestamp.
var stringKeys = map[string]func(string) bool{
	"type": literal, "side": literal, "from": literal, "to": literal, "reason": literal,
	"reasonCode": literal, "cause": literal, "code": literal, "direction": literal,
	"terminalState": literal, "via": literal, "channelState": literal,
	"connectionState": literal, "applyEffect": literal,
	"namespaceId":           observer.ValidNamespaceID,
	"connectionId":          observer.ValidConnectionID,
	"stateVectorBeforeHash": digest16,
	"stateVectorAfterHash":  digest16,
	"semanticFingerprint":   observer.ValidSemanticFingerprint,
	"updatedAt":             func(s string) bool { return observer.SchemaUpdatedAt(s).Present() },
}

// literal accepts a stable literal: 1 to 64 bytes of letters, digits, '-' and '_'.
func literal(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func digest16(s string) bool {
	if len(s) != 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

var errorType = reflect.TypeFor[error]()

// Scan walks v deeply by reflection (struct fields exported or not, pointers,
// interfaces, slices, arrays, maps) and reports: byte slices and byte arrays
// (Yjs bytes, tokens), values implementing error, funcs, channels and unsafe
// pointers, and strings containing any sentinel. Each problem names the path
// where it was found.
func Scan(v any, sentinels ...string) []string {
	s := scanner{sentinels: sentinels, seen: map[uintptr]bool{}}
	s.walk(reflect.ValueOf(v), "event", 0)
	return s.problems
}

type scanner struct {
	sentinels []string
	seen      map[uintptr]bool
	problems  []string
}

func (s *scanner) add(path, format string, args ...any) {
	s.problems = append(s.problems, path+": "+fmt.Sprintf(format, args...))
}

func (s *scanner) walk(v reflect.Value, path string, depth int) {
	if !v.IsValid() {
		return
	}
	if depth > 64 {
		s.add(path, "nesting deeper than 64")
		return
	}
	if v.Kind() != reflect.Interface && v.Type().Implements(errorType) {
		s.add(path, "error value of type %s", v.Type())
		return
	}
	switch v.Kind() {
	case reflect.String:
		str := v.String()
		for _, sen := range s.sentinels {
			if sen != "" && strings.Contains(str, sen) {
				s.add(path, "contains sentinel %q", sen)
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			s.add(path, "byte payload of type %s", v.Type())
			return
		}
		for i := 0; i < v.Len(); i++ {
			s.walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1)
		}
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		if s.seen[v.Pointer()] {
			return
		}
		s.seen[v.Pointer()] = true
		s.walk(v.Elem(), path, depth+1)
	case reflect.Interface:
		s.walk(v.Elem(), path, depth+1)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			s.walk(v.Field(i), path+"."+v.Type().Field(i).Name, depth+1)
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			s.walk(it.Key(), path+"{key}", depth+1)
			s.walk(it.Value(), fmt.Sprintf("%s[%v]", path, it.Key()), depth+1)
		}
	case reflect.Func, reflect.Chan, reflect.UnsafePointer:
		s.add(path, "non-data value of kind %s", v.Kind())
	}
}
