package framecap

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomicore/nomicore/replication/protocol"
)

var t0 = time.Date(2026, 12, 1, 14, 13, 47, 848_000_000, time.UTC)

func fixedNow() time.Time { return t0 }

func limits() protocol.Limits {
	c := protocol.DefaultConfig()
	return c.Limits()
}

func frame(t *testing.T, seq uint32, m protocol.Message) []byte {
	t.Helper()
	b, err := protocol.NewCodec(limits(), protocol.KnownCapabilities).AppendFrame(nil, seq, m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Each message is one line, TIME DIR CONN HEX, that ParseLine reads back; the file is 0600
// and ends with the counts.
func TestWriterLinesParseBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "frames.txt")
	w, err := Create(path, "hub", 0, fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	ns := protocol.MustNamespaceID("ns-0123456789abcdef0123456789abcdef")
	open := frame(t, 1, &protocol.OpenNamespace{NamespaceID: ns})
	update := frame(t, 2, &protocol.Update{NamespaceID: ns, Update: []byte{0, 0}})
	w.Tap("c-1f", false, open)
	w.Tap("", true, update)
	w.Tap("c d\n\x01", true, []byte{1, 2}) // not a frame, a hostile id: still one line
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w.Tap("c-1f", true, open) // after Close: counted only
	if n, d := w.Stats(); n != 3 || d != 1 {
		t.Fatalf("stats %d written %d dropped", n, d)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode().Perm())
	}
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "# nomicore frame capture: hub, started 2026-12-01T14:13:47.848Z") ||
		!strings.HasPrefix(lines[4], "# capture ended 2026-12-01T14:13:47.848Z: 3 messages written, 0 dropped") {
		t.Fatalf("file:\n%s", data)
	}
	want := []Line{
		{"2026-12-01T14:13:47.848Z", In, "c-1f", []byte(hex.EncodeToString(open))},
		{"2026-12-01T14:13:47.848Z", Out, "-", []byte(hex.EncodeToString(update))},
		{"2026-12-01T14:13:47.848Z", Out, "c_d__", []byte("0102")},
	}
	for i, l := range lines[1:4] {
		got, err := ParseLine([]byte(l))
		if err != nil || got.Time != want[i].Time || got.Direction != want[i].Direction || got.ConnectionID != want[i].ConnectionID || !bytes.Equal(got.Hex, want[i].Hex) {
			t.Errorf("line %d %q parsed as %+v, %v; want %+v", i+1, l, got, err, want[i])
		}
	}
	if _, err := ParseLine([]byte(lines[0])); !errors.Is(err, ErrComment) {
		t.Errorf("header: %v", err)
	}
	if l, err := ParseLine([]byte(" abcd \r")); err != nil || string(l.Hex) != "abcd" || l.Direction != "" {
		t.Errorf("bare hex: %+v %v", l, err)
	}
	for _, bad := range []string{"a b", "now in c-1 00", "2026-12-01T14:13:47.848Z sideways c-1 00"} {
		if _, err := ParseLine([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// The limit: the file never grows past it; one note says the capture stopped; the rest is
// counted.
func TestWriterStopsAtItsLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "frames.txt")
	const limit = 1000
	w, err := Create(path, "peer-a", limit, fixedNow)
	if err != nil {
		t.Fatal(err)
	}
	msg := bytes.Repeat([]byte{0xab}, 100) // a 200-character hex field: ~230 bytes a line
	for range 20 {
		w.Tap("c-1", true, msg)
	}
	written, dropped := w.Stats()
	w.Close()
	data, _ := os.ReadFile(path)
	header := strings.SplitN(string(data), "\n", 2)[0]
	if written == 0 || written+dropped != 20 || dropped < 15 {
		t.Fatalf("%d written, %d dropped", written, dropped)
	}
	body := data[:bytes.Index(data, []byte("# capture stopped"))]
	if len(body) > limit || int64(strings.Count(string(body), "\n")) != written+1 {
		t.Fatalf("%d bytes before the stop note (limit %d), %d lines for %d messages (+ header %q)", len(body), limit, strings.Count(string(body), "\n"), written, header)
	}
	if strings.Count(string(data), "# capture stopped") != 1 || !strings.Contains(string(data), fmt.Sprintf("%d dropped", dropped)) {
		t.Fatalf("file:\n%s", data)
	}
}

// Taps from many goroutines (a connection's reader and writer, many connections) interleave
// whole lines.
func TestWriterConcurrentTapsWriteWholeLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "frames.txt")
	w, _ := Create(path, "hub", 0, nil)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				w.Tap(fmt.Sprintf("c-%d", g), i%2 == 0, bytes.Repeat([]byte{byte(g)}, 50+i))
			}
		}()
	}
	wg.Wait()
	w.Close()
	data, _ := os.ReadFile(path)
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		pl, err := ParseLine([]byte(l))
		if err != nil {
			t.Fatalf("torn line %q: %v", l, err)
		}
		b, err := hex.DecodeString(string(pl.Hex))
		if err != nil || len(b) < 50 || b[0] != pl.ConnectionID[2]-'0' {
			t.Fatalf("line %q does not hold its connection's message", l)
		}
		n++
	}
	if n != 1600 {
		t.Fatalf("%d lines, want 1600", n)
	}
}

// At debug, LogTap logs each message's type, sequence, size and namespace, never its bytes;
// at info it is not installed.
func TestLogTap(t *testing.T) {
	var buf bytes.Buffer
	if LogTap(slog.New(slog.NewJSONHandler(&buf, nil)), limits()) != nil {
		t.Fatal("a tap at level info")
	}
	tap := LogTap(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), limits())
	ns := protocol.MustNamespaceID("ns-0123456789abcdef0123456789abcdef")
	secret := []byte("SECRET-DOC-BYTES")
	tap("c-9", true, frame(t, 7, &protocol.Update{NamespaceID: ns, Update: secret}))
	tap("c-9", false, []byte("junk"))
	tap("c-9", false, frame(t, 8, &protocol.Presence{NamespaceID: ns, Awareness: []byte{0}})) // the presence extension's
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines: %s", len(lines), buf.String())
	}
	var first, second map[string]any
	json.Unmarshal([]byte(lines[0]), &first)
	json.Unmarshal([]byte(lines[1]), &second)
	if first["msg"] != "frame" || first["level"] != "DEBUG" || first["frameType"] != "UPDATE" || first["sequence"] != 7.0 ||
		first["direction"] != Out || first["namespaceId"] != ns.String() || first["connectionId"] != "c-9" {
		t.Errorf("update line %v", first)
	}
	if second["error"] != string(protocol.CodeMalformedFrame) && second["error"] != "BAD_MAGIC" || second["direction"] != In {
		t.Errorf("junk line %v", second)
	}
	var third map[string]any
	json.Unmarshal([]byte(lines[2]), &third)
	if third["frameType"] != "PRESENCE" || third["error"] != nil {
		t.Errorf("presence line %v", third)
	}
	if strings.Contains(buf.String(), string(secret)) || strings.Contains(buf.String(), hex.EncodeToString(secret)) {
		t.Fatal("document bytes in the log")
	}
}
