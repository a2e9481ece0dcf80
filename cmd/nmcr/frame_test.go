package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/nomicore/nomicore/internal/testkit"
)

type frameGolden struct {
	Name  string          `json:"name"`
	Frame json.RawMessage `json:"frame"`
	Hex   string          `json:"hex"`
}

type frameBad struct {
	Name              string `json:"name"`
	Hex               string `json:"hex"`
	Chunked           bool   `json:"chunked"`
	MaxFrameBytes     int    `json:"maxFrameBytes"`
	MaxUpdateBytes    int    `json:"maxUpdateBytes"`
	MaxSyncDiffBytes  int    `json:"maxSyncDiffBytes"`
	MaxBootstrapBytes int    `json:"maxBootstrapBytes"`
	Error             string `json:"error"`
}

func frameLoad(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile("../../testdata/golden/" + name)
	if err != nil {
		t.Fatalf("golden vectors: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// frameRun runs `nmcr frame args…` in-process.
func frameRun(t *testing.T, input string, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	var out, errb bytes.Buffer
	status = run(append([]string{"frame"}, args...), strings.NewReader(input), &out, &errb)
	return out.String(), errb.String(), status
}

// TestFrameGoldenRoundTrip: every golden frame decodes to its frame JSON through the command,
// and the JSON lines encode back to the same hex (blank lines ignored).
func TestFrameGoldenRoundTrip(t *testing.T) {
	var g struct{ Vectors []frameGolden }
	frameLoad(t, "frames.json", &g)
	var in strings.Builder
	for _, v := range g.Vectors {
		fmt.Fprintf(&in, "%s\n\n", v.Hex)
	}
	out, errs, status := frameRun(t, in.String(), "decode", "--chunked")
	if status != 0 || errs != "" {
		t.Fatalf("decode: status %d, %s", status, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(g.Vectors) {
		t.Fatalf("%d output lines for %d frames", len(lines), len(g.Vectors))
	}
	for i, v := range g.Vectors {
		if !testkit.SameJSON(t, []byte(lines[i]), v.Frame) {
			t.Errorf("%s: decoded %s\nwant %s", v.Name, lines[i], v.Frame)
		}
	}
	hexOut, errs, status := frameRun(t, out, "encode")
	if status != 0 || errs != "" {
		t.Fatalf("encode: status %d, %s", status, errs)
	}
	for i, h := range strings.Split(strings.TrimSuffix(hexOut, "\n"), "\n") {
		if h != g.Vectors[i].Hex {
			t.Errorf("%s: encoded %s\nwant %s", g.Vectors[i].Name, h, g.Vectors[i].Hex)
		}
	}
}

// TestFrameGoldenBadFrames: every bad vector prints its code, and the command goes on.
func TestFrameGoldenBadFrames(t *testing.T) {
	var g struct{ Vectors []frameBad }
	frameLoad(t, "bad-frames.json", &g)
	for _, v := range g.Vectors {
		args := []string{"decode",
			fmt.Sprintf("--max-frame-bytes=%d", v.MaxFrameBytes), fmt.Sprintf("--max-update-bytes=%d", v.MaxUpdateBytes),
			fmt.Sprintf("--max-sync-diff-bytes=%d", v.MaxSyncDiffBytes), fmt.Sprintf("--max-bootstrap-bytes=%d", v.MaxBootstrapBytes)}
		if v.Chunked {
			args = append(args, "--chunked")
		}
		// An empty message is an empty line, which the command skips: send it between
		// two valid frames to see the skip, and check the others' code.
		good := "4e4d43520141000000000001000000250000000023" + hex.EncodeToString([]byte("ns-0123456789abcdef0123456789abcdef")) + "05"
		out, _, status := frameRun(t, v.Hex+"\n"+good+"\n", args...)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if v.Hex == "" {
			if len(lines) != 1 || status != 0 {
				t.Errorf("%s: blank line not skipped: %q", v.Name, out)
			}
			continue
		}
		if status != 0 || len(lines) != 2 || lines[0] != `{"error":"`+v.Error+`"}` || !strings.HasPrefix(lines[1], `{"type":"UPDATE_ACK"`) {
			t.Errorf("%s: status %d, output %q, want %s then the next frame", v.Name, status, out, v.Error)
		}
	}
}

func TestFrameLongLinesAndLimits(t *testing.T) {
	// A 2 MB state vector (a 4 MB hex line) with a raised limit.
	ns := hex.EncodeToString([]byte("ns-0123456789abcdef0123456789abcdef"))
	sv := strings.Repeat("ab", 2_000_000)
	payloadLen := 36 + 1 + 3 + 2_000_000
	frame := fmt.Sprintf("4e4d43520130000000000001%08x0000000023%s01%s%s", payloadLen, ns, "80897a", sv)
	out, errs, status := frameRun(t, frame, "decode", "--max-frame-bytes", "3000000")
	if status != 0 || !strings.Contains(out, `"stateVector":"abab`) {
		t.Fatalf("long line: status %d %s %.200s", status, errs, out)
	}
	out, _, status = frameRun(t, frame, "decode")
	if status != 0 || out != `{"error":"FRAME_TOO_LARGE"}`+"\n" {
		t.Fatalf("default limit: %q", out)
	}
	t.Setenv("NOMICORE_MAX_FRAME_BYTES", "3000000")
	if out, _, _ = frameRun(t, frame, "decode"); !strings.Contains(out, `"type":"SYNC_STEP1"`) {
		t.Fatalf("NOMICORE_MAX_FRAME_BYTES not read: %.100s", out)
	}
}

func TestFrameUsageAndBadInput(t *testing.T) {
	if _, _, status := frameRun(t, ""); status != 2 {
		t.Error("no subcommand")
	}
	if _, _, status := frameRun(t, "", "bogus"); status != 2 {
		t.Error("unknown subcommand")
	}
	if _, _, status := frameRun(t, "", "decode", "--nope"); status != 2 {
		t.Error("unknown flag")
	}
	out, errs, status := frameRun(t, "zz\n", "decode")
	if status != 1 || out != `{"error":"MALFORMED_FRAME"}`+"\n" || !strings.Contains(errs, "line 1") {
		t.Errorf("non-hex line: %d %q %q", status, out, errs)
	}
	out, _, status = frameRun(t, "{\n", "encode")
	if status != 1 || out != `{"error":"MALFORMED_FRAME"}`+"\n" {
		t.Errorf("non-JSON line: %d %q", status, out)
	}
	// Valid JSON with a field the encoder refuses: classified, status 0.
	big := strings.Repeat("00", 600<<10)
	line := `{"type":"UPDATE","sequence":1,"payload":{"namespaceId":"ns-0123456789abcdef0123456789abcdef","update":"` + big + `"}}`
	out, _, status = frameRun(t, line+"\n", "encode")
	if status != 0 || out != `{"error":"UPDATE_TOO_LARGE"}`+"\n" {
		t.Errorf("oversize update: %d %q", status, out)
	}
}
