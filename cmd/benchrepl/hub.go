package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/nomicore/nomicore/auth"
	hubcluster "github.com/nomicore/nomicore/cluster"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/replication/ws"
	"github.com/nomicore/nomicore/yjs"
)

// The hub runs in a child process (this binary, or the test binary, re-executed with
// hubEnv set), so that its CPU time is its own: getrusage(RUSAGE_SELF) in the child.

const hubEnv = "BENCHREPL_HUB"

// hubSpec configures the child hub.
type hubSpec struct {
	Dir        string `json:"dir"`
	Peers      int    `json:"peers"`      // peer-0 … peer-N-1, token tokenOf(i)
	Namespaces int    `json:"namespaces"` // created at start, owner "bench"
	DocBytes   int    `json:"docBytes"`   // text written into each namespace at start
	// Listen is the replication address ("" picks a free loopback port): a restarted hub
	// keeps its address, as a real one does.
	Listen string `json:"listen,omitempty"`
	// NoAdmission turns the hub's admission control off (the baseline of the storm
	// workloads).
	NoAdmission bool `json:"noAdmission,omitempty"`
	// Node, when set, makes the hub one node of a hub cluster (embedded NATS); its store
	// is the cluster's, and Dir holds its JetStream store.
	Node *nodeSpec `json:"node,omitempty"`
}

// nodeSpec is a hub child's part in a hub cluster.
type nodeSpec struct {
	Name   string   `json:"name"`
	Listen string   `json:"listen"` // the route listener
	Routes []string `json:"routes"` // every node's, nats://HOST:PORT
}

// hubHello is the child's first output line.
type hubHello struct {
	URL        string   `json:"url"`
	Namespaces []string `json:"namespaces"`
	// LogStreams: on a cluster node, the stream holding each namespace's log.
	LogStreams []string `json:"logStreams,omitempty"`
}

// usage is a CPU and memory reading of the child.
type usage struct {
	UserMs   float64 `json:"userMs"`
	SysMs    float64 `json:"sysMs"`
	MaxRSSKB int64   `json:"maxRssKB"`
	Refused  int64   `json:"refused"` // upgrades refused by the admission control so far
	// RefusedAtOpening: of those, refused because too many namespace opens were in progress.
	RefusedAtOpening int64 `json:"refusedAtOpening"`
	// Leading: what of the cluster's JetStream groups a cluster node leads.
	Leading []string `json:"leading,omitempty"`
}

// cpuSince is the CPU time the child spent between reading before and u.
func (u usage) cpuSince(before usage) time.Duration {
	return time.Duration((u.cpuMs() - before.cpuMs()) * float64(time.Millisecond))
}

func (u usage) cpuMs() float64 { return u.UserMs + u.SysMs }

const hubOwner = "bench"

func tokenOf(peer int) string { return fmt.Sprintf("bench-token-%d", peer) }

func peerName(i int) string { return fmt.Sprintf("peer-%d", i) }

// runHubChild is the child's main: it serves a hub until its stdin closes, printing a
// usage line for every "usage" line it reads and a memory line for every "mem".
func runHubChild(specJSON string) error {
	var spec hubSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return err
	}
	ctx := context.Background()
	st, reg, node, err := openChildHub(spec)
	if err != nil {
		return err
	}
	var entries []auth.PeerEntry
	for i := range spec.Peers {
		entries = append(entries, auth.PeerEntry{PeerInstanceID: peerName(i), TokenSHA256: auth.HashToken(tokenOf(i)),
			Owner: hubOwner, Namespaces: []string{"*"}, Read: true, Submit: true})
	}
	table, err := auth.NewPeerTable(entries)
	if err != nil {
		return err
	}
	nsl, err := namespace.NewHub(namespace.HubOptions{Registry: reg})
	if err != nil {
		return err
	}
	hopts := ws.HubOptions{Config: benchConfig(), InstanceID: "hub", Auth: table, Namespaces: nsl.NewHandler, Observer: debugObserver()}
	if spec.NoAdmission {
		hopts.MaxHandshakes, hopts.MaxOpening = -1, -1
	}
	hub, err := ws.NewHub(hopts)
	if err != nil {
		return err
	}
	hello := hubHello{}
	for range spec.Namespaces {
		c, err := reg.Create(ctx, hubOwner)
		if err != nil {
			return err
		}
		if spec.DocBytes > 0 {
			if err := fillSnapshotted(ctx, reg, node, c.NamespaceID, spec.DocBytes); err != nil {
				return err
			}
		}
		hello.Namespaces = append(hello.Namespaces, c.NamespaceID)
		if node != nil {
			name, err := node.LogStreamName(ctx, c.NamespaceID)
			if err != nil {
				return err
			}
			hello.LogStreams = append(hello.LogStreams, name)
		}
	}
	addr := spec.Listen
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	var h http.Handler = hub
	if node != nil {
		h = gateNode(node, hub)
	}
	mux.Handle("/v1/replication", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	hello.URL = "ws://" + ln.Addr().String() + "/v1/replication"
	out := json.NewEncoder(os.Stdout)
	if err := out.Encode(hello); err != nil {
		return err
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch strings.TrimSpace(in.Text()) {
		case "usage":
			u := readUsage()
			a := hub.Admission()
			u.Refused, u.RefusedAtOpening = a.Refused, a.RefusedAtOpening
			if node != nil {
				lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				u.Leading, _ = node.Leading(lctx)
				cancel()
			}
			if err := out.Encode(u); err != nil {
				return err
			}
		case "mem":
			if err := out.Encode(readMem()); err != nil {
				return err
			}
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = errors.Join(hub.Shutdown(sctx), srv.Shutdown(sctx), reg.Close(sctx), st.Close(sctx))
	if node != nil {
		err = errors.Join(err, node.Close(sctx))
	}
	return err
}

// openChildHub opens the child hub's store and registry: its own bbolt store, or — with
// spec.Node — one node of a hub cluster, ready (quorum, replicas current) before it
// returns.
func openChildHub(spec hubSpec) (persistence.Catalog, *registry.Registry, *hubcluster.Node, error) {
	if spec.Node == nil {
		st, err := persistence.OpenDataDir(spec.Dir, persistence.Options{Compactor: registry.Compactor()})
		if err != nil {
			return nil, nil, nil, err
		}
		reg, err := registry.New(registry.Config{Role: registry.RoleHub, Catalog: st, Documents: st})
		return st, reg, nil, err
	}
	cfg := hubcluster.Config{NodeName: spec.Node.Name, DataDir: spec.Dir, ClusterName: "bench",
		ClusterListen: spec.Node.Listen, Routes: spec.Node.Routes}
	if spec.DocBytes > 0 {
		cfg.CompactAfterRecords = 1 // the first writes leave a snapshot, which every load reads
	}
	node, err := hubcluster.Start(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	st := node.Store()
	reg, err := registry.New(registry.Config{Role: registry.RoleHub, Catalog: st, Shared: node})
	if err != nil {
		node.Close(context.Background())
		return nil, nil, nil, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for node.Ready() != nil {
		if time.Now().After(deadline) {
			return nil, nil, nil, fmt.Errorf("node %s not ready: %v", spec.Node.Name, node.Ready())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return st, reg, node, nil
}

// fillSnapshotted writes about n bytes of text into the namespace; on a cluster node it
// keeps the namespace loaded until its log was compacted into a snapshot.
func fillSnapshotted(ctx context.Context, reg *registry.Registry, node *hubcluster.Node, ns string, n int) error {
	l, err := reg.Open(ctx, hubOwner, ns)
	if err != nil {
		return err
	}
	defer l.Release()
	if err := fill(ctx, reg, ns, n); err != nil || node == nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		li, err := node.LogInfo(ctx, hubOwner, ns)
		if err == nil && li.SnapshotThrough > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no snapshot of %s after a minute: %+v, %v", ns, li, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// gateNode refuses peer connections while the node cannot serve them, as the hub binary
// does (503 with Retry-After before the upgrade).
func gateNode(n *hubcluster.Node, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := n.Ready(); err != nil {
			w.Header().Set("Retry-After", "1")
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// fill writes about n bytes of text into the namespace, in updates of at most 32 KiB.
func fill(ctx context.Context, reg *registry.Registry, ns string, n int) error {
	l, err := reg.Open(ctx, hubOwner, ns)
	if err != nil {
		return err
	}
	defer l.Release()
	doc := yjs.NewDoc()
	var last []byte
	doc.OnUpdate(func(u []byte, _ any) { last = u })
	text := doc.GetText("body")
	chunk := make([]byte, 32<<10)
	for written := 0; written < n; written += len(chunk) {
		if _, err := rand.Read(chunk); err != nil {
			return err
		}
		s := hex.EncodeToString(chunk)[:min(len(chunk), n-written)]
		if err := text.Insert(text.Len(), s, nil); err != nil {
			return err
		}
		if _, err := l.WriteLocal(ctx, last); err != nil {
			return err
		}
	}
	return nil
}

// hubProc is the parent's handle on the child hub.
type hubProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *json.Decoder
	hello hubHello
}

// startHub starts the child hub and waits for its first line.
func startHub(spec hubSpec) (*hubProc, error) {
	h, err := spawnHub(spec)
	if err == nil {
		err = h.waitHello()
	}
	return h, err
}

// spawnHub starts the child hub without waiting for it (a cluster node says hello only once
// its siblings are up too).
func spawnHub(spec hubSpec) (*hubProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), hubEnv+"="+string(b))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &hubProc{cmd: cmd, stdin: stdin, out: json.NewDecoder(stdout)}, nil
}

// waitHello reads the child's first line; on an error the child is stopped.
func (h *hubProc) waitHello() error {
	if err := h.out.Decode(&h.hello); err != nil {
		h.stop()
		return fmt.Errorf("hub child: %w", err)
	}
	return nil
}

// usage asks the child for its CPU and memory usage so far.
func (h *hubProc) usage() (usage, error) {
	var u usage
	if _, err := io.WriteString(h.stdin, "usage\n"); err != nil {
		return u, err
	}
	err := h.out.Decode(&u)
	return u, err
}

// kill ends the child with SIGKILL, as a crash would, and waits for it.
func (h *hubProc) kill() error {
	_ = h.cmd.Process.Kill()
	_ = h.stdin.Close()
	_ = h.cmd.Wait() // "signal: killed"
	return nil
}

// stop closes the child's stdin (it shuts down) and waits for it.
func (h *hubProc) stop() error {
	_ = h.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- h.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(60 * time.Second):
		_ = h.cmd.Process.Kill()
		return errors.New("hub child did not stop; killed")
	}
}
