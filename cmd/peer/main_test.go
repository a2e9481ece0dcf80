package main

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nomicore/nomicore/internal/testkit"
)

func runPeerCmd(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, func(k string) string { return env[k] }, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsageAndRefusals(t *testing.T) {
	if code, out, _ := runPeerCmd(t, nil, "help"); code != 0 || !strings.Contains(out, "\n  write ") || !strings.Contains(out, "\n  run ") {
		t.Fatalf("help: %d %q", code, out)
	}
	if code, _, errOut := runPeerCmd(t, nil, "frobnicate"); code != 2 || errOut != "peer: unknown command \"frobnicate\" (want run, write, token or version); see \"peer -h\"\n" {
		t.Fatalf("unknown command: %d %q", code, errOut)
	}
	for _, args := range [][]string{{"-h"}, {"run", "-h"}, {"--help"}, {"write", "-h"}, {"token", "-h"}, {"token", "add", "-h"}} {
		code, out, errOut := runPeerCmd(t, nil, args...)
		if code != 0 || errOut != "" || strings.Contains(out, "§") || strings.Contains(out, "GUIDE") {
			t.Errorf("%v: %d %q", args, code, errOut)
		}
	}
	if code, _, errOut := runPeerCmd(t, nil, "--bogus"); code != 2 || errOut != "peer run: unknown flag --bogus; see \"peer run -h\"\n" {
		t.Errorf("unknown flag: %d %q", code, errOut)
	}
	for _, arg := range []string{"--version", "-v", "version"} {
		if code, out, _ := runPeerCmd(t, nil, arg); code != 0 || !strings.HasPrefix(out, "peer ") {
			t.Errorf("%s: %d %q", arg, code, out)
		}
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"run", "--data", dir}, nil, "no token"},
		{[]string{"--data", dir, "--target", "ns-1"}, map[string]string{"NOMICORE_TOKEN": "t"}, "--target"},
		{[]string{"--data", dir, "--hub-ca-file", filepath.Join(dir, "none")}, map[string]string{"NOMICORE_TOKEN": "t"}, "--hub-ca-file"},
		{[]string{"--data", dir, "--token-poll", "0s"}, map[string]string{"NOMICORE_TOKEN": "t"}, "--token-poll"},
		{[]string{"--data", dir, "--hub-instance-id", "-"}, map[string]string{"NOMICORE_TOKEN": "t"}, "--hub-instance-id"},
	} {
		code, _, errOut := runPeerCmd(t, tc.env, tc.args...)
		if code != 1 || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: %d %q; want one line naming %s", tc.args, code, errOut, tc.want)
		}
	}
}

// A second client token for a name is refused with the whole command that removes the
// first — run as printed, it works, and the name can be added again.
func TestClientTokenSuggestionsRun(t *testing.T) {
	data := filepath.Join(t.TempDir(), "peer a") // a path the suggestion must quote
	if code, _, errOut := runPeerCmd(t, nil, "token", "add", "--data", data, "--client", "me"); code != 0 {
		t.Fatalf("token add: %d %q", code, errOut)
	}
	code, _, errOut := runPeerCmd(t, nil, "token", "add", "--data", data, "--client", "me")
	want := "peer token remove --data '" + data + "' --client me"
	if code != 1 || !strings.Contains(errOut, "("+want+";") {
		t.Fatalf("second token add: %d %q; want it to suggest %q", code, errOut, want)
	}
	// The suggestion, as a shell would split it.
	if code, _, errOut := runPeerCmd(t, nil, "token", "remove", "--data", data, "--client", "me"); code != 0 {
		t.Fatalf("%s: %d %q", want, code, errOut)
	}
	if code, _, errOut := runPeerCmd(t, nil, "token", "add", "--data", data, "--client", "me"); code != 0 {
		t.Fatalf("adding it again: %d %q", code, errOut)
	}
	code, _, errOut = runPeerCmd(t, nil, "token", "remove", "--data", data, "--client", "nobody")
	if code != 1 || !strings.Contains(errOut, "(peer token list --data '"+data+"' shows them)") {
		t.Fatalf("removing an unknown client: %d %q", code, errOut)
	}
}

// The token watch: it records the hash of the token of each dial and reports a changed
// token file.
func TestTokenWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tok")
	os.WriteFile(path, []byte("one\n"), 0o600)
	tw := &tokenWatch{inner: func() (string, error) { b, err := os.ReadFile(path); return strings.TrimSpace(string(b)), err }, file: path}
	if !tw.changed() {
		t.Fatal("before any dial the file counts as changed")
	}
	if tok, err := tw.source(); err != nil || tok != "one" {
		t.Fatal(tok, err)
	}
	if h := tw.lastUsed.Load(); h == nil || *h != sha256.Sum256([]byte("one")) {
		t.Fatal("the dialed token's hash was not recorded")
	}
	if tw.changed() {
		t.Fatal("an unchanged token file counts as changed")
	}
	os.WriteFile(path, []byte("two"), 0o600)
	if !tw.changed() {
		t.Fatal("a new token is not noticed")
	}
}

// TestHubURLs: --hub-url repeats (or takes a comma-separated list, as NOMICORE_HUB_URL
// does), keeps its order, refuses a malformed or repeated URL, and on the command line
// replaces the environment's list; without either it is the default.
func TestHubURLs(t *testing.T) {
	const a, b, c = "ws://a:1/v1/replication", "wss://b:2/v1/replication", "ws://c:3/v1/replication"
	for _, tc := range []struct {
		env     string
		args    []string
		want    []string
		wantErr string
	}{
		{"", nil, []string{defaultHubURL}, ""},
		{"", []string{a}, []string{a}, ""},
		{"", []string{a, b + "," + c}, []string{a, b, c}, ""},
		{a + "," + b, nil, []string{a, b}, ""},
		{a + "," + b, []string{c}, []string{c}, ""},
		{"", []string{a, a}, nil, "twice"},
		{"", []string{"http://x/v1/replication"}, nil, "want ws://"},
		{"", []string{"ws:///v1/replication"}, nil, "want ws://"},
	} {
		var h hubURLs
		if tc.env != "" {
			must(t, h.Set(tc.env))
		}
		for _, v := range tc.args {
			must(t, h.Set(v))
		}
		got, err := h.list(tc.env != "")
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q %v: %v, want an error naming %q", tc.env, tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q %v: %v %v, want %v", tc.env, tc.args, got, err, tc.want)
		}
	}
	var h hubURLs
	if err := h.Set(" , "); err == nil {
		t.Error("an empty --hub-url accepted")
	}
}

// must fails the test at once when err is not nil.
var must = testkit.Must
