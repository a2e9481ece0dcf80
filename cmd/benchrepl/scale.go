package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
	"github.com/nomicore/nomicore/replication/ws"
)

// The connection-scale workloads: how many idle connections one hub holds and what each
// costs it, and how fast many peers with several namespaces each all reach live. Every
// connection is a socket in both processes: raiseFileLimit lifts this process's limit on
// open files to its hard limit before they start (the hub child inherits it), and
// operations.md says which limit operators must raise.

// raiseFileLimit sets the soft limit on open files to the hard one and returns it.
func raiseFileLimit() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	if rl.Cur < rl.Max {
		rl.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			return 0, err
		}
	}
	return rl.Cur, nil
}

// memUsage is the hub child's memory after a garbage collection: its resident set, and the
// Go heap and goroutine stacks in use.
type memUsage struct {
	RSSKB      int64 `json:"rssKB"`
	HeapInuse  int64 `json:"heapInuse"`
	StackInuse int64 `json:"stackInuse"`
	Goroutines int   `json:"goroutines"`
}

// readMem is the child's answer to "mem".
func readMem() memUsage {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memUsage{RSSKB: currentRSSKB(), HeapInuse: int64(ms.HeapInuse), StackInuse: int64(ms.StackInuse), Goroutines: runtime.NumGoroutine()}
}

// currentRSSKB is the process's resident set now (Linux /proc; 0 where there is none).
func currentRSSKB() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize()) / 1024
}

// mem asks the child for its memory now, after a garbage collection.
func (h *hubProc) mem() (memUsage, error) {
	var m memUsage
	if _, err := io.WriteString(h.stdin, "mem\n"); err != nil {
		return m, err
	}
	err := h.out.Decode(&m)
	return m, err
}

// idleHandler is the namespace layer of an idle peer connection: it opens nothing.
type idleHandler struct{}

func (idleHandler) HandleFrame(protocol.Frame)                     {}
func (idleHandler) HandleRejected(*protocol.Error)                 {}
func (idleHandler) HandleDrain(seam.Drain)                         {}
func (idleHandler) HandleShed(protocol.NamespaceID, seam.ShedInfo) {}
func (idleHandler) HandleRevoked(auth.PeerRevocation)              {}
func (idleHandler) HandleClosed(seam.CloseInfo)                    {}

// idleResult: N idle peer connections on one hub.
type idleResult struct {
	Connections       int
	FileLimit         uint64
	ConnectWall       time.Duration
	HubCPU            time.Duration
	HubRSSPerConn     float64 // bytes
	HubGoPerConn      float64 // bytes of Go heap and stacks
	HubStackPerConn   float64 // bytes of goroutine stacks
	HubRSSMiB         float64
	HubGoroutines     int
	GoroutinesPerConn float64
}

func (r idleResult) String() string {
	return fmt.Sprintf("idle connections: %d peers connected in %v (file limit %d); hub memory per connection: %.1f KB resident, %.1f KB Go heap and stacks (stacks %.1f KB, %.2f goroutines each); hub RSS %.0f MiB, hub CPU %v",
		r.Connections, r.ConnectWall.Round(time.Millisecond), r.FileLimit, r.HubRSSPerConn/1000, r.HubGoPerConn/1000,
		r.HubStackPerConn/1000, r.GoroutinesPerConn, r.HubRSSMiB, r.HubCPU.Round(time.Millisecond))
}

// runIdle connects n peers that open no namespace, batch by batch, and measures what the
// hub holds for them once all are ready.
func runIdle(n int) (idleResult, error) {
	res := idleResult{Connections: n}
	var err error
	if res.FileLimit, err = raiseFileLimit(); err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp("", "benchrepl-idle-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	hub, err := startHub(hubSpec{Dir: dir, Peers: n})
	if err != nil {
		return res, err
	}
	defer hub.stop()
	before, err := hub.mem()
	if err != nil {
		return res, err
	}
	cpu0, err := hub.usage()
	if err != nil {
		return res, err
	}
	var peers []*ws.Peer
	defer func() {
		for _, p := range peers {
			p.Close()
		}
	}()
	start := time.Now()
	const batch = 500
	for i := 0; i < n; i += batch {
		var group []*ws.Peer
		for j := i; j < min(n, i+batch); j++ {
			token := tokenOf(j)
			p, err := ws.NewPeer(ws.PeerOptions{Config: benchConfig(), InstanceID: peerName(j), HubInstanceID: "hub", URL: hub.hello.URL,
				Token: func() (string, error) { return token, nil }, Namespaces: func(seam.Session) seam.Handler { return idleHandler{} }})
			if err != nil {
				return res, err
			}
			p.Start()
			peers = append(peers, p)
			group = append(group, p)
		}
		if err := waitFor(2*time.Minute, func() bool {
			for _, p := range group {
				if p.State() != observer.ConnReady {
					return false
				}
			}
			return true
		}); err != nil {
			return res, fmt.Errorf("peers %d–%d not ready: %w", i, i+len(group)-1, err)
		}
	}
	res.ConnectWall = time.Since(start)
	cpu1, err := hub.usage()
	if err != nil {
		return res, err
	}
	after, err := hub.mem()
	if err != nil {
		return res, err
	}
	res.HubCPU = cpu1.cpuSince(cpu0)
	res.HubRSSPerConn = float64(after.RSSKB-before.RSSKB) * 1024 / float64(n)
	res.HubGoPerConn = float64(after.HeapInuse+after.StackInuse-before.HeapInuse-before.StackInuse) / float64(n)
	res.HubStackPerConn = float64(after.StackInuse-before.StackInuse) / float64(n)
	res.HubRSSMiB = float64(after.RSSKB) / 1024
	res.HubGoroutines = after.Goroutines
	res.GoroutinesPerConn = float64(after.Goroutines-before.Goroutines) / float64(n)
	return res, nil
}

// scaleResult: P peers each replicating N namespaces, all started at once.
type scaleResult struct {
	Peers, Namespaces int
	AllLive           time.Duration
	HubCPU            time.Duration
	HubRSSMiB         float64
}

func (r scaleResult) String() string {
	return fmt.Sprintf("scale: %d peers × %d namespaces all live %v after the first peer started; hub CPU %v, hub peak RSS %.0f MiB",
		r.Peers, r.Namespaces, r.AllLive.Round(time.Millisecond), r.HubCPU.Round(time.Millisecond), r.HubRSSMiB)
}

func runScale(peers, namespaces int) (scaleResult, error) {
	res := scaleResult{Peers: peers, Namespaces: namespaces}
	if _, err := raiseFileLimit(); err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp("", "benchrepl-scale-")
	if err != nil {
		return res, err
	}
	c := &cluster{dir: dir}
	defer c.stop()
	if c.hub, err = startHub(hubSpec{Dir: dir + "/hub", Peers: peers, Namespaces: namespaces}); err != nil {
		return res, err
	}
	before, err := c.hub.usage()
	if err != nil {
		return res, err
	}
	start := time.Now()
	if err := c.startPeers(peers); err != nil {
		return res, err
	}
	if err := waitLive(c.peers, 5*time.Minute); err != nil {
		return res, err
	}
	res.AllLive = time.Since(start)
	after, err := c.hub.usage()
	if err != nil {
		return res, err
	}
	res.HubCPU = after.cpuSince(before)
	res.HubRSSMiB = float64(after.MaxRSSKB) / 1024
	return res, nil
}
