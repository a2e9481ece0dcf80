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
}

// hubHello is the child's first output line.
type hubHello struct {
	URL        string   `json:"url"`
	Namespaces []string `json:"namespaces"`
}

// usage is a CPU and memory reading of the child.
type usage struct {
	UserMs   float64 `json:"userMs"`
	SysMs    float64 `json:"sysMs"`
	MaxRSSKB int64   `json:"maxRssKB"`
	Refused  int64   `json:"refused"` // upgrades refused by the admission control so far
	// RefusedAtOpening: of those, refused because too many namespace opens were in progress.
	RefusedAtOpening int64 `json:"refusedAtOpening"`
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
// usage line for every "usage" line it reads.
func runHubChild(specJSON string) error {
	var spec hubSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return err
	}
	st, err := persistence.OpenDataDir(spec.Dir, persistence.Options{Compactor: registry.Compactor()})
	if err != nil {
		return err
	}
	reg, err := registry.New(registry.Config{Role: registry.RoleHub, Store: st})
	if err != nil {
		return err
	}
	ctx := context.Background()
	var entries []ws.TokenEntry
	for i := range spec.Peers {
		entries = append(entries, ws.TokenEntry{PeerInstanceID: peerName(i), TokenSHA256: ws.HashToken(tokenOf(i)),
			Owner: hubOwner, Namespaces: []string{"*"}, Read: true, Submit: true})
	}
	table, err := ws.NewTokenTable(entries)
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
			if err := fill(ctx, reg, c.NamespaceID, spec.DocBytes); err != nil {
				return err
			}
		}
		hello.Namespaces = append(hello.Namespaces, c.NamespaceID)
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
	mux.Handle("/v1/replication", hub)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	hello.URL = "ws://" + ln.Addr().String() + "/v1/replication"
	out := json.NewEncoder(os.Stdout)
	if err := out.Encode(hello); err != nil {
		return err
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if strings.TrimSpace(in.Text()) == "usage" {
			u := readUsage()
			a := hub.Admission()
			u.Refused, u.RefusedAtOpening = a.Refused, a.RefusedAtOpening
			if err := out.Encode(u); err != nil {
				return err
			}
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = errors.Join(hub.Shutdown(sctx), srv.Shutdown(sctx), reg.Close(sctx), st.Close(sctx))
	return err
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

// startHub starts the child hub.
func startHub(spec hubSpec) (*hubProc, error) {
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
	h := &hubProc{cmd: cmd, stdin: stdin, out: json.NewDecoder(stdout)}
	if err := h.out.Decode(&h.hello); err != nil {
		h.stop()
		return nil, fmt.Errorf("hub child: %w", err)
	}
	return h, nil
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
