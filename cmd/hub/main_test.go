package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/cluster"
)

func runHub(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb lockedBuffer
	code := run(args, func(k string) string { return env[k] }, &out, &errb)
	return code, out.String(), errb.String()
}

// lockedBuffer is a bytes.Buffer that goroutines may write at once, as they may os.Stderr:
// the hub's logger (a cluster node's goroutine among others) and its own error lines.
type lockedBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestTokenCommands(t *testing.T) {
	data := t.TempDir()
	code, out, errOut := runHub(t, nil, "token", "add", "--data", data, "--peer", "peer-a", "--namespace", "ns-0123456789abcdef0123456789abcdef", "--read-only")
	tok := strings.TrimSpace(out)
	if code != 0 || len(tok) != 43 || strings.Contains(errOut, tok) {
		t.Fatalf("token add: %d %q %q", code, out, errOut)
	}
	file, _ := os.ReadFile(filepath.Join(data, auth.FileName))
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
	if entries, _, _ := auth.Read(filepath.Join(data, auth.FileName)); len(entries) != 1 || entries[0].PeerInstanceID != "peer-b" {
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
	file := filepath.Join(data, auth.FileName)
	code, out, _ := runHub(t, nil, "token", "add", "--data", data, "--peer", "peer-a")
	old := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("token add: %d", code)
	}
	code, out, errOut := runHub(t, nil, "token", "add", "--data", data, "--peer", "peer-a")
	if code != 1 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "peer-a already has a token (sha256:") {
		t.Fatalf("second token add: %d %q %q", code, out, errOut)
	}
	if entries, _, _ := auth.Read(file); len(entries) != 1 {
		t.Fatalf("%d entries after a refused add", len(entries))
	}
	// The refusal names the two ways on, each a whole command; the rotation is run as printed.
	rotate, additional := suggested(t, errOut, "hub token rotate"), suggested(t, errOut, "hub token add --")
	if want := "hub token rotate --data " + data + " --peer peer-a"; strings.Join(rotate, " ") != want {
		t.Fatalf("the rotation suggested: %q, want %q", rotate, want)
	}
	if want := "hub token add --data " + data + " --peer peer-a --additional"; strings.Join(additional, " ") != want {
		t.Fatalf("the second token suggested: %q, want %q", additional, want)
	}
	code, out, errOut = runHub(t, nil, rotate[1:]...)
	fresh := strings.TrimSpace(out)
	if code != 0 || len(fresh) != 43 || fresh == old || strings.Contains(errOut, fresh) || !strings.Contains(errOut, "no longer valid") {
		t.Fatalf("token rotate: %d %q %q", code, out, errOut)
	}
	entries, _, _ := auth.Read(file)
	table, _ := auth.NewPeerTable(entries)
	if _, err := table.Authenticate(context.Background(), old); err == nil {
		t.Fatal("the old token still authenticates after a rotation")
	}
	if id, err := table.Authenticate(context.Background(), fresh); err != nil || id.PeerInstanceID != "peer-a" {
		t.Fatalf("the new token: %v %v", id, err)
	}
	if code, _, errOut := runHub(t, nil, "token", "rotate", "--data", data, "--peer", "peer-z"); code != 1 || !strings.Contains(errOut, "peer-z has no token") ||
		!strings.Contains(errOut, "hub token list --data "+data+" shows the tokens; hub token add --data "+data+" --peer peer-z creates one") {
		t.Fatalf("rotating a peer without a token: %d %q", code, errOut)
	}
	if code, _, errOut := runHub(t, nil, "token", "remove", "--data", data, "--peer", "peer-z"); code != 1 ||
		!strings.Contains(errOut, "hub token list --data "+data+" shows the tokens") {
		t.Fatalf("removing a peer without a token: %d %q", code, errOut)
	}
	// An editor's name has one token too; the way on is a whole command, run as printed.
	if code, _, _ := runHub(t, nil, "token", "add", "--data", data, "--client", "me"); code != 0 {
		t.Fatal("token add --client")
	}
	code, _, errOut = runHub(t, nil, "token", "add", "--data", data, "--client", "me")
	remove := suggested(t, errOut, "hub token remove")
	if want := "hub token remove --data " + data + " --client me"; code != 1 || strings.Join(remove, " ") != want {
		t.Fatalf("second client token add: %d %q; want it to suggest %q", code, errOut, want)
	}
	if code, _, errOut := runHub(t, nil, remove[1:]...); code != 0 {
		t.Fatalf("the suggested %q: %d %q", remove, code, errOut)
	}
	if code, _, errOut := runHub(t, nil, "token", "add", "--data", data, "--client", "me"); code != 0 {
		t.Fatalf("adding the client again after the suggested removal: %d %q", code, errOut)
	}
	// A client token that expires: the list says until when; --expires is for clients only.
	if code, out, errOut := runHub(t, nil, "token", "add", "--data", data, "--client", "guest", "--expires", "24h"); code != 0 ||
		len(strings.TrimSpace(out)) != 43 || !strings.Contains(errOut, "it expires at") {
		t.Fatalf("token add --expires: %d %q %q", code, out, errOut)
	}
	if code, out, _ := runHub(t, nil, "token", "list", "--data", data); code != 0 || !strings.Contains(out, "client:guest") ||
		!strings.Contains(out, "\texpires "+time.Now().Add(24*time.Hour).UTC().Format("2006-01-02")) {
		t.Fatalf("token list: %d %q", code, out)
	}
	// Another namespace for the same token, then read-only: the hash stays.
	const nsX, nsY = "ns-0123456789abcdef0123456789abcdef", "ns-fedcba9876543210fedcba9876543210"
	before, _, _ := auth.ReadFile(file)
	if code, _, errOut := runHub(t, nil, "token", "change", "--data", data, "--client", "guest", "--namespace", nsX+","+nsY, "--read-only"); code != 0 ||
		!strings.Contains(errOut, "now opens ["+nsX+" "+nsY+"], read-only") {
		t.Fatalf("token change: %d %q", code, errOut)
	}
	after, _, _ := auth.ReadFile(file)
	for i, c := range after.Clients {
		if c.Name == "guest" && (c.TokenSHA256 != before.Clients[i].TokenSHA256 || !c.ReadOnly || len(c.Namespaces) != 2) {
			t.Fatalf("after token change: %+v (before %+v)", c, before.Clients[i])
		}
	}
	if code, _, errOut := runHub(t, nil, "token", "change", "--data", data, "--client", "nobody", "--read-only"); code != 1 ||
		!strings.Contains(errOut, "no client token is named nobody") {
		t.Fatalf("token change of an unknown name: %d %q", code, errOut)
	}
	if code, _, _ := runHub(t, nil, "token", "change", "--data", data, "--client", "guest"); code != 2 {
		t.Fatalf("token change without a change: %d", code)
	}
	if code, _, errOut := runHub(t, nil, "token", "add", "--data", data, "--peer", "peer-q", "--expires", "1h"); code != 2 ||
		!strings.Contains(errOut, "--expires is for client tokens") {
		t.Fatalf("--expires with --peer: %d %q", code, errOut)
	}
	code, out, _ = runHub(t, nil, "token", "add", "--data", data, "--peer", "peer-a", "--additional")
	if code != 0 || len(strings.TrimSpace(out)) != 43 {
		t.Fatalf("token add --additional: %d %q", code, out)
	}
	if entries, _, _ := auth.Read(file); len(entries) != 2 {
		t.Fatalf("%d entries after --additional, want 2", len(entries))
	}
}

func TestUsage(t *testing.T) {
	if code, out, _ := runHub(t, nil, "help"); code != 0 || !strings.Contains(out, "\n  token ") {
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

// `hub -h` lists every command with one line; every command and subcommand answers -h on
// stdout with status 0, in user words (no contract section numbers, no Go names).
func TestHelp(t *testing.T) {
	code, out, errOut := runHub(t, nil, "-h")
	if code != 0 || errOut != "" {
		t.Fatalf("hub -h: %d %q", code, errOut)
	}
	for _, name := range []string{"serve", "token", "write", "version"} {
		lines := 0
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "  "+name+" ") {
				lines++
			}
		}
		if lines != 1 {
			t.Errorf("hub -h has %d lines for %s:\n%s", lines, name, out)
		}
	}
	if code, out, _ := runHub(t, nil, "token", "-h"); code != 0 || !strings.Contains(out, "\n  rotate ") || !strings.Contains(out, "\n  add ") {
		t.Errorf("hub token -h: %d %q", code, out)
	}
	for _, args := range [][]string{{"serve", "-h"}, {"--help"}, {"token", "add", "-h"}, {"token", "list", "-h"}, {"token", "rotate", "-h"},
		{"token", "remove", "-h"}, {"write", "-h"}, {"help", "write"}, {"help", "token"}} {
		code, out, errOut := runHub(t, nil, args...)
		if code != 0 || errOut != "" || !strings.Contains(out, "usage: hub") {
			t.Errorf("%v: %d, stderr %q, stdout %.80q", args, code, errOut, out)
		}
		for _, bad := range []string{"§", "GUIDE", "Ms)", "UPDATE_CHUNK", "OPEN_NAMESPACE"} {
			if strings.Contains(out, bad) {
				t.Errorf("%v: the help says %q", args, bad)
			}
		}
	}
	code, out, _ = runHub(t, nil, "serve", "-h")
	if code != 0 {
		t.Fatalf("hub serve -h: %d", code)
	}
	for _, flagName := range []string{"--instance-id", "--max-frame-bytes", "--ack-timeout", "--log-format", "--capture-frames",
		"--max-handshakes", "--max-opening", "--tls-cert", "--cluster-listen", "--client-listen"} {
		if !strings.Contains(out, "\n  "+flagName+" ") {
			t.Errorf("hub serve -h does not list %s", flagName)
		}
	}
}

// A mistake is one line on stderr that says what is wrong and which help to read.
func TestMistakesAreOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--no-such-flag"}, `hub serve: unknown flag --no-such-flag; see "hub serve -h"`},
		{[]string{"--no-such-flag"}, `hub serve: unknown flag --no-such-flag; see "hub serve -h"`},
		{[]string{"serve", "--listen"}, `hub serve: flag --listen needs a value; see "hub serve -h"`},
		{[]string{"serve", "--max-frame-bytes", "lots"}, `hub serve: invalid value "lots" for --max-frame-bytes`},
		{[]string{"serve", "extra"}, `hub serve: unexpected argument "extra" (hub serve takes flags only); see "hub serve -h"`},
		{[]string{"frobnicate"}, `hub: unknown command "frobnicate" (want serve, token, write, backup, restore or version); see "hub -h"`},
		{[]string{"token"}, `hub token: a command is required; see "hub token -h"`},
		{[]string{"token", "frob"}, `hub token: unknown command "frob" (want add, list, rotate, change or remove); see "hub token -h"`},
		{[]string{"token", "add"}, `hub token add: --peer (or --client) is required; see "hub token add -h"`},
		{[]string{"token", "rotate", "--data", "x"}, `hub token rotate: --peer is required`},
		{[]string{"write", "--namespace", "ns-bad", "a=1"}, `hub write: --namespace "ns-bad" is not a namespace id (want ns- and 32 lowercase hex digits); see "hub write -h"`},
	} {
		code, out, errOut := runHub(t, map[string]string{}, tc.args...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: %d %q %q; want status 2 and one line %q", tc.args, code, out, errOut, tc.want)
		}
	}
	// A bad environment value names its variable.
	if code, _, errOut := runHub(t, map[string]string{"NOMICORE_MAX_FRAME_BYTES": "lots"}, "serve"); code != 2 || !strings.Contains(errOut, "NOMICORE_MAX_FRAME_BYTES") {
		t.Errorf("bad environment value: %d %q", code, errOut)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}, {"-v"}} {
		code, out, _ := runHub(t, nil, args...)
		if code != 0 || !strings.HasPrefix(out, "hub ") || !strings.Contains(out, "go1.") || strings.Count(out, "\n") != 1 {
			t.Errorf("%v: %d %q", args, code, out)
		}
	}
}

// TestClusterGate: a cluster node that cannot serve refuses a peer's or an editor's
// connection before the upgrade — 503 with Retry-After and the reason — and lets it through
// once it can; the editor's page is served either way; a single hub has no gate.
func TestClusterGate(t *testing.T) {
	notReady := errors.New("catching up with the cluster")
	ready := func() error { return notReady }
	reached := map[string]int{}
	h := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { reached[r.URL.Path]++ })
	get := func(gate http.Handler, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		gate.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec
	}
	repl, editors := gateCluster(ready, h), gateEditors(ready, h)
	const editor = "/v1/yjs/ns-0123456789abcdef0123456789abcdef"
	for _, c := range []struct {
		gate http.Handler
		path string
	}{{repl, "/v1/replication"}, {editors, editor}} {
		rec := get(c.gate, c.path)
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" ||
			!strings.Contains(rec.Body.String(), "catching up with the cluster") || reached[c.path] != 0 {
			t.Fatalf("%s while not ready: %d %q %q (handler reached %d times)", c.path, rec.Code, rec.Header().Get("Retry-After"), rec.Body.String(), reached[c.path])
		}
	}
	if rec := get(editors, "/edit/ns-0123456789abcdef0123456789abcdef"); rec.Code != http.StatusOK || reached["/edit/ns-0123456789abcdef0123456789abcdef"] != 1 {
		t.Fatalf("editor page while not ready: %d", rec.Code)
	}
	notReady = nil
	for _, c := range []struct {
		gate http.Handler
		path string
	}{{repl, "/v1/replication"}, {editors, editor}} {
		if rec := get(c.gate, c.path); rec.Code != http.StatusOK || reached[c.path] != 1 {
			t.Fatalf("%s when ready: %d, handler reached %d times", c.path, rec.Code, reached[c.path])
		}
	}
	single := gateCluster(nil, h)
	if rec := get(single, "/v1/replication"); rec.Code != http.StatusOK || reached["/v1/replication"] != 2 {
		t.Fatalf("a single hub's endpoint: %d", rec.Code)
	}
}

// TestClusterNeedsRoomForTheLargestWrite: every write the replication limits let in is one
// record of the cluster log, so a hub node on an existing NATS cluster whose max_payload is
// below the largest write refuses to start, saying what to raise or lower.
func TestClusterNeedsRoomForTheLargestWrite(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: t.TempDir(), NoSigs: true, NoLog: true}) // max_payload: the default 1 MiB
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS server not ready")
	}
	code, _, errOut := runHub(t, nil, "serve", "--nats-url", srv.ClientURL(), "--node-name", "n1", "--instance-id", "hub",
		"--data", t.TempDir(), "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--client-listen", "off")
	if code != 1 || !strings.Contains(errOut, "raise max_payload on the NATS servers to at least") ||
		!strings.Contains(errOut, "--max-chunked-sync-diff-bytes") {
		t.Fatalf("hub serve on a NATS with max_payload 1 MiB: %d %s", code, errOut)
	}
	// With limits that fit, the node gets past the cluster's start (to its replication
	// listener, whose address is taken here, so that it stops there).
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	code, _, errOut = runHub(t, nil, "serve", "--nats-url", srv.ClientURL(), "--node-name", "n1", "--instance-id", "hub",
		"--data", t.TempDir(), "--listen", taken.Addr().String(), "--admin-listen", "127.0.0.1:0", "--client-listen", "off",
		"--max-chunked-sync-diff-bytes", "900000", "--max-chunked-update-bytes", "900000")
	if code != 1 || strings.Contains(errOut, "max_payload") || !strings.Contains(errOut, taken.Addr().String()) {
		t.Fatalf("limits that fit: %d %s", code, errOut)
	}
}

// TestClusterQuorumTimeoutFlag: --cluster-quorum-timeout belongs to cluster mode and is at
// least a second.
func TestClusterQuorumTimeoutFlag(t *testing.T) {
	common := []string{"serve", "--instance-id", "hub", "--data", t.TempDir(), "--listen", "127.0.0.1:0",
		"--admin-listen", "127.0.0.1:0", "--client-listen", "off"}
	code, _, errOut := runHub(t, nil, append(common, "--cluster-quorum-timeout", "6s")...)
	if code != 1 || !strings.Contains(errOut, "cluster mode needs --cluster-listen") {
		t.Fatalf("without cluster mode: %d %s", code, errOut)
	}
	code, _, errOut = runHub(t, nil, append(common, "--nats-url", "nats://127.0.0.1:1", "--node-name", "n1", "--cluster-quorum-timeout", "100ms")...)
	if code != 1 || !strings.Contains(errOut, "--cluster-quorum-timeout 100ms: give at least 1s") {
		t.Fatalf("100ms: %d %s", code, errOut)
	}
	if i, to, n := probe(defaultQuorumTimeout); i != cluster.DefaultProbeInterval || to != cluster.DefaultProbeTimeout || n != cluster.DefaultProbeFailures {
		t.Fatalf("the default quorum timeout probes every %v for %v, %d times; want the cluster package's defaults", i, to, n)
	}
}

// gogc reads the GOGC the runtime is using.
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

func TestServePacesTheCollectorUnlessGOGCIsSet(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))

	if p := paceGC(func(k string) string { return map[string]string{"GOGC": "100"}[k] }); p != nil {
		p.Stop()
		t.Fatal("with GOGC set, the collector is paced")
	}
	if got := gogc(); got != 100 {
		t.Fatalf("with GOGC set, GOGC changed to %d", got)
	}

	p := paceGC(func(string) string { return "" })
	if p == nil {
		t.Fatal("without GOGC, the collector is not paced")
	}
	defer p.Stop()
	// The pacer's GOGC is in force (a collection in between may have changed it: read again).
	deadline := time.Now().Add(10 * time.Second)
	for gogc() != p.Percent() {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC is %d, the pacer set %d", gogc(), p.Percent())
		}
		time.Sleep(time.Millisecond)
	}
}

// suggested returns the command a message suggests, starting with prefix and ending at the
// next quote, semicolon or parenthesis, split into words; it fails the test when there is none.
func suggested(t *testing.T, msg, prefix string) []string {
	t.Helper()
	i := strings.Index(msg, prefix)
	if i < 0 {
		t.Fatalf("%q suggests no %q", msg, prefix)
	}
	cmd := msg[i:]
	if j := strings.IndexAny(cmd, "\";)\n"); j >= 0 {
		cmd = cmd[:j]
	}
	return strings.Fields(cmd)
}
