package main

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
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
//     attached to one node, which is killed (SIGKILL): how long until each peer has all its
//     targets live again on another node (p50, p99, all) — the node killed being the leader
//     of the namespaces' log streams, then a node that leads none of them; each repeated.

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
// first, each holding docBytes of text and, when docBytes > 0, a snapshot) and waits until
// each serves.
func startNodes(name string, n, peers, namespaces, docBytes int) (*nodes, error) {
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
			spec.Namespaces, spec.DocBytes = namespaces, docBytes
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
	c, err := startNodes("clusterfanout", 3, peers, 1, 0)
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

// failoverResult: for each way of choosing the node to kill, the medians over the repeats
// of how long after the kill the peers attached to it had all their targets live again on
// the other nodes.
type failoverResult struct {
	Peers, Namespaces, Repeats int
	DocBytes                   int // text in each namespace, kept in a snapshot
	Cases                      []failoverCase
}

// failoverCase is one way of choosing the node that is killed.
type failoverCase struct {
	Name            string
	Runs            []failoverRun
	P50, P99, All   time.Duration // medians over Runs
	Skipped         int           // repeats where no node fitted the case
	BootstrapsAfter int           // snapshots imported after the kills, all runs
}

// failoverRun is one kill.
type failoverRun struct {
	Led           []string // what the killed node led of the cluster's JetStream groups
	P50, P99, All time.Duration
	Moved         []int // peers live on each surviving node afterwards
}

func (r failoverResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "failover: %d peers × %d namespaces (%d KiB each, from a snapshot) attached to the node killed (SIGKILL), until all their targets are live on another node; median of %d repeats:\n",
		r.Peers, r.Namespaces, r.DocBytes>>10, r.Repeats)
	fmt.Fprintf(&b, "  %-40s %9s %9s %9s  %s\n", "killed node", "p50", "p99", "all", "target all ≤ 3s")
	for _, c := range r.Cases {
		if len(c.Runs) == 0 {
			fmt.Fprintf(&b, "  %-40s no node fitted in %d repeats\n", c.Name, c.Skipped)
			continue
		}
		fmt.Fprintf(&b, "  %-40s %9v %9v %9v\n", c.Name, c.P50.Round(time.Millisecond), c.P99.Round(time.Millisecond), c.All.Round(time.Millisecond))
		for i, run := range c.Runs {
			led := strings.Join(run.Led, ", ")
			if led == "" {
				led = "nothing"
			}
			fmt.Fprintf(&b, "      run %d: all live after %v (p50 %v); it led %s; peers per surviving node %v\n",
				i+1, run.All.Round(time.Millisecond), run.P50.Round(time.Millisecond), led, run.Moved)
		}
		if c.BootstrapsAfter > 0 {
			fmt.Fprintf(&b, "      snapshots imported after the kills: %d (an up-to-date replica needs none)\n", c.BootstrapsAfter)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// The ways of choosing the node to kill.
const (
	killLogLeader = "the leader of the namespaces' log streams"
	killNonLeader = "a node leading none of them"
)

func runFailover(peers, namespaces, docBytes, repeats int) (failoverResult, error) {
	res := failoverResult{Peers: peers, Namespaces: namespaces, DocBytes: docBytes, Repeats: repeats}
	for _, name := range []string{killLogLeader, killNonLeader} {
		c := failoverCase{Name: name}
		for range repeats {
			run, ok, boots, err := failoverOnce(peers, namespaces, docBytes, name)
			if err != nil {
				return res, fmt.Errorf("%s: %w", name, err)
			}
			if !ok {
				c.Skipped++
				continue
			}
			c.Runs = append(c.Runs, run)
			c.BootstrapsAfter += boots
		}
		if len(c.Runs) > 0 {
			med := func(f func(failoverRun) time.Duration) time.Duration {
				v := make([]time.Duration, len(c.Runs))
				for i, r := range c.Runs {
					v[i] = f(r)
				}
				slices.Sort(v)
				return v[len(v)/2]
			}
			c.P50 = med(func(r failoverRun) time.Duration { return r.P50 })
			c.P99 = med(func(r failoverRun) time.Duration { return r.P99 })
			c.All = med(func(r failoverRun) time.Duration { return r.All })
		}
		res.Cases = append(res.Cases, c)
	}
	return res, nil
}

// failoverOnce starts three nodes, picks the node to kill as the case says (false: none
// fits), attaches the peers to it (every node's URL, it first, the others in turn in each
// peer's own order), kills it once every target is live and measures how long until each
// peer is live again.
func failoverOnce(peers, namespaces, docBytes int, kill string) (failoverRun, bool, int, error) {
	var run failoverRun
	c, err := startNodes("failover", 3, peers, namespaces, docBytes)
	if err != nil {
		return run, false, 0, err
	}
	defer c.stop()
	nss, streams := c.hubs[0].hello.Namespaces, c.hubs[0].hello.LogStreams
	victim := -1
	leads := make([][]string, len(c.hubs))
	for i, h := range c.hubs {
		u, err := h.usage()
		if err != nil {
			return run, false, 0, err
		}
		leads[i] = u.Leading
	}
	for i := range c.hubs {
		ledLogs := 0
		for _, s := range streams {
			if slices.Contains(leads[i], s) {
				ledLogs++
			}
		}
		switch {
		case kill == killLogLeader && ledLogs > 0 && (victim < 0 || ledLogs == len(streams)):
			victim = i
		case kill == killNonLeader && ledLogs == 0 && victim < 0:
			victim = i
		}
	}
	if victim < 0 {
		return run, false, 0, nil
	}
	run.Led = leads[victim]
	urls := c.urls()
	var others []string
	for i, u := range urls {
		if i != victim {
			others = append(others, u)
		}
	}
	cfg := node.ShippedConfig() // the binaries' settings: production backoff
	var ps []*peer
	var trackers []*liveTracker
	var boots []*bootstrapCounter
	defer func() { _ = stopAll(ps) }()
	for i := range peers {
		// Each peer lists the other nodes in its own order (the guide's advice), so that
		// they spread over the survivors.
		failover := append(append([]string(nil), others[i%len(others):]...), others[:i%len(others)]...)
		tr, bc := &liveTracker{n: namespaces}, &bootstrapCounter{}
		p, err := startPeerWith(filepath.Join(c.dir, peerName(i)), i, nss, ws.PeerOptions{Config: cfg,
			URL: urls[victim], FailoverURLs: failover, Observer: observer.Multi(tr, bc)})
		if err != nil {
			return run, false, 0, err
		}
		ps, trackers, boots = append(ps, p), append(trackers, tr), append(boots, bc)
	}
	if err := waitLive(ps, 5*time.Minute); err != nil {
		return run, false, 0, err
	}
	for _, b := range boots {
		b.reset()
	}
	killed := time.Now()
	_ = c.hubs[victim].kill()
	c.hubs[victim] = nil
	var took []time.Duration
	deadline := killed.Add(5 * time.Minute)
	for len(took) < peers {
		if time.Now().After(deadline) {
			return run, false, 0, fmt.Errorf("%d of %d peers live again after 5 minutes", len(took), peers)
		}
		time.Sleep(20 * time.Millisecond)
		took = took[:0]
		for _, tr := range trackers {
			if d, ok := tr.firstLiveIn([2]time.Time{killed, time.Now()}); ok {
				took = append(took, d)
			}
		}
	}
	run.P50, run.P99, run.All = percentiles(took)
	for _, u := range others {
		n := 0
		for _, p := range ps {
			if p.p.URL() == u {
				n++
			}
		}
		run.Moved = append(run.Moved, n)
	}
	bootstraps := 0
	for _, b := range boots {
		bootstraps += b.count()
	}
	return run, true, bootstraps, nil
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
