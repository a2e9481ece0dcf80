package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nomicore/nomicore/yjs"
)

// The large-document workload runs the hub and peer binaries themselves (bbolt stores on
// disk, loopback), drives them through their admin APIs and reads their memory from /proc:
//
//   - go-live: a fresh peer of a document of each size, from the peer process's start to
//     its target live, and, on a peer already connected, from adding the target to live;
//   - bootstrap-4: four fresh peers of the largest document at once: the time until all are
//     live, and the peak resident memory of the hub (growth over its resident memory before)
//     and of each peer;
//   - paste: a 4 MiB write on the hub to three live peers: the time until all have applied
//     it;
//   - bigdoc: a 5 MiB document made as the relay benchmark's bigdoc workload makes it (5,120
//     inserts of 1 KiB at seeded pseudo-random places): a fresh peer's go-live time, to set
//     beside a fresh client's sync time on the Yjs relay servers measured in the same run.

// largeResult is what the workload measured.
type largeResult struct {
	GoLive     []goLive   `json:"goLive"`
	Bootstrap4 *multiBoot `json:"bootstrap4,omitempty"`
	Paste      *paste     `json:"paste,omitempty"`
	BigDoc     *goLive    `json:"bigDoc,omitempty"`
}

type goLive struct {
	DocBytes      int           `json:"docBytes"`
	FromStart     time.Duration `json:"fromStartNs"`     // peer process started → live
	FromAddTarget time.Duration `json:"fromAddTargetNs"` // connected peer, target added → live
}

type multiBoot struct {
	DocBytes       int           `json:"docBytes"`
	Peers          int           `json:"peers"`
	AllLive        time.Duration `json:"allLiveNs"`
	HubRSSBeforeKB int64         `json:"hubRssBeforeKB"`
	HubPeakKB      int64         `json:"hubPeakKB"`
	PeerPeakKB     []int64       `json:"peerPeakKB"`
}

type paste struct {
	Bytes      int           `json:"bytes"`
	Peers      int           `json:"peers"`
	AllApplied time.Duration `json:"allAppliedNs"`
}

func (r largeResult) String() string {
	var b strings.Builder
	b.WriteString("large documents (hub and peer binaries, bbolt on disk, loopback):\n")
	for _, g := range r.GoLive {
		fmt.Fprintf(&b, "  fresh peer of a %s document: live %v after the peer process started, %v after its target was added on a connected peer\n",
			mib(g.DocBytes), g.FromStart.Round(time.Millisecond), g.FromAddTarget.Round(time.Millisecond))
	}
	if m := r.Bootstrap4; m != nil {
		growth := m.HubPeakKB - m.HubRSSBeforeKB
		fmt.Fprintf(&b, "  %d fresh peers of a %s document at once: all live in %v; hub resident %s before, peak %s (growth %s = %.1f× the document); peer peaks %s\n",
			m.Peers, mib(m.DocBytes), m.AllLive.Round(time.Millisecond), kb(m.HubRSSBeforeKB), kb(m.HubPeakKB), kb(growth),
			float64(growth<<10)/float64(m.DocBytes), kbs(m.PeerPeakKB))
	}
	if p := r.Paste; p != nil {
		fmt.Fprintf(&b, "  a %s write on the hub applied by %d live peers in %v\n", mib(p.Bytes), p.Peers, p.AllApplied.Round(time.Millisecond))
	}
	if g := r.BigDoc; g != nil {
		fmt.Fprintf(&b, "  bigdoc (%s, 5,120 inserts of 1 KiB at random places): fresh peer live %v after start, %v after adding the target\n",
			mib(g.DocBytes), g.FromStart.Round(time.Millisecond), g.FromAddTarget.Round(time.Millisecond))
	}
	return strings.TrimRight(b.String(), "\n")
}

func mib(n int) string  { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
func kb(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/1024) }
func kbs(ns []int64) string {
	var out []string
	for _, n := range ns {
		out = append(out, kb(n))
	}
	return strings.Join(out, ", ")
}

// runLarge runs the workload with the binaries in binDir (built into a temporary directory
// when empty), for documents of sizesMiB.
func runLarge(binDir string, sizesMiB []int, fresh, pastePeers int) (largeResult, error) {
	var res largeResult
	dir, err := os.MkdirTemp("", "benchrepl-large-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	if binDir == "" {
		binDir = filepath.Join(dir, "bin")
		cmd := exec.Command("go", "build", "-o", binDir+string(filepath.Separator), "./cmd/hub", "./cmd/peer")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return res, fmt.Errorf("building the binaries (run from the repository root, or give -bin): %w", err)
		}
	}
	b := &binCluster{dir: dir, hubBin: filepath.Join(binDir, "hub"), peerBin: filepath.Join(binDir, "peer")}
	defer b.stopAll()
	if err := b.startHub(2*(len(sizesMiB)+1) + fresh + pastePeers); err != nil {
		return res, err
	}
	largest := 0
	for _, size := range sizesMiB {
		g, err := b.goLive(size<<20-64<<10, func(doc *yjs.Doc, n int) [][]byte { return appendText(doc, n) })
		if err != nil {
			return res, fmt.Errorf("go-live %d MiB: %w", size, err)
		}
		res.GoLive = append(res.GoLive, g)
		largest = max(largest, size)
	}
	if fresh > 0 && largest > 0 {
		m, err := b.bootstrapAtOnce(largest<<20-64<<10, fresh)
		if err != nil {
			return res, fmt.Errorf("bootstrap-%d: %w", fresh, err)
		}
		res.Bootstrap4 = &m
	}
	if pastePeers > 0 {
		p, err := b.paste(4<<20-8<<10, pastePeers)
		if err != nil {
			return res, fmt.Errorf("paste: %w", err)
		}
		res.Paste = &p
	}
	g, err := b.goLive(5<<20, randomInserts)
	if err != nil {
		return res, fmt.Errorf("bigdoc: %w", err)
	}
	res.BigDoc = &g
	return res, nil
}

// binCluster is a hub binary and peer binaries in one directory.
type binCluster struct {
	dir             string
	hubBin, peerBin string
	hub             *binProc
	hubRepl         string
	tokens          []string
	nextPeer        int
	procs           []*binProc
}

type binProc struct {
	cmd   *exec.Cmd
	admin string
	done  chan struct{}
}

// start runs a binary whose admin API listens on admin, and waits for it.
func (b *binCluster) start(exe, admin, name string, args ...string) (*binProc, error) {
	logf, err := os.Create(filepath.Join(b.dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "NOMICORE_LOG_FORMAT=json")
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	p := &binProc{cmd: cmd, admin: "http://" + admin, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(p.done) }()
	b.procs = append(b.procs, p)
	return p, waitFor(30*time.Second, func() bool {
		resp, err := http.Get(p.admin + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
}

func (p *binProc) stop() {
	if p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (b *binCluster) stopAll() {
	for _, p := range slices.Backward(b.procs) {
		p.stop()
	}
}

// startHub adds tokens for peers peers and starts the hub.
func (b *binCluster) startHub(peers int) error {
	data := filepath.Join(b.dir, "hub")
	for i := range peers {
		out, err := exec.Command(b.hubBin, "token", "add", "--data", data, "--peer", peerName(i)).Output()
		if err != nil {
			return fmt.Errorf("hub token add: %w", err)
		}
		b.tokens = append(b.tokens, strings.TrimSpace(string(out)))
	}
	repl, err := freeAddr()
	if err != nil {
		return err
	}
	admin, err := freeAddr()
	if err != nil {
		return err
	}
	b.hubRepl = repl
	b.hub, err = b.start(b.hubBin, admin, "hub", "serve", "--listen", repl, "--admin-listen", admin, "--data", data,
		"--client-listen", "off")
	return err
}

// restartHub stops the hub and starts it again on the same data and ports.
func (b *binCluster) restartHub() error {
	b.hub.stop()
	admin := strings.TrimPrefix(b.hub.admin, "http://")
	var err error
	b.hub, err = b.start(b.hubBin, admin, "hub-restarted", "serve", "--listen", b.hubRepl, "--admin-listen", admin,
		"--data", filepath.Join(b.dir, "hub"), "--client-listen", "off")
	return err
}

// startPeer starts the next peer binary, with targets.
func (b *binCluster) startPeer(targets ...string) (*binProc, error) {
	i := b.nextPeer
	b.nextPeer++
	tok := filepath.Join(b.dir, peerName(i)+".token")
	if err := os.WriteFile(tok, []byte(b.tokens[i]+"\n"), 0o600); err != nil {
		return nil, err
	}
	admin, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"run", "--instance-id", peerName(i), "--hub-url", "ws://" + b.hubRepl + "/v1/replication",
		"--token-file", tok, "--admin-listen", admin, "--data", filepath.Join(b.dir, peerName(i)), "--client-listen", "off"}
	for _, t := range targets {
		args = append(args, "--target", t)
	}
	return b.start(b.peerBin, admin, peerName(i), args...)
}

// call makes an admin API request and decodes a JSON answer into v (when not nil).
func call(method, url string, body []byte, want int, v any) error {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if strings.HasSuffix(url, "/update") {
		req.Header.Set("Content-Type", "application/octet-stream")
	} else if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	if v != nil {
		return json.Unmarshal(b, v)
	}
	return nil
}

// newDocument creates a namespace on the hub and writes the updates make returns into it.
func (b *binCluster) newDocument(n int, make func(*yjs.Doc, int) [][]byte) (string, error) {
	var c struct{ NamespaceID string }
	if err := call("POST", b.hub.admin+"/v1/namespaces", nil, 201, &c); err != nil {
		return "", err
	}
	if n == 0 {
		return c.NamespaceID, nil
	}
	var state []byte
	req, _ := http.NewRequest("GET", b.hub.admin+"/v1/namespaces/"+c.NamespaceID+"/update", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	state, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return "", err
	}
	doc := yjs.NewDoc()
	if err := yjs.ApplyUpdate(doc, state, nil); err != nil {
		return "", err
	}
	for _, u := range make(doc, n) {
		if err := call("POST", b.hub.admin+"/v1/namespaces/"+c.NamespaceID+"/update", u, 204, nil); err != nil {
			return "", err
		}
	}
	return c.NamespaceID, nil
}

// appendText appends n bytes of text in writes of at most 4 MiB.
func appendText(doc *yjs.Doc, n int) [][]byte {
	var out [][]byte
	doc.OnUpdate(func(u []byte, _ any) { out = append(out, u) })
	text := doc.GetText("body")
	const piece = 4<<20 - 8<<10
	for written := 0; written < n; written += piece {
		_ = text.Insert(text.Len(), strings.Repeat("x", min(piece, n-written)), nil)
	}
	return out
}

// randomInserts makes n bytes of text as the relay benchmark's bigdoc does: inserts of 1 KiB
// at seeded pseudo-random places, 256 to an update.
func randomInserts(doc *yjs.Doc, n int) [][]byte {
	var out [][]byte
	doc.OnUpdate(func(u []byte, _ any) { out = append(out, u) })
	text := doc.GetText("body")
	rnd := rand.New(rand.NewPCG(42, 42))
	const ins = 1 << 10
	for done := 0; done < n; {
		doc.Transact(nil, func(*yjs.Transaction) {
			for i := 0; i < 256 && done < n; i++ {
				_ = text.Insert(rnd.IntN(text.Len()+1), strings.Repeat(string(rune('a'+i%26)), ins), nil)
				done += ins
			}
		})
	}
	return out
}

// targetState returns the state of ns on a peer ("" if it is no target).
func targetState(p *binProc, ns string) string {
	var list []struct{ NamespaceID, State string }
	if call("GET", p.admin+"/v1/targets", nil, 200, &list) != nil {
		return ""
	}
	for _, t := range list {
		if t.NamespaceID == ns {
			return t.State
		}
	}
	return ""
}

// waitBinLive polls every millisecond until ns is live on p.
func waitBinLive(p *binProc, ns string) error {
	return pollFor(3*time.Minute, func() bool { return targetState(p, ns) == "live" })
}

// pollFor is waitFor with a 1 ms period.
func pollFor(d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// goLive measures a fresh peer of a new document of n bytes made by make: from the process
// start to live, then on another, connected peer from adding the target to live.
func (b *binCluster) goLive(n int, make func(*yjs.Doc, int) [][]byte) (goLive, error) {
	g := goLive{DocBytes: n}
	ns, err := b.newDocument(n, make)
	if err != nil {
		return g, err
	}
	start := time.Now()
	p, err := b.startPeer(ns)
	if err != nil {
		return g, err
	}
	if err := waitBinLive(p, ns); err != nil {
		return g, err
	}
	g.FromStart = time.Since(start)
	p.stop()
	q, err := b.startPeer()
	if err != nil {
		return g, err
	}
	defer q.stop()
	if err := pollFor(30*time.Second, func() bool { return call("GET", q.admin+"/readyz", nil, 200, nil) == nil }); err != nil {
		return g, errors.New("peer not connected")
	}
	start = time.Now()
	if err := call("POST", q.admin+"/v1/targets", []byte(`{"namespaceId":"`+ns+`","owner":"default"}`), 201, nil); err != nil {
		return g, err
	}
	if err := waitBinLive(q, ns); err != nil {
		return g, err
	}
	g.FromAddTarget = time.Since(start)
	return g, nil
}

// procStatus reads a field of /proc/PID/status in kB.
func procStatus(pid int, field string) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// bootstrapAtOnce starts peers fresh peers of one new document of n bytes at once.
func (b *binCluster) bootstrapAtOnce(n, peers int) (multiBoot, error) {
	m := multiBoot{DocBytes: n, Peers: peers}
	ns, err := b.newDocument(n, appendText)
	if err != nil {
		return m, err
	}
	// A hub restarted on its data, with the document loaded (a status read keeps it loaded a
	// while), so that what it held for earlier workloads does not count.
	if err := b.restartHub(); err != nil {
		return m, err
	}
	if err := call("GET", b.hub.admin+"/v1/namespaces/"+ns, nil, 200, nil); err != nil {
		return m, err
	}
	hubPID := b.hub.cmd.Process.Pid
	// Settle, then reset the hub's peak (VmHWM) to its resident memory now.
	time.Sleep(2 * time.Second)
	if err := os.WriteFile("/proc/"+strconv.Itoa(hubPID)+"/clear_refs", []byte("5"), 0); err != nil {
		return m, fmt.Errorf("resetting the hub's peak memory: %w", err)
	}
	m.HubRSSBeforeKB = procStatus(hubPID, "VmRSS")
	start := time.Now()
	ps := make([]*binProc, peers)
	errs := make([]error, peers)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range peers {
		wg.Go(func() {
			mu.Lock()
			p, err := b.startPeer(ns)
			mu.Unlock()
			if err == nil {
				err = waitBinLive(p, ns)
			}
			ps[i], errs[i] = p, err
		})
	}
	wg.Wait()
	m.AllLive = time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return m, err
	}
	m.HubPeakKB = procStatus(hubPID, "VmHWM")
	for _, p := range ps {
		m.PeerPeakKB = append(m.PeerPeakKB, procStatus(p.cmd.Process.Pid, "VmHWM"))
		p.stop()
	}
	return m, nil
}

// paste writes n bytes on the hub, into a document peers peers have live, and measures the
// time until every peer's state vector is the hub's.
func (b *binCluster) paste(n, peers int) (paste, error) {
	r := paste{Bytes: n, Peers: peers}
	ns, err := b.newDocument(0, nil)
	if err != nil {
		return r, err
	}
	var ps []*binProc
	for range peers {
		p, err := b.startPeer(ns)
		if err != nil {
			return r, err
		}
		defer p.stop()
		if err := waitBinLive(p, ns); err != nil {
			return r, err
		}
		ps = append(ps, p)
	}
	sv := func(p *binProc) string {
		var st struct{ StateVector string }
		_ = call("GET", p.admin+"/v1/namespaces/"+ns, nil, 200, &st)
		return st.StateVector
	}
	var state []byte
	resp, err := http.Get(b.hub.admin + "/v1/namespaces/" + ns + "/update")
	if err != nil {
		return r, err
	}
	state, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	doc := yjs.NewDoc()
	if err := yjs.ApplyUpdate(doc, state, nil); err != nil {
		return r, err
	}
	ups := appendText(doc, n)
	if len(ups) != 1 {
		return r, fmt.Errorf("%d updates for one paste", len(ups))
	}
	start := time.Now()
	if err := call("POST", b.hub.admin+"/v1/namespaces/"+ns+"/update", ups[0], 204, nil); err != nil {
		return r, err
	}
	want := sv(b.hub)
	err = pollFor(time.Minute, func() bool {
		for _, p := range ps {
			if sv(p) != want {
				return false
			}
		}
		return true
	})
	r.AllApplied = time.Since(start)
	return r, err
}
