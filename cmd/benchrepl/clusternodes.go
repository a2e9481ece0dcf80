package main

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nomicore/nomicore/node"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/ws"
)

// The cluster workloads over processes: three hub children, each one node of a hub
// cluster (embedded NATS, R3), and in-process peers attached to them.
//
//   - clusterfanout: the fan-out workload (P peers, U updates each, on one namespace) on a
//     single hub, then on a three-node cluster with every peer attached to one node, then
//     with the peers spread over the three nodes: propagation p50/p99, and the CPU time of
//     the hub processes summed, per delivery.
//   - failover: P peers, each replicating N namespaces and given the three nodes' URLs, all
//     attached to the first; that node is killed (SIGKILL): how long until each peer has all
//     its targets live again on another node (p50, p99, all).

// nodes is a hub cluster of child processes, each a node.
type nodes struct {
	dir  string
	hubs []*hubProc
}

// freeAddr returns a loopback address whose port was free a moment ago, for a child process
// to listen on (and listen on again after a restart). It is picked below the kernel's
// ephemeral range (Linux: 32768–60999), where the ports of outgoing connections and of
// listeners on port 0 (each embedded NATS server's client port) come from, so that nothing
// else takes it before the child binds it.
func freeAddr() (string, error) {
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(10000+rand.IntN(22000)))
		if err == nil {
			defer ln.Close()
			return ln.Addr().String(), nil
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startNodes starts n cluster nodes (peers tokens on each; namespaces created through the
// first) and waits until each serves.
func startNodes(name string, n, peers, namespaces int) (*nodes, error) {
	dir, err := os.MkdirTemp("", "benchrepl-"+name+"-")
	if err != nil {
		return nil, err
	}
	c := &nodes{dir: dir}
	var listen, routes []string
	for range n {
		a, err := freeAddr()
		if err != nil {
			c.stop()
			return nil, err
		}
		listen, routes = append(listen, a), append(routes, "nats://"+a)
	}
	for i := range n {
		spec := hubSpec{Dir: filepath.Join(dir, "n"+strconv.Itoa(i+1)), Peers: peers,
			Node: &nodeSpec{Name: "n" + strconv.Itoa(i+1), Listen: listen[i], Routes: routes}}
		if i == 0 {
			spec.Namespaces = namespaces
		}
		h, err := spawnHub(spec)
		if err != nil {
			c.stop()
			return nil, err
		}
		c.hubs = append(c.hubs, h)
	}
	for _, h := range c.hubs {
		if err := h.waitHello(); err != nil {
			c.stop()
			return nil, err
		}
	}
	return c, nil
}

func (c *nodes) urls() []string {
	var out []string
	for _, h := range c.hubs {
		out = append(out, h.hello.URL)
	}
	return out
}

func (c *nodes) stop() {
	for _, h := range c.hubs {
		if h != nil {
			_ = h.stop()
		}
	}
	_ = os.RemoveAll(c.dir)
}

// clusterFanoutResult: the fan-out on a single hub, on a cluster with every peer on one
// node, and on a cluster with the peers spread over its nodes.
type clusterFanoutResult struct {
	Single, OneNode, Spread fanoutResult
	SpreadCounts            []int // peers attached to each node when spread
}

func perDelivery(r fanoutResult) time.Duration {
	if r.Deliveries == 0 {
		return 0
	}
	return r.HubCPU / time.Duration(r.Deliveries)
}

func (r clusterFanoutResult) String() string {
	line := func(name string, f fanoutResult) string {
		return fmt.Sprintf("  %-26s p50 %v, p99 %v, max %v; %.0f delivered/s; hub CPU %v, %v per delivery",
			name, f.P50.Round(10*time.Microsecond), f.P99.Round(10*time.Microsecond), f.Max.Round(10*time.Microsecond),
			f.DeliveredPerS, f.HubCPU.Round(time.Millisecond), perDelivery(f).Round(100*time.Nanosecond))
	}
	counts := make([]string, len(r.SpreadCounts))
	for i, n := range r.SpreadCounts {
		counts[i] = strconv.Itoa(n)
	}
	return fmt.Sprintf("cluster fan-out: %d peers × %d updates on one namespace, %d deliveries each run:\n%s\n%s\n%s\n"+
		"  spread vs one node: p50 ×%.2f, p99 ×%.2f, CPU per delivery ×%.2f; one node vs single hub: p50 ×%.2f, p99 ×%.2f, CPU per delivery ×%.2f",
		r.Single.Peers, r.Single.Updates, r.Single.Deliveries,
		line("single hub (bbolt):", r.Single), line("cluster, all on one node:", r.OneNode),
		line("cluster, spread "+strings.Join(counts, "/")+":", r.Spread),
		ratio(r.Spread.P50, r.OneNode.P50), ratio(r.Spread.P99, r.OneNode.P99), ratio(perDelivery(r.Spread), perDelivery(r.OneNode)),
		ratio(r.OneNode.P50, r.Single.P50), ratio(r.OneNode.P99, r.Single.P99), ratio(perDelivery(r.OneNode), perDelivery(r.Single)))
}

func runClusterFanout(peers, updates int) (clusterFanoutResult, error) {
	var res clusterFanoutResult
	var err error
	if res.Single, err = runFanout(peers, updates); err != nil {
		return res, fmt.Errorf("single hub: %w", err)
	}
	if res.OneNode, _, err = clusterFanout(peers, updates, false); err != nil {
		return res, fmt.Errorf("cluster, one node: %w", err)
	}
	if res.Spread, res.SpreadCounts, err = clusterFanout(peers, updates, true); err != nil {
		return res, fmt.Errorf("cluster, spread: %w", err)
	}
	return res, nil
}

// clusterFanout runs the fan-out on a fresh three-node cluster, the peers attached to the
// first node or spread over the three in turn.
func clusterFanout(peers, updates int, spread bool) (fanoutResult, []int, error) {
	c, err := startNodes("clusterfanout", 3, peers, 1)
	if err != nil {
		return fanoutResult{}, nil, err
	}
	defer c.stop()
	ns, urls := c.hubs[0].hello.Namespaces[0], c.urls()
	counts := make([]int, len(urls))
	var ps []*peer
	defer func() { _ = stopAll(ps) }()
	for i := range peers {
		at := 0
		if spread {
			at = i % len(urls)
		}
		counts[at]++
		p, err := startPeer(filepath.Join(c.dir, peerName(i)), i, urls[at], []string{ns})
		if err != nil {
			return fanoutResult{}, nil, err
		}
		ps = append(ps, p)
	}
	if err := waitLive(ps, 2*time.Minute); err != nil {
		return fanoutResult{}, nil, err
	}
	r, err := measureFanout(c.hubs, ps, ns, updates)
	return r, counts, err
}

// failoverResult: peers attached to one node of three, which is killed; how long after the
// kill each peer has all its targets live again.
type failoverResult struct {
	Peers, Namespaces int
	Led               []string // what the killed node led of the cluster's JetStream groups
	P50, P99, All     time.Duration
	Moved             []int // peers live on each surviving node afterwards
	BootstrapsAfter   int   // snapshots imported after the kill (an up-to-date replica needs none)
}

func (r failoverResult) String() string {
	led := strings.Join(r.Led, ", ")
	if led == "" {
		led = "nothing"
	}
	return fmt.Sprintf("failover: %d peers × %d namespaces on node 1 of 3, node 1 killed (it led %s): live again on another node after p50 %v, p99 %v, all %v; peers per surviving node %v; bootstraps after the kill %d",
		r.Peers, r.Namespaces, led, r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond), r.All.Round(time.Millisecond),
		r.Moved, r.BootstrapsAfter)
}

func runFailover(peers, namespaces int) (failoverResult, error) {
	res := failoverResult{Peers: peers, Namespaces: namespaces}
	c, err := startNodes("failover", 3, peers, namespaces)
	if err != nil {
		return res, err
	}
	defer c.stop()
	urls, nss := c.urls(), c.hubs[0].hello.Namespaces
	cfg := node.ShippedConfig() // the binaries' settings: production backoff
	var ps []*peer
	var trackers []*liveTracker
	var boots []*bootstrapCounter
	defer func() { _ = stopAll(ps) }()
	for i := range peers {
		tr, bc := &liveTracker{n: namespaces}, &bootstrapCounter{}
		p, err := startPeerWith(filepath.Join(c.dir, peerName(i)), i, nss, ws.PeerOptions{Config: cfg,
			URL: urls[0], FailoverURLs: urls[1:], Observer: observer.Multi(tr, bc)})
		if err != nil {
			return res, err
		}
		ps, trackers, boots = append(ps, p), append(trackers, tr), append(boots, bc)
	}
	if err := waitLive(ps, 5*time.Minute); err != nil {
		return res, err
	}
	u, err := c.hubs[0].usage()
	if err != nil {
		return res, err
	}
	res.Led = u.Leading
	for _, b := range boots {
		b.reset()
	}
	killed := time.Now()
	_ = c.hubs[0].kill()
	c.hubs[0] = nil
	var took []time.Duration
	deadline := killed.Add(5 * time.Minute)
	for len(took) < peers {
		if time.Now().After(deadline) {
			return res, fmt.Errorf("%d of %d peers live again after 5 minutes", len(took), peers)
		}
		time.Sleep(20 * time.Millisecond)
		took = took[:0]
		for _, tr := range trackers {
			if d, ok := tr.firstLiveIn([2]time.Time{killed, time.Now()}); ok {
				took = append(took, d)
			}
		}
	}
	res.P50, res.P99, res.All = percentiles(took)
	res.Moved = make([]int, len(urls)-1)
	for _, p := range ps {
		for i, u := range urls[1:] {
			if p.p.URL() == u {
				res.Moved[i]++
			}
		}
	}
	for _, b := range boots {
		res.BootstrapsAfter += b.count()
	}
	return res, nil
}

// bootstrapCounter counts the snapshots a peer imported (BootstrapImported events).
type bootstrapCounter struct{ n atomic.Int64 }

func (b *bootstrapCounter) Observe(e observer.Event) {
	if _, ok := e.Payload.(observer.BootstrapImported); ok {
		b.n.Add(1)
	}
}

func (b *bootstrapCounter) reset()     { b.n.Store(0) }
func (b *bootstrapCounter) count() int { return int(b.n.Load()) }
