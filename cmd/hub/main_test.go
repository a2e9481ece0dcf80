package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nomicore/nomicore/internal/tokens"
)

func runHub(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, func(k string) string { return env[k] }, &out, &errb)
	return code, out.String(), errb.String()
}

func TestTokenCommands(t *testing.T) {
	data := t.TempDir()
	code, out, errOut := runHub(t, nil, "token", "add", "--data", data, "--peer", "peer-a", "--namespace", "ns-0123456789abcdef0123456789abcdef", "--read-only")
	tok := strings.TrimSpace(out)
	if code != 0 || len(tok) != 43 || strings.Contains(errOut, tok) {
		t.Fatalf("token add: %d %q %q", code, out, errOut)
	}
	file, _ := os.ReadFile(filepath.Join(data, tokens.FileName))
	if strings.Contains(string(file), tok) || !strings.Contains(string(file), `"submit":false`) {
		t.Fatalf("tokens file: %s", file)
	}
	// The data dir from the environment, as every flag.
	if code, _, errOut := runHub(t, map[string]string{"NOMICORE_DATA": data}, "token", "add", "--peer", "peer-b"); code != 0 {
		t.Fatalf("token add with NOMICORE_DATA: %d %s", code, errOut)
	}
	code, out, _ = runHub(t, nil, "token", "list", "--data", data)
	if code != 0 || !strings.Contains(out, "peer-a\tsha256:") || !strings.Contains(out, "\tread\t") || !strings.Contains(out, "peer-b") {
		t.Fatalf("token list: %d %q", code, out)
	}
	if code, _, errOut := runHub(t, nil, "token", "remove", "--data", data, "--peer", "peer-z"); code != 1 || !strings.Contains(errOut, "no token of peer-z") {
		t.Fatalf("removing nothing: %d %q", code, errOut)
	}
	if code, _, _ := runHub(t, nil, "token", "remove", "--data", data, "--peer", "peer-a"); code != 0 {
		t.Fatalf("token remove: %d", code)
	}
	if entries, _, _ := tokens.Read(filepath.Join(data, tokens.FileName)); len(entries) != 1 || entries[0].PeerInstanceID != "peer-b" {
		t.Fatalf("left %+v", entries)
	}
	if code, _, errOut := runHub(t, nil, "token", "add", "--data", data, "--peer", "Bad Peer"); code != 1 || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("bad peer id: %d %q", code, errOut)
	}
}

func TestUsage(t *testing.T) {
	if code, out, _ := runHub(t, nil, "help"); code != 0 || !strings.Contains(out, "hub token add") {
		t.Fatalf("help: %d %q", code, out)
	}
	if code, _, errOut := runHub(t, nil, "frobnicate"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Fatalf("unknown command: %d %q", code, errOut)
	}
	if code, _, _ := runHub(t, nil, "token"); code != 2 {
		t.Fatalf("token without a subcommand: %d", code)
	}
	if code, _, _ := runHub(t, nil, "serve", "--no-such-flag"); code != 2 {
		t.Fatalf("an unknown flag: %d", code)
	}
	if code, _, errOut := runHub(t, nil, "--instance-id", "Hub!"); code != 1 || !strings.Contains(errOut, "--instance-id") {
		t.Fatalf("bare hub with a bad instance id: %d %q", code, errOut)
	}
}
