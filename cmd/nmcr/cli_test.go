package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nomicore/nomicore/node/framecap"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/yjs"
)

// The same updates as hex lines, base64 lines, an event stream and raw bytes give the same
// document, detected or named with --in.
func TestDocReadsEveryForm(t *testing.T) {
	doc := yjs.NewDoc()
	var updates [][]byte
	unsub := doc.OnUpdate(func(u []byte, _ any) { updates = append(updates, append([]byte(nil), u...)) })
	doc.GetMap("notes").Set("greeting", "hello")
	doc.GetMap("notes").Set("answer", 42.0)
	unsub()
	state, err := yjs.EncodeStateAsUpdate(doc, nil)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"notes":{"answer":42,"greeting":"hello"}}` + "\n"
	var hexLines, b64Lines, sse strings.Builder
	sse.WriteString(": nomicore events\n\n")
	for _, u := range updates {
		hexLines.WriteString(hex.EncodeToString(u) + "\n")
		b64Lines.WriteString(base64.StdEncoding.EncodeToString(u) + "\n")
		sse.WriteString("data: " + base64.StdEncoding.EncodeToString(u) + "\n\n")
	}
	sse.WriteString(": keep-alive\n\nevent: overflow\ndata: \n\n")
	stateSSE := "event: state\ndata: " + base64.StdEncoding.EncodeToString(state) + "\n\n"
	for _, tc := range []struct {
		name, input string
		args        []string
	}{
		{"hex lines", hexLines.String(), nil},
		{"base64 lines", b64Lines.String(), nil},
		{"url-safe base64 without padding", base64.RawURLEncoding.EncodeToString(state), nil},
		{"event stream", sse.String(), nil},
		{"event stream with state", stateSSE, nil},
		{"binary", string(state), nil},
		{"binary named", string(state), []string{"--in", "binary"}},
		{"hex named", hexLines.String(), []string{"--in", "hex"}},
		{"event stream named base64", sse.String(), []string{"--in", "base64"}},
	} {
		code, out, errs := runNmcr(t, tc.input, nil, append([]string{"doc", "json"}, tc.args...)...)
		if code != 0 || out != want {
			t.Errorf("%s: exit %d %q (stderr %q), want %q", tc.name, code, out, errs, want)
		}
	}
	// A named form that does not fit is an error naming the line, not a wrong document.
	if code, out, errs := runNmcr(t, b64Lines.String(), nil, "doc", "json", "--in", "hex"); code != 1 || out != "" || !strings.Contains(errs, "line 1: not hex") {
		t.Errorf("base64 read as hex: %d %q %q", code, out, errs)
	}
	if code, _, errs := runNmcr(t, hexLines.String(), nil, "doc", "json", "--in", "yaml"); code != 2 || !strings.Contains(errs, `--in "yaml": want hex, base64 or binary`) {
		t.Errorf("bad --in: %d %q", code, errs)
	}
}

// A capture file as the binaries write it decodes line by line, each JSON line led by the
// capture's time, direction and connection id; comments are skipped.
func TestFrameDecodeReadsACaptureFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "frames.txt")
	at := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	w, err := framecap.Create(path, "peer peer-a", 0, func() time.Time { return at })
	if err != nil {
		t.Fatal(err)
	}
	cfg := protocol.DefaultConfig()
	codec := protocol.NewCodec(cfg.Limits(), 0)
	ns := protocol.MustNamespaceID("ns-0123456789abcdef0123456789abcdef")
	open, _ := codec.AppendFrame(nil, 3, &protocol.OpenNamespace{NamespaceID: ns})
	ack, _ := codec.AppendFrame(nil, 4, &protocol.UpdateAck{NamespaceID: ns, AckedSequence: 9})
	w.Tap("c-7", true, open)
	w.Tap("c-7", false, ack)
	w.Tap("c-7", false, []byte("NMCR?"))
	w.Close()
	data, _ := os.ReadFile(path)
	var out, errb bytes.Buffer
	code := run([]string{"frame", "decode"}, bytes.NewReader(data), &out, &errb)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if code != 0 || len(lines) != 3 {
		t.Fatalf("exit %d, %d lines: %s (stderr %s)", code, len(lines), out.String(), errb.String())
	}
	var first, second, third map[string]any
	for i, v := range []*map[string]any{&first, &second, &third} {
		if err := json.Unmarshal([]byte(lines[i]), v); err != nil {
			t.Fatalf("line %d %q: %v", i+1, lines[i], err)
		}
	}
	if !strings.HasPrefix(lines[0], `{"time":"2026-12-01T09:30:00.000Z","direction":"out","connectionId":"c-7","type":"OPEN_NAMESPACE","sequence":3,`) {
		t.Errorf("first line %s", lines[0])
	}
	if second["direction"] != "in" || second["type"] != "UPDATE_ACK" || second["sequence"] != 4.0 {
		t.Errorf("second line %s", lines[1])
	}
	if third["connectionId"] != "c-7" || third["error"] == nil || third["type"] != nil {
		t.Errorf("a capture line that is no frame: %s", lines[2])
	}
	// A line that is neither hex nor a capture line: status 1, and the others still decode.
	code = run([]string{"frame", "decode"}, strings.NewReader("one two\n"+hex.EncodeToString(open)+"\n"), &out, &errb)
	if code != 1 {
		t.Errorf("a bad line: exit %d", code)
	}
}

// `nmcr store export` of an empty document prints the empty update, which nmcr doc reads.
func TestStoreExportOfAnEmptyDocument(t *testing.T) {
	dir := makeStore(t)
	code, out, errs := runCmd(t, "store", "export", dir, "ns-d") // reset: its replica is gone
	if code != 1 {
		t.Fatalf("a reset namespace: %d %q %q", code, out, errs)
	}
	dir = emptyDocStore(t)
	code, out, errs = runCmd(t, "store", "export", dir, "ns-e")
	if code != 0 || out != "0000\n" {
		t.Fatalf("empty document: %d %q %q", code, out, errs)
	}
	if code, out, _ := runNmcr(t, out, nil, "doc", "json"); code != 0 || out != "{}\n" {
		t.Fatalf("its JSON: %d %q", code, out)
	}
}

// The command-line shape: help lists the commands, every command answers -h on stdout with
// status 0, a mistake is one line naming the help, --version names the module.
func TestCommandLine(t *testing.T) {
	code, out, _ := runCmd(t, "-h")
	for _, want := range []string{"\n  frame ", "\n  doc ", "\n  store ", "\n  version "} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("nmcr -h: %d, no %q in %q", code, want, out)
		}
	}
	for _, args := range [][]string{{"frame", "-h"}, {"frame", "decode", "-h"}, {"frame", "encode", "-h"}, {"doc", "-h"},
		{"doc", "json", "-h"}, {"doc", "sv", "-h"}, {"doc", "state", "-h"}, {"doc", "merge", "-h"}, {"store", "--help"},
		{"store", "ls", "-h"}, {"store", "export", "-h"}, {"help", "store"}} {
		code, out, errs := runCmd(t, args...)
		if code != 0 || errs != "" || !strings.HasPrefix(out, "usage: nmcr") && !strings.Contains(out, "usage: nmcr") || strings.Contains(out, "§") {
			t.Errorf("%v: %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"doc", "json", "--bogus"}, `nmcr doc json: unknown flag --bogus; see "nmcr doc json -h"`},
		{[]string{"frobnicate"}, `nmcr: unknown command "frobnicate" (want frame, doc, store or version); see "nmcr -h"`},
		{[]string{"store", "ls"}, `nmcr store ls: the store's PATH is required; see "nmcr store ls -h"`},
		{[]string{"store", "export", "x"}, `nmcr store export: the NAMESPACE to export is required`},
		{[]string{"frame", "decode", "x"}, `unexpected argument "x"`},
		{[]string{"doc"}, `nmcr doc: a command is required; see "nmcr doc -h"`},
	} {
		code, out, errs := runCmd(t, tc.args...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: %d %q %q, want one line %q", tc.args, code, out, errs, tc.want)
		}
	}
	for _, arg := range []string{"--version", "-v", "version"} {
		if code, out, _ := runCmd(t, arg); code != 0 || !strings.HasPrefix(out, "nmcr ") || !strings.Contains(out, "go1") {
			t.Errorf("%s: %d %q", arg, code, out)
		}
	}
}

// emptyDocStore writes a data dir with one namespace whose document is empty.
func emptyDocStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	st, err := persistence.OpenDataDir(dir, persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateEntry(ctx, persistence.Entry{NamespaceID: "ns-e", Owner: "default", CreatedAt: time.Unix(0, 0)}, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return dir
}
