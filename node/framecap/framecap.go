// Package framecap records the messages of replication connections for an operator to read
// back: `hub serve --capture-frames FILE` and `peer run --capture-frames FILE` write every
// message of every connection to FILE, and `nmcr frame decode < FILE` turns each into a JSON
// line (its type, sequence and fields). At --log-level debug the same messages become one
// log line each (LogTap), without their bytes.
//
// A capture file is text, one message per line:
//
//	# nomicore frame capture: hub, started 2026-12-01T14:13:46.891Z, limit 67108864 bytes
//	2026-12-01T14:13:47.848Z in c-80fbc5eb7224b823 4e4d43520101…
//	2026-12-01T14:13:47.849Z out c-80fbc5eb7224b823 4e4d43520102…
//
// the time (UTC, milliseconds), the direction as the capturing process saw it (in: received,
// out: sent), the connection id ("-" before the connection has one), and the message in
// lowercase hex. Lines starting with # are comments. A capture holds document bytes: treat
// the file like the store (it is created with mode 0600).
//
// The file is bounded: once the next line would take it past its limit, one comment line
// says so and later messages are counted, not written (overflow policy: keep the oldest).
//
// The messages come from a Tap the replication connection layer calls for every message it
// reads or writes.
package framecap

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Tap is the hook the replication connection layer calls with every whole WebSocket message
// of a connection: connectionID is the connection's id ("" before the handshake gave it
// one), sent tells a message written from one read, and msg is the message as it went over
// the wire (it may not be a valid frame). It is called on the connection's reader and
// writer goroutines, so it must be safe for concurrent use; it must not keep msg after it
// returns, and it may block only briefly (a Writer writes one line to its file).
type Tap func(connectionID string, sent bool, msg []byte)

// Both returns a Tap that calls a, then b; either may be nil.
func Both(a, b Tap) Tap {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(id string, sent bool, msg []byte) { a(id, sent, msg); b(id, sent, msg) }
}

// Directions as the capture file writes them.
const (
	In  = "in"
	Out = "out"
)

// DefaultMaxBytes is the default size limit of a capture file.
const DefaultMaxBytes = 64 << 20

// Writer writes a capture file. Its Tap method is safe for concurrent use.
type Writer struct {
	path string
	now  func() time.Time

	mu      sync.Mutex // guards everything below; held while a line is written
	f       *os.File
	line    []byte // reused for each line
	written int64
	max     int64
	frames  int64
	dropped int64 // messages not written once the limit was reached
	closed  bool
}

// Create creates (or truncates) the capture file at path with mode 0600, bounded to max
// bytes (DefaultMaxBytes when max <= 0), and writes its header comment naming who captures.
// now stamps each line (nil: time.Now).
func Create(path, who string, max int64, now func() time.Time) (*Writer, error) {
	if max <= 0 {
		max = DefaultMaxBytes
	}
	if now == nil {
		now = time.Now
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("frame capture file: %w", err)
	}
	w := &Writer{path: path, now: now, f: f, max: max}
	header := fmt.Sprintf("# nomicore frame capture: %s, started %s, limit %d bytes; read it with: nmcr frame decode < %s\n",
		who, stamp(now()), max, path)
	if err := w.write([]byte(header)); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// Path returns the file's path.
func (w *Writer) Path() string { return w.path }

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func (w *Writer) write(b []byte) error {
	n, err := w.f.Write(b)
	w.written += int64(n)
	if err != nil {
		return fmt.Errorf("frame capture file %s: %w", w.path, err)
	}
	return nil
}

// Tap writes one message as one line (it is a Tap). Once the file is at its limit, or after
// a write error or Close, it only counts the message as dropped.
func (w *Writer) Tap(connectionID string, sent bool, msg []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.written >= w.max {
		w.dropped++
		return
	}
	dir := In
	if sent {
		dir = Out
	}
	w.line = append(w.line[:0], stamp(w.now())...)
	w.line = append(w.line, ' ')
	w.line = append(w.line, dir...)
	w.line = append(w.line, ' ')
	w.line = appendConnID(w.line, connectionID)
	w.line = append(w.line, ' ')
	w.line = hex.AppendEncode(w.line, msg)
	w.line = append(w.line, '\n')
	if w.written+int64(len(w.line)) > w.max {
		note := fmt.Sprintf("# capture stopped: the next message would pass the limit of %d bytes (--capture-max-bytes); later messages are counted, not written\n", w.max)
		w.written = w.max // nothing more, not even when the note does not fit
		w.dropped++
		_, _ = w.f.Write([]byte(note))
		return
	}
	if err := w.write(w.line); err != nil {
		w.written = w.max // a failing file is full
		w.dropped++
		return
	}
	w.frames++
}

// appendConnID writes a connection id as one field: "-" when empty, and any byte outside
// [A-Za-z0-9._:-] replaced by '_' (the peer learns its id from the hub, which could send
// anything).
func appendConnID(dst []byte, id string) []byte {
	if id == "" {
		return append(dst, '-')
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-' {
			dst = append(dst, c)
		} else {
			dst = append(dst, '_')
		}
	}
	return dst
}

// Stats returns how many messages were written and how many were dropped.
func (w *Writer) Stats() (written, dropped int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.frames, w.dropped
}

// Close writes a last comment line with the counts and closes the file. Later Taps only
// count. Idempotent.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	_, _ = fmt.Fprintf(w.f, "# capture ended %s: %d messages written, %d dropped\n", stamp(w.now()), w.frames, w.dropped)
	return w.f.Close()
}

// Line is one line of a capture file, as ParseLine reads it.
type Line struct {
	Time         string // as written; empty for a bare hex line
	Direction    string // In or Out; empty for a bare hex line
	ConnectionID string // "-" when the connection had no id yet; empty for a bare hex line
	Hex          []byte // the message, still hex-encoded
}

// ErrComment is ParseLine's answer for a comment line.
var ErrComment = errors.New("framecap: comment line")

// ParseLine reads one line of a capture file — or a bare line of hex, the form nmcr reads
// elsewhere — without decoding the hex. A comment is ErrComment.
func ParseLine(line []byte) (Line, error) {
	line = bytes.TrimSpace(line)
	if len(line) > 0 && line[0] == '#' {
		return Line{}, ErrComment
	}
	fields := bytes.Fields(line)
	switch len(fields) {
	case 1:
		return Line{Hex: fields[0]}, nil
	case 4:
		dir := string(fields[1])
		if dir != In && dir != Out {
			return Line{}, fmt.Errorf("direction %q: want in or out", dir)
		}
		if _, err := time.Parse(time.RFC3339Nano, string(fields[0])); err != nil {
			return Line{}, fmt.Errorf("time %q is not an RFC 3339 timestamp", fields[0])
		}
		return Line{Time: string(fields[0]), Direction: dir, ConnectionID: string(fields[2]), Hex: fields[3]}, nil
	}
	return Line{}, fmt.Errorf("want a line of hex, or TIME in|out CONNECTION-ID HEX (%d fields)", len(fields))
}
