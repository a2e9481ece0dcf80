package adminapi

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"unicode/utf8"
)

// This file writes a document rendered as JSON (GET …/doc) while it encodes it: a large
// document costs its rendering (the map the registry returns) and a small buffer, not a
// second copy of its JSON text as json.Marshal would make.

// streamPiece is the most bytes of a string encoded at once.
const streamPiece = 32 << 10

// writeDocJSON answers with v, a document rendered by Yjs' toJSON (maps, arrays, strings,
// numbers, booleans, null, and any other value json.Marshal takes), encoded as it is
// written. The bytes equal json.Marshal's. A value json.Marshal would refuse (a NaN, an
// unsupported type) is found before anything is written and answered 500, as writeJSON does.
func writeDocJSON(w http.ResponseWriter, status int, v any) {
	if err := checkJSON(v); err != nil {
		writeError(w, &Error{http.StatusInternalServerError, CodeInternal, "encoding the answer: " + err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	bw := bufio.NewWriterSize(w, 64<<10)
	// A write error is the client going away: nothing more to do.
	_ = encodeJSON(bw, v)
	_ = bw.WriteByte('\n')
	_ = bw.Flush()
}

// writeDocJSONAtMost is writeDocJSON for an answer of at most maxBytes bytes (without its
// newline): the JSON is encoded into a buffer that refuses to grow past maxBytes, so a large
// document costs no more than maxBytes of memory before it is refused with 413
// DOCUMENT_TOO_LARGE (choose fewer roots).
func writeDocJSONAtMost(w http.ResponseWriter, v any, maxBytes int) {
	if err := checkJSON(v); err != nil {
		writeError(w, &Error{http.StatusInternalServerError, CodeInternal, "encoding the answer: " + err.Error()})
		return
	}
	lb := &limitedBuffer{max: maxBytes}
	bw := bufio.NewWriterSize(lb, 4<<10)
	err := encodeJSON(bw, v)
	if err == nil {
		err = bw.Flush()
	}
	if errors.Is(err, errOverLimit) {
		writeError(w, &Error{http.StatusRequestEntityTooLarge, CodeDocumentTooLarge, fmt.Sprintf("the JSON is over "+
			"maxBytes=%d: choose fewer roots (GET /v1/namespaces/{id}/roots lists them with their sizes)", maxBytes)})
		return
	}
	if err != nil {
		writeError(w, &Error{http.StatusInternalServerError, CodeInternal, "encoding the answer: " + err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(append(lb.b, '\n'))
}

// errOverLimit is a limitedBuffer's refusal.
var errOverLimit = errors.New("over the size limit")

// limitedBuffer collects at most max bytes; a write that would pass it fails with
// errOverLimit and keeps nothing of that write.
type limitedBuffer struct {
	b   []byte
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if len(l.b)+len(p) > l.max {
		return 0, errOverLimit
	}
	l.b = append(l.b, p...)
	return len(p), nil
}

// checkJSON reports what json.Marshal would refuse in v, without encoding the strings.
func checkJSON(v any) error {
	switch x := v.(type) {
	case nil, string, bool:
		return nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("json: unsupported value: %v", x)
		}
		return nil
	case map[string]any:
		for _, e := range x {
			if err := checkJSON(e); err != nil {
				return err
			}
		}
		return nil
	case []any:
		for _, e := range x {
			if err := checkJSON(e); err != nil {
				return err
			}
		}
		return nil
	}
	_, err := json.Marshal(v) // a small value of another type
	return err
}

// encodeJSON writes v as json.Marshal would: map keys sorted, strings escaped the same way
// (json.Marshal itself escapes each piece of a long string, cut at a rune's start).
func encodeJSON(w *bufio.Writer, v any) error {
	switch x := v.(type) {
	case string:
		return encodeString(w, x)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		w.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				w.WriteByte(',')
			}
			if err := encodeString(w, k); err != nil {
				return err
			}
			w.WriteByte(':')
			if err := encodeJSON(w, x[k]); err != nil {
				return err
			}
		}
		return w.WriteByte('}')
	case []any:
		w.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				w.WriteByte(',')
			}
			if err := encodeJSON(w, e); err != nil {
				return err
			}
		}
		return w.WriteByte(']')
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// encodeString writes s as a JSON string, a piece at a time.
func encodeString(w *bufio.Writer, s string) error {
	w.WriteByte('"')
	for len(s) > 0 {
		n := min(len(s), streamPiece)
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		b, err := json.Marshal(s[:n])
		if err != nil {
			return err
		}
		if len(b) < 2 {
			return errors.New("json: a string encoded to less than its quotes")
		}
		if _, err := w.Write(b[1 : len(b)-1]); err != nil {
			return err
		}
		s = s[n:]
	}
	return w.WriteByte('"')
}
