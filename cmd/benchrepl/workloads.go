package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/yjs"
)

func targetOf(ns string) namespace.Target { return namespace.Target{NamespaceID: ns, Owner: peerOwner} }

// The three workloads: fan-out, many namespaces, bootstrap. Each
// runs the hub in a child process and the peers in this one, over real WebSockets on
// loopback, every instance on its own bbolt store.

// fanoutResult: P peers on one namespace, each writing U small updates as fast as the
// windows allow; every write's propagation latency to every other peer.
type fanoutResult struct {
	Peers, Updates int
	Deliveries     int           // writes × receiving peers
	Submitted      time.Duration // first write to the last write submitted locally
	Wall           time.Duration // first write to last delivery
	P50, P99, Max  time.Duration
	DeliveredPerS  float64
	HubCPU         time.Duration
}

func (r fanoutResult) String() string {
	return fmt.Sprintf("fan-out: %d peers × %d updates on one namespace (all written within %v): %d deliveries in %v — %.0f delivered updates/s; propagation p50 %v, p99 %v, max %v; hub CPU %v",
		r.Peers, r.Updates, r.Submitted.Round(time.Millisecond), r.Deliveries, r.Wall.Round(time.Millisecond), r.DeliveredPerS,
		r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), r.Max.Round(10*time.Microsecond), r.HubCPU.Round(time.Millisecond))
}

func runFanout(peers, updates int) (fanoutResult, error) {
	res := fanoutResult{Peers: peers, Updates: updates}
	c, err := startCluster("fanout", hubSpec{Peers: peers, Namespaces: 1}, peers, 2*time.Minute)
	if err != nil {
		return res, err
	}
	defer c.stop()
	return measureFanout([]*hubProc{c.hub}, c.peers, c.hub.hello.Namespaces[0], updates)
}

// measureFanout runs the fan-out on peers replicating ns, each writing updates: the
// propagation latency of every write to every other peer, and the CPU time the hub
// processes spent meanwhile (summed).
func measureFanout(hubs []*hubProc, ps []*peer, ns string, updates int) (fanoutResult, error) {
	res := fanoutResult{Peers: len(ps), Updates: updates}
	var err error
	ctx := context.Background()
	leases := make([]*registry.Lease, len(ps))
	writers := make([]*writer, len(ps))
	for i, p := range ps {
		if leases[i], err = p.reg.Open(ctx, peerOwner, ns); err != nil {
			return res, err
		}
		defer leases[i].Release()
		writers[i] = newWriter(leases[i], updates)
	}
	watches := make([]*arrivals, len(ps))
	for i := range ps {
		if watches[i], err = watchArrivals(leases[i], writers, writers[i]); err != nil {
			return res, err
		}
		defer watches[i].stop()
	}
	before := make([]usage, len(hubs))
	for i, hub := range hubs {
		if before[i], err = hub.usage(); err != nil {
			return res, err
		}
	}
	start := time.Now()
	if err := runAll(ctx, writers); err != nil {
		return res, err
	}
	res.Submitted = time.Since(start)
	if err := waitFor(2*time.Minute, func() bool {
		for _, a := range watches {
			if !a.complete() {
				return false
			}
		}
		return true
	}); err != nil {
		var why []string
		for i, a := range watches {
			a.mu.Lock()
			why = append(why, fmt.Sprintf("%s next=%v", ps[i].id, a.next))
			a.mu.Unlock()
			for _, st := range ps[i].tc.Targets() {
				why = append(why, string(st.State))
			}
		}
		return res, fmt.Errorf("fan-out did not complete: %w (%v)", err, why)
	}
	for i, hub := range hubs {
		after, err := hub.usage()
		if err != nil {
			return res, err
		}
		res.HubCPU += after.cpuSince(before[i])
	}
	var lat []time.Duration
	var last time.Time
	for _, a := range watches {
		a.mu.Lock()
		lat = append(lat, a.lat...)
		if a.last.After(last) {
			last = a.last
		}
		a.mu.Unlock()
	}
	slices.Sort(lat)
	res.Deliveries = len(lat)
	res.Wall = last.Sub(start)
	res.P50, res.P99, res.Max = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	res.DeliveredPerS = float64(len(lat)) / res.Wall.Seconds()
	return res, nil
}

// namespacesResult: N namespaces, P peers each replicating all of them and writing U
// updates into each; wall time until every replica holds every write, and the hub's CPU.
type namespacesResult struct {
	Namespaces, Peers, Updates int
	Wall                       time.Duration
	HubCPU                     time.Duration
	HubMaxRSSKB                int64
}

func (r namespacesResult) String() string {
	return fmt.Sprintf("namespaces: %d namespaces × %d peers × %d updates: converged in %v; hub CPU %v (%.0f%% of one core), hub peak RSS %d MiB",
		r.Namespaces, r.Peers, r.Updates, r.Wall.Round(time.Millisecond), r.HubCPU.Round(time.Millisecond),
		100*r.HubCPU.Seconds()/r.Wall.Seconds(), r.HubMaxRSSKB/1024)
}

func runNamespaces(namespaces, peers, updates int) (namespacesResult, error) {
	res := namespacesResult{Namespaces: namespaces, Peers: peers, Updates: updates}
	c, err := startCluster("namespaces", hubSpec{Peers: peers, Namespaces: namespaces}, peers, 5*time.Minute)
	if err != nil {
		return res, err
	}
	defer c.stop()
	hub, ps, nss := c.hub, c.peers, c.hub.hello.Namespaces
	ctx := context.Background()
	// One writer and one lease per (peer, namespace), held for the run.
	type replica struct {
		lease *registry.Lease
		w     *writer
	}
	reps := make([][]replica, len(ps))
	var writers []*writer
	for i, p := range ps {
		for _, ns := range nss {
			l, err := p.reg.Open(ctx, peerOwner, ns)
			if err != nil {
				return res, err
			}
			defer l.Release()
			w := newWriter(l, updates)
			reps[i] = append(reps[i], replica{l, w})
			writers = append(writers, w)
		}
	}
	before, err := hub.usage()
	if err != nil {
		return res, err
	}
	start := time.Now()
	if err := runAll(ctx, writers); err != nil {
		return res, err
	}
	// Converged when every replica of a namespace holds every writer's last write.
	want := make([]yjs.StateVector, len(nss))
	for j := range nss {
		want[j] = yjs.StateVector{}
		for i := range ps {
			want[j][reps[i][j].w.client()] = uint64(updates)
		}
	}
	if err := waitFor(5*time.Minute, func() bool {
		for i := range ps {
			for j := range nss {
				b, err := reps[i][j].lease.StateVector(ctx)
				if err != nil {
					return false
				}
				sv, err := yjs.DecodeStateVector(b)
				if err != nil {
					return false
				}
				for c, n := range want[j] {
					if sv[c] < n {
						return false
					}
				}
			}
		}
		return true
	}); err != nil {
		return res, fmt.Errorf("namespaces did not converge: %w", err)
	}
	res.Wall = time.Since(start)
	after, err := hub.usage()
	if err != nil {
		return res, err
	}
	res.HubCPU = after.cpuSince(before)
	res.HubMaxRSSKB = after.MaxRSSKB
	return res, nil
}

// bootstrapResult: a fresh peer bootstrapping a namespace of about DocBytes.
type bootstrapResult struct {
	DocBytes      int
	SnapshotBytes int
	Runs          int
	Median, Min   time.Duration
}

func (r bootstrapResult) String() string {
	return fmt.Sprintf("bootstrap: a %d KB document (%d KB snapshot) to a fresh peer, target added → live: median %v, best %v over %d runs",
		r.DocBytes>>10, r.SnapshotBytes>>10, r.Median.Round(100*time.Microsecond), r.Min.Round(100*time.Microsecond), r.Runs)
}

func runBootstrap(docBytes, runs int) (bootstrapResult, error) {
	res := bootstrapResult{DocBytes: docBytes, Runs: runs}
	// Tokens for one fresh peer a run; they start one at a time below.
	c, err := startCluster("bootstrap", hubSpec{Peers: runs, Namespaces: 1, DocBytes: docBytes}, 0, 0)
	if err != nil {
		return res, err
	}
	defer c.stop()
	ns := c.hub.hello.Namespaces[0]
	var times []time.Duration
	for i := range runs {
		p, err := startPeer(filepath.Join(c.dir, peerName(i)), i, c.hub.hello.URL, nil)
		if err != nil {
			return res, err
		}
		if err := waitFor(time.Minute, func() bool { return p.p.State() == "ready" }); err != nil {
			_ = p.stop()
			return res, err
		}
		start := time.Now()
		if err := p.tc.AddTarget(targetOf(ns)); err != nil {
			_ = p.stop()
			return res, err
		}
		err = waitLive([]*peer{p}, time.Minute)
		elapsed := time.Since(start)
		if err == nil && res.SnapshotBytes == 0 {
			res.SnapshotBytes, err = snapshotSize(p.reg, ns)
		}
		if stopErr := p.stop(); err == nil {
			err = stopErr
		}
		if err != nil {
			return res, err
		}
		times = append(times, elapsed)
	}
	slices.Sort(times)
	res.Median, res.Min = times[len(times)/2], times[0]
	return res, nil
}

func snapshotSize(reg *registry.Registry, ns string) (int, error) {
	ctx := context.Background()
	l, err := reg.Open(ctx, peerOwner, ns)
	if err != nil {
		return 0, err
	}
	defer l.Release()
	b, err := l.EncodeState(ctx, nil)
	return len(b), err
}

// ---- helpers ------------------------------------------------------------------------------------

// cluster is a workload's hub (a child process) and its peers (in this process), each on
// its own store in one temporary directory.
type cluster struct {
	dir   string
	hub   *hubProc
	peers []*peer
}

// startCluster starts the hub of spec and then peers peers replicating all its namespaces,
// and waits up to live for every target to be live. On an error it stops what it started.
func startCluster(name string, spec hubSpec, peers int, live time.Duration) (*cluster, error) {
	dir, err := os.MkdirTemp("", "benchrepl-"+name+"-")
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir}
	spec.Dir = filepath.Join(dir, "hub")
	if c.hub, err = startHub(spec); err == nil {
		err = c.startPeers(peers)
	}
	if err == nil {
		err = waitLive(c.peers, live)
	}
	if err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

func (c *cluster) startPeers(n int) error {
	for i := range n {
		p, err := startPeer(filepath.Join(c.dir, peerName(i)), i, c.hub.hello.URL, c.hub.hello.Namespaces)
		if err != nil {
			return err
		}
		c.peers = append(c.peers, p)
	}
	return nil
}

// stop stops the peers, then the hub, and removes the directory.
func (c *cluster) stop() {
	_ = stopAll(c.peers)
	if c.hub != nil {
		_ = c.hub.stop()
	}
	_ = os.RemoveAll(c.dir)
}

// runAll runs every writer concurrently.
func runAll(ctx context.Context, writers []*writer) error {
	var wg sync.WaitGroup
	errs := make([]error, len(writers))
	for i, w := range writers {
		wg.Go(func() { errs[i] = w.run(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func waitFor(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}
