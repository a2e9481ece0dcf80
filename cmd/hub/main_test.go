package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nomicore/nomicore/internal/tokens"
	"github.com/nomicore/nomicore/replication/ws"
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

// A second `token add` for the same peer is refused and says how to rotate; `token rotate`
// prints a new token once and the old one no longer authenticates.
func TestTokenAddTwiceAndRotate(t *testing.T) {
	data := t.TempDir()
	file := filepath.Join(data, tokens.FileName)
	code, out, _ := runHub(t, nil, "token", "add", "--data", data, "--peer", "peer-a")
	old := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("token add: %d", code)
	}
	code, out, errOut := runHub(t, nil, "token", "add", "--data", data, "--peer", "peer-a")
	if code != 1 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "peer-a already has a token (sha256:") ||
		!strings.Contains(errOut, "hub token rotate --peer peer-a") || !strings.Contains(errOut, "--additional") {
		t.Fatalf("second token add: %d %q %q", code, out, errOut)
	}
	if entries, _, _ := tokens.Read(file); len(entries) != 1 {
		t.Fatalf("%d entries after a refused add", len(entries))
	}
	code, out, errOut = runHub(t, nil, "token", "rotate", "--data", data, "--peer", "peer-a")
	fresh := strings.TrimSpace(out)
	if code != 0 || len(fresh) != 43 || fresh == old || strings.Contains(errOut, fresh) || !strings.Contains(errOut, "no longer valid") {
		t.Fatalf("token rotate: %d %q %q", code, out, errOut)
	}
	entries, _, _ := tokens.Read(file)
	table, _ := ws.NewTokenTable(entries)
	if _, err := table.Authenticate(context.Background(), old); err == nil {
		t.Fatal("the old token still authenticates after a rotation")
	}
	if id, err := table.Authenticate(context.Background(), fresh); err != nil || id.PeerInstanceID != "peer-a" {
		t.Fatalf("the new token: %v %v", id, err)
	}
	if code, _, errOut := runHub(t, nil, "token", "rotate", "--data", data, "--peer", "peer-z"); code != 1 || !strings.Contains(errOut, "peer-z has no token") {
		t.Fatalf("rotating a peer without a token: %d %q", code, errOut)
	}
	code, out, _ = runHub(t, nil, "token", "add", "--data", data, "--peer", "peer-a", "--additional")
	if code != 0 || len(strings.TrimSpace(out)) != 43 {
		t.Fatalf("token add --additional: %d %q", code, out)
	}
	if entries, _, _ := tokens.Read(file); len(entries) != 2 {
		t.Fatalf("%d entries after --additional, want 2", len(entries))
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
