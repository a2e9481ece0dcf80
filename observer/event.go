package observer

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
)

// Event is what an Observer receives: the envelope (`type` from the payload,
// `side` from the emitter) around one of the 36 payloads. Events are values;
// observers may keep them.
type Event struct {
	Side    Side
	Payload Payload
}

// Type is the envelope key `type`, or "" for an event without a payload.
func (e Event) Type() Type {
	if e.Payload == nil {
		return ""
	}
	return e.Payload.Type()
}

// Attrs returns the event's keys and values in order: `type`, `side`, then the
// payload's documented keys (absent optionals left out). JSON and slog renderings
// are both derived from this list.
func (e Event) Attrs() []slog.Attr {
	d := describer{op: opRender, side: e.Side, attrs: make([]slog.Attr, 0, 24)}
	d.put(slog.String("type", string(e.Type())))
	d.put(slog.String("side", string(e.Side)))
	if e.Payload != nil {
		d.walk(e.Payload)
	}
	return d.attrs
}

// Keys returns the rendered key names in order.
func (e Event) Keys() []string {
	attrs := e.Attrs()
	keys := make([]string, len(attrs))
	for i, a := range attrs {
		keys[i] = a.Key
	}
	return keys
}

// LogValue renders the event as a slog group of its Attrs.
func (e Event) LogValue() slog.Value { return slog.GroupValue(e.Attrs()...) }

// MarshalJSON renders the event as one flat JSON object with the keys of Attrs,
// in that order. It fails only on a non-finite number, which Validate also
// rejects.
func (e Event) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 256)
	b = append(b, '{')
	for i, a := range e.Attrs() {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, a.Key)
		b = append(b, ':')
		var err error
		if b, err = appendJSONValue(b, a.Value); err != nil {
			return nil, fmt.Errorf("observer: %s.%s: %w", e.Type(), a.Key, err)
		}
	}
	return append(b, '}'), nil
}

func appendJSONValue(b []byte, v slog.Value) ([]byte, error) {
	switch v.Kind() {
	case slog.KindString:
		return appendJSONString(b, v.String()), nil
	case slog.KindInt64:
		return strconv.AppendInt(b, v.Int64(), 10), nil
	case slog.KindUint64:
		return strconv.AppendUint(b, v.Uint64(), 10), nil
	case slog.KindBool:
		return strconv.AppendBool(b, v.Bool()), nil
	case slog.KindFloat64:
		f := v.Float64()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("non-finite number %v", f)
		}
		enc, err := json.Marshal(f) // the ES number formatting JSON readers expect
		return append(b, enc...), err
	case slog.KindAny:
		if v.Any() == nil {
			return append(b, "null"...), nil
		}
	}
	return nil, fmt.Errorf("unexpected value kind %s", v.Kind())
}

func appendJSONString(b []byte, s string) []byte {
	enc, _ := json.Marshal(s) // cannot fail for a string
	return append(b, enc...)
}

// Validate reports the first way the event breaks the contract, as an
// *InvalidEventError: a side that does not emit the type
// (docs/protocol.md#events), a value outside a closed vocabulary (including a
// hub-only state on a peer event and vice versa), an identifier or digest of the
// wrong grammar (docs/protocol.md#safe-fields), a negative or non-finite number,
// or an inconsistent conditional group. Emitters do not validate on the hot
// path; observertest.Recorder does, so the replication layers' tests check every
// event they emit.
func (e Event) Validate() error {
	if e.Payload == nil {
		return errors.New("observer: event without payload")
	}
	t := e.Payload.Type()
	if !e.Side.Valid() {
		return &InvalidEventError{Type: t, Key: "side", Problem: fmt.Sprintf("%q is neither hub nor peer", e.Side)}
	}
	if !t.EmittedBy(e.Side) {
		return &InvalidEventError{Type: t, Key: "side", Problem: fmt.Sprintf("the %s side does not emit this type of event", e.Side)}
	}
	d := describer{op: opCheck, side: e.Side, t: t}
	d.walk(e.Payload)
	if d.err != nil {
		return d.err
	}
	return nil
}
