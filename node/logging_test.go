package node

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/nomicore/nomicore/observer"
)

// --log-format: JSON or text as asked; by default text on a terminal, JSON elsewhere.
func TestNewLoggerFormat(t *testing.T) {
	var buf bytes.Buffer
	NewLogger(&buf, "info", "json", "hub").Info("hello", "k", 1)
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil || m["component"] != "hub" || m["msg"] != "hello" {
		t.Fatalf("json: %q %v", buf.String(), err)
	}
	buf.Reset()
	NewLogger(&buf, "info", "text", "peer").Info("hello", "k", 1)
	if line := buf.String(); !strings.Contains(line, "level=INFO msg=hello component=peer k=1") {
		t.Fatalf("text: %q", line)
	}
	buf.Reset()
	NewLogger(&buf, "info", "", "hub").Info("hello") // a buffer is not a terminal
	if !strings.HasPrefix(buf.String(), "{") {
		t.Fatalf("default for a non-terminal: %q", buf.String())
	}
	if IsTerminal(&buf) {
		t.Fatal("a buffer is a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) {
		t.Fatal("a regular file is a terminal")
	}
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		defer tty.Close()
		if !IsTerminal(tty) {
			t.Fatal("/dev/tty is not a terminal")
		}
	}
	buf.Reset()
	NewLogger(&buf, "warn", "json", "hub").Info("dropped")
	if buf.Len() != 0 {
		t.Fatalf("level warn logged info: %q", buf.String())
	}
}

// At debug, every per-frame event is also a line of its own; at info it is only counted.
func TestDebugLogsPerFrameEvents(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		var buf bytes.Buffer
		o, err := NewObservability(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level})), observer.SideHub)
		if err != nil {
			t.Fatal(err)
		}
		o.Observer.Observe(observer.Event{Side: observer.SideHub, Payload: observer.UpdateApplied{NamespaceID: "ns-0123456789abcdef0123456789abcdef", Bytes: 12, Sequence: 5}})
		line := buf.String()
		if level == slog.LevelDebug {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil || m["level"] != "DEBUG" || m["msg"] != "update-applied" || m["type"] != "update-applied" || m["bytes"] != 12.0 {
				t.Fatalf("debug: %q", line)
			}
		} else if line != "" {
			t.Fatalf("info: %q", line)
		}
	}
}

// --capture-frames refuses to start while the replication layer hands no message to it
// (rather than writing a file that stays empty); its size limit must be positive.
func TestCaptureFlags(t *testing.T) {
	c, _, ok := parse(t, []string{"--capture-frames", "/tmp/frames.txt"}, nil)
	if !ok {
		t.Fatal("parse failed")
	}
	err := c.Resolve()
	if frameHookAvailable {
		if err != nil {
			t.Fatalf("with the hook: %v", err)
		}
	} else if err == nil || !strings.Contains(err.Error(), "--capture-frames: this build cannot capture frames yet") {
		t.Fatalf("without the hook: %v", err)
	}
	c, _, _ = parse(t, []string{"--capture-max-bytes", "0"}, nil)
	if err := c.Resolve(); err == nil || !strings.Contains(err.Error(), "--capture-max-bytes") {
		t.Fatalf("a zero limit: %v", err)
	}
}
