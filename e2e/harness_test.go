// Package e2e holds process-level end-to-end tests: they build the hub and peer binaries,
// run them as child processes on loopback ports with temporary data directories, and check
// everything through the admin HTTP API (README.md#admin-api) — as an operator and an
// application would.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nomicore/nomicore/yjs"
)

// docWalkthroughEnv tells the test binary, started again in a private network namespace,
// which walkthrough of the documentation to run there (TestDocs_ShellBlocks).
const docWalkthroughEnv = "NOMICORE_DOCTEST_WALKTHROUGH"

var bin struct {
	dir             string
	hub, peer, nmcr string
}

func TestMain(m *testing.M) {
	if os.Getenv(docWalkthroughEnv) != "" {
		// This binary, started again by TestDocs_ShellBlocks to run a walkthrough of the
		// documentation in private namespaces: the walkthrough builds its own binaries.
		os.Exit(m.Run())
	}
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "nomicore-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		defer stopBrowser() // the browser tests' one Chromium, if one of them started it
		bin.dir, bin.hub, bin.peer, bin.nmcr = dir, filepath.Join(dir, "hub"), filepath.Join(dir, "peer"), filepath.Join(dir, "nmcr")
		args := []string{"build", "-o", dir + string(filepath.Separator)}
		if raceEnabled {
			args = append(args, "-race")
		}
		args = append(args, "github.com/nomicore/nomicore/cmd/hub", "github.com/nomicore/nomicore/cmd/peer", "github.com/nomicore/nomicore/cmd/nmcr")
		cmd := exec.Command("go", args...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: building the binaries:", err)
			return 1
		}
		return m.Run()
	}())
}

// freeAddr returns a loopback address with a port that was free a moment ago, for a child
// process to listen on. The port is picked below the kernel's ephemeral range (Linux:
// 32768–60999), where every port a process gets by listening on port 0 comes from — an
// embedded NATS server's client port, another test's listener — so that, between this
// check and the child's bind, only another caller of freeAddr can take it.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 10000+rand.IntN(22000)))
		if err == nil {
			defer ln.Close()
			return ln.Addr().String()
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// fast are protocol settings that keep reconnects and rounds quick on loopback.
var fast = []string{"--base-backoff", "50ms", "--max-backoff", "400ms", "--reconcile-interval", "3s",
	"--close-timeout", "2s", "--shutdown-timeout", "20s", "--log-level", "debug"}

// proc is one child process.
type proc struct {
	t      *testing.T
	name   string
	args   []string
	env    []string
	admin  string // http://host:port, or https://host:port when it serves TLS
	client string // host:port of the client listener (editors)
	log    string // its stderr
	// adminHTTP talks to the admin API (nil: http.DefaultClient); a TLS test sets one that
	// trusts its CA.
	adminHTTP *http.Client
	// exe, when set, is the binary to run instead of this tree's hub or peer (an upgrade
	// test runs an earlier release's).
	exe  string
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	err  error
}

// start runs the process and waits for its admin API; it fails the test if the process
// does not come up, except that a listener lost to another process (the port picked by
// freeAddr was taken meanwhile) is returned as errPortTaken for the caller to retry.
func (p *proc) start() error {
	p.t.Helper()
	exe := bin.peer
	if strings.HasPrefix(p.name, "hub") {
		exe = bin.hub
	}
	if p.exe != "" {
		exe = p.exe
	}
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		p.t.Fatal(err)
	}
	fmt.Fprintf(logf, "=== start %s %s\n", exe, strings.Join(p.args, " "))
	p.cmd = exec.Command(exe, p.args...)
	p.cmd.Env = append(os.Environ(), p.env...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = childAttr()
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		p.t.Fatalf("%s: %v", p.name, err)
	}
	p.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}(p.cmd, p.done)
	p.t.Cleanup(func() { p.kill() })
	return p.waitHealthy()
}

var errPortTaken = errors.New("a listen address was taken by another process")

// waitHealthy waits until the admin API answers /healthz (or the process exits).
func (p *proc) waitHealthy() error {
	p.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			if log := tail(p.log, 3); strings.Contains(log, "address already in use") {
				return errPortTaken
			}
			p.t.Fatalf("%s exited at start: %v\n%s", p.name, p.exitErr(), tail(p.log, 20))
		default:
		}
		resp, err := p.httpClient().Get(p.admin + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.t.Fatalf("%s: admin API not up\n%s", p.name, tail(p.log, 20))
	return nil
}

func (p *proc) httpClient() *http.Client {
	if p.adminHTTP != nil {
		return p.adminHTTP
	}
	return http.DefaultClient
}

// adminAddr is the host:port of the admin API.
func (p *proc) adminAddr() string {
	_, hostPort, _ := strings.Cut(p.admin, "://")
	return hostPort
}

func (p *proc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// kill sends SIGKILL to the process group and waits.
func (p *proc) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// stop sends SIGINT and requires an orderly exit with status 0.
func (p *proc) stop() {
	p.t.Helper()
	syscall.Kill(p.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.kill()
		p.t.Fatalf("%s did not stop within 30s\n%s", p.name, tail(p.log, 30))
	}
	if err := p.exitErr(); err != nil {
		p.t.Fatalf("%s exited with %v\n%s", p.name, err, tail(p.log, 30))
	}
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// cluster is a hub and its peers in one temporary directory.
type cluster struct {
	t       *testing.T
	dir     string
	hubRepl string // host:port of /v1/replication
	hub     *proc
	peers   map[string]*proc
	// adminClient, when set, is how the processes' admin APIs are reached: over https, by a
	// client trusting the test's CA (the processes are then started with --tls-cert).
	adminClient *http.Client
}

func (c *cluster) adminScheme() string {
	if c.adminClient != nil {
		return "https://"
	}
	return "http://"
}

func newCluster(t *testing.T) *cluster {
	c := &cluster{t: t, dir: t.TempDir(), hubRepl: freeAddr(t), peers: map[string]*proc{}}
	t.Cleanup(func() {
		if t.Failed() {
			keep := os.Getenv("NOMICORE_E2E_LOGS") // a directory to keep the whole logs of a failed test in
			for _, p := range append([]*proc{c.hub}, c.peerList()...) {
				if p != nil {
					t.Logf("--- log of %s:\n%s", p.name, tail(p.log, 60))
					if keep != "" {
						dir := filepath.Join(keep, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
						if b, err := os.ReadFile(p.log); err == nil && os.MkdirAll(dir, 0o755) == nil {
							os.WriteFile(filepath.Join(dir, p.name+".log"), b, 0o644)
						}
					}
				}
			}
		}
	})
	return c
}

func (c *cluster) peerList() []*proc {
	var out []*proc
	for _, p := range c.peers {
		out = append(out, p)
	}
	return out
}

func (c *cluster) hubData() string { return filepath.Join(c.dir, "hub") }

// startHub starts (or restarts, on the same ports and data) the hub.
func (c *cluster) startHub(extra ...string) *proc {
	c.t.Helper()
	first := c.hub == nil
	if first {
		c.hub = &proc{t: c.t, name: "hub", admin: c.adminScheme() + freeAddr(c.t), client: freeAddr(c.t), log: filepath.Join(c.dir, "hub.log"),
			adminHTTP: c.adminClient}
	}
	for attempt := 0; ; attempt++ {
		c.hub.args = append([]string{"serve", "--listen", c.hubRepl, "--admin-listen", c.hub.adminAddr(),
			"--client-listen", c.hub.client, "--data", c.hubData()}, append(fast, extra...)...)
		err := c.hub.start()
		if err == nil {
			return c.hub
		}
		if !first || len(c.peers) > 0 || attempt == 2 {
			c.t.Fatalf("hub: %v", err)
		}
		c.hubRepl, c.hub.admin, c.hub.client = freeAddr(c.t), c.adminScheme()+freeAddr(c.t), freeAddr(c.t)
	}
}

// token runs `hub token add` and returns the token it prints.
func (c *cluster) token(peer string, extra ...string) string {
	c.t.Helper()
	out, err := exec.Command(bin.hub, append([]string{"token", "add", "--data", c.hubData(), "--peer", peer}, extra...)...).Output()
	if err != nil {
		c.t.Fatalf("hub token add: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// tokenFile writes a token into a file for a peer.
func (c *cluster) tokenFile(peer, token string) string {
	p := filepath.Join(c.dir, peer+".token")
	if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// startPeer starts (or restarts, on the same admin port and data) a peer.
func (c *cluster) startPeer(name, tokenFile string, extra ...string) *proc {
	c.t.Helper()
	p := c.peers[name]
	if p == nil {
		p = &proc{t: c.t, name: name, admin: c.adminScheme() + freeAddr(c.t), client: freeAddr(c.t), log: filepath.Join(c.dir, name+".log"),
			adminHTTP: c.adminClient}
		c.peers[name] = p
	}
	// --hub-url repeats (several hub nodes): the cluster's hub only when extra names none.
	hubURL := []string{"--hub-url", "ws://" + c.hubRepl + "/v1/replication"}
	if slices.Contains(extra, "--hub-url") {
		hubURL = nil
	}
	for attempt := 0; ; attempt++ {
		p.args = append(append([]string{"run", "--instance-id", name}, hubURL...), append([]string{
			"--token-file", tokenFile, "--admin-listen", p.adminAddr(),
			"--client-listen", p.client, "--data", filepath.Join(c.dir, name)}, append(fast, extra...)...)...)
		err := p.start()
		if err == nil {
			return p
		}
		if attempt == 2 {
			c.t.Fatalf("%s: %v", name, err)
		}
		p.admin, p.client = c.adminScheme()+freeAddr(c.t), freeAddr(c.t)
	}
}

// --- admin API client ---

type api struct {
	t      *testing.T
	base   string
	client *http.Client
}

func (p *proc) api() api { return api{p.t, p.admin, p.httpClient()} }

func (a api) do(method, path string, body []byte) (int, []byte) {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, bytes.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	switch {
	case strings.HasSuffix(path, "/update"):
		req.Header.Set("Content-Type", "application/octet-stream")
	case len(body) > 0:
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (a api) json(method, path string, body []byte, want int, v any) {
	a.t.Helper()
	status, b := a.do(method, path, body)
	if status != want {
		a.t.Fatalf("%s %s%s = %d %s; want %d", method, a.base, path, status, b, want)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			a.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

// createNamespace creates a namespace on the hub.
func (a api) createNamespace() string {
	var c struct{ NamespaceID string }
	a.json("POST", "/v1/namespaces", []byte(`{"owner":"default"}`), 201, &c)
	return c.NamespaceID
}

// set writes keys into the root map "notes" the way an application does: from the current
// state, through POST …/update; it returns once the write is applied and durable.
func (a api) set(ns string, kv map[string]any) {
	a.t.Helper()
	status, state := a.do("GET", "/v1/namespaces/"+ns+"/update", nil)
	if status != 200 {
		a.t.Fatalf("GET update on %s: %d %s", a.base, status, state)
	}
	doc := yjs.NewDoc()
	if err := yjs.ApplyUpdate(doc, state, nil); err != nil {
		a.t.Fatal(err)
	}
	var update []byte
	unsub := doc.OnUpdate(func(u []byte, _ any) { update = append([]byte(nil), u...) })
	m := doc.GetMap("notes")
	doc.Transact(nil, func(*yjs.Transaction) {
		for k, v := range kv {
			m.Set(k, v)
		}
	})
	unsub()
	if status, b := a.do("POST", "/v1/namespaces/"+ns+"/update", update); status != 204 {
		a.t.Fatalf("POST update on %s: %d %s", a.base, status, b)
	}
}

// notes returns the "notes" map of a namespace (nil when the document cannot be read).
func (a api) notes(ns string) (map[string]any, int) {
	a.t.Helper()
	status, b := a.do("GET", "/v1/namespaces/"+ns+"/doc?root=notes:map", nil)
	if status != 200 {
		return nil, status
	}
	var doc map[string]map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		a.t.Fatalf("doc: %v", err)
	}
	return doc["notes"], status
}

// target returns a peer's target as its admin API shows it.
func (a api) target(ns string) map[string]any {
	a.t.Helper()
	var list []map[string]any
	a.json("GET", "/v1/targets", nil, 200, &list)
	for _, t := range list {
		if t["namespaceId"] == ns {
			return t
		}
	}
	return nil
}

// metric returns the value of a series from /metrics (0 when absent).
func (a api) metric(series string) float64 {
	a.t.Helper()
	status, b := a.do("GET", "/metrics", nil)
	if status != 200 {
		a.t.Fatalf("metrics: %d", status)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, series+" ") {
			var v float64
			fmt.Sscanf(line[len(series)+1:], "%g", &v)
			return v
		}
	}
	return 0
}

func (a api) metricsText() string {
	_, b := a.do("GET", "/metrics", nil)
	return string(b)
}

// eventually polls cond until it returns nil, failing with its last error after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = cond(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v: %v", what, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// targetState waits until a peer's target is in state.
func targetState(t *testing.T, p *proc, ns, state string) {
	t.Helper()
	eventually(t, 30*time.Second, p.name+" target "+state, func() error {
		tg := p.api().target(ns)
		if tg == nil {
			return fmt.Errorf("no target")
		}
		if tg["state"] != state {
			return fmt.Errorf("state %v", tg["state"])
		}
		return nil
	})
}

// converged waits until every process shows the same notes map, containing want.
func converged(t *testing.T, ns string, want map[string]any, procs ...*proc) {
	t.Helper()
	eventually(t, 30*time.Second, "convergence", func() error {
		var first []byte
		for _, p := range procs {
			n, status := p.api().notes(ns)
			if status != 200 {
				return fmt.Errorf("%s: doc status %d", p.name, status)
			}
			for k, v := range want {
				if fmt.Sprint(n[k]) != fmt.Sprint(v) {
					return fmt.Errorf("%s: notes[%s] = %v, want %v (notes %v)", p.name, k, n[k], v, n)
				}
			}
			b, _ := json.Marshal(n)
			if first == nil {
				first = b
			} else if !bytes.Equal(first, b) {
				return fmt.Errorf("%s differs: %s vs %s", p.name, b, first)
			}
		}
		return nil
	})
}

func execCommand(exe string, args ...string) ([]byte, error) {
	return exec.Command(exe, args...).CombinedOutput()
}
