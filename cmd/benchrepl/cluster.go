package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	hubcluster "github.com/nomicore/nomicore/cluster"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/yjs"
)

// clusterResult compares a hub cluster of three nodes (embedded NATS, R3, in this process)
// with a single hub over bbolt, at the registry — where the hub answers a peer's UPDATE
// (UPDATE_ACK when the session's apply settles) and the admin API's POST …/update (204
// when the write is applied and durable). Both run on the same machine in the same run;
// the ratios and latencies are the medians of Repeats repeats, each measuring the single
// hub and then the cluster:
//
//   - ack: a peer session writes small updates one after the other; the time from submit
//     to the settled apply. Single hub: sequenced apply + dirty notification (the append is
//     queued, not yet on disk: docs/protocol.md#terms-and-invariants). Cluster: gates,
//     quorum publish, apply in log order.
//   - throughput: namespaces × a session on each keeping 32 updates in flight (a peer's
//     window), as many updates in all: acknowledged updates per second — 20 namespaces
//     (500 updates each) and 1 namespace (10,000). In the cluster, the sessions are spread
//     over the three nodes, the namespaces over the log streams. Under load p99 is the
//     99th percentile of write-to-ACK of those updates.
//
// and once: durable (local writes, each waited for until durable — the admin API's 204:
// single hub, the group commit's fsync; cluster, the same as ack), and load (a namespace
// of U updates opened on a node that has not loaded it: single hub, from bbolt (snapshot
// + log after a reopen); cluster, from the newest snapshot (object store) + the log after
// it, caught up to the head).
type clusterResult struct {
	Updates, Repeats int
	Rounds           []clusterRound // one per repeat
	Median           clusterRound   // the median of each figure over the repeats

	SingleDurableP50, SingleDurableP99   time.Duration
	ClusterDurableP50, ClusterDurableP99 time.Duration
	LoadUpdates                          int
	SingleLoad, ClusterLoad              time.Duration
	ClusterLog                           hubcluster.LogInfo // the namespace's log when it was loaded
}

// clusterRound is one repeat: the single hub's figures, then the cluster's.
type clusterRound struct {
	SingleAckP50, SingleAckP99   time.Duration
	ClusterAckP50, ClusterAckP99 time.Duration
	Single20, Cluster20          throughputResult // 20 namespaces × 32 in flight
	Single1, Cluster1            throughputResult // 1 namespace × 32 in flight
}

// throughputResult: acknowledged updates per second, and write-to-ACK under that load.
type throughputResult struct {
	PerS     float64
	P50, P99 time.Duration
}

func (r clusterRound) ratio20() float64 { return r.Cluster20.PerS / r.Single20.PerS }
func (r clusterRound) ratio1() float64  { return r.Cluster1.PerS / r.Single1.PerS }

// medianRound takes the median of each figure over the rounds (the ratios are medians of
// the rounds' ratios, not ratios of medians).
func medianRound(rs []clusterRound) clusterRound {
	md := func(f func(clusterRound) time.Duration) time.Duration {
		v := make([]time.Duration, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	mf := func(f func(clusterRound) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	tp := func(f func(clusterRound) throughputResult) throughputResult {
		return throughputResult{PerS: mf(func(r clusterRound) float64 { return f(r).PerS }),
			P50: md(func(r clusterRound) time.Duration { return f(r).P50 }),
			P99: md(func(r clusterRound) time.Duration { return f(r).P99 })}
	}
	return clusterRound{
		SingleAckP50: md(func(r clusterRound) time.Duration { return r.SingleAckP50 }), SingleAckP99: md(func(r clusterRound) time.Duration { return r.SingleAckP99 }),
		ClusterAckP50: md(func(r clusterRound) time.Duration { return r.ClusterAckP50 }), ClusterAckP99: md(func(r clusterRound) time.Duration { return r.ClusterAckP99 }),
		Single20: tp(func(r clusterRound) throughputResult { return r.Single20 }), Cluster20: tp(func(r clusterRound) throughputResult { return r.Cluster20 }),
		Single1: tp(func(r clusterRound) throughputResult { return r.Single1 }), Cluster1: tp(func(r clusterRound) throughputResult { return r.Cluster1 }),
	}
}

func medianRatio(rs []clusterRound, f func(clusterRound) float64) (float64, []string) {
	v := make([]float64, len(rs))
	all := make([]string, len(rs))
	for i, r := range rs {
		v[i] = f(r)
		all[i] = fmt.Sprintf("%.2f", v[i])
	}
	slices.Sort(v)
	return v[len(v)/2], all
}

func (r clusterResult) String() string {
	ratio := func(a, b time.Duration) float64 { return float64(a) / float64(b) }
	m := r.Median
	r20, all20 := medianRatio(r.Rounds, clusterRound.ratio20)
	r1, all1 := medianRatio(r.Rounds, clusterRound.ratio1)
	var b strings.Builder
	fmt.Fprintf(&b, "cluster (3 nodes, R3, one process) vs single hub (bbolt), same run, median of %d repeats:\n", r.Repeats)
	fmt.Fprintf(&b, "  %-34s %14s %14s %7s  %s\n", "workload", "single hub", "cluster", "ratio", "target")
	fmt.Fprintf(&b, "  %-34s %12.0f/s %12.0f/s %7.2f  ≥ 0.5 (repeats: %s)\n", "20 namespaces × 32 in flight", m.Single20.PerS, m.Cluster20.PerS, r20, strings.Join(all20, " "))
	fmt.Fprintf(&b, "  %-34s %12.0f/s %12.0f/s %7.2f  ≥ 0.5 (repeats: %s)\n", "1 namespace × 32 in flight", m.Single1.PerS, m.Cluster1.PerS, r1, strings.Join(all1, " "))
	fmt.Fprintf(&b, "  %-34s %14v %14v %7s  p99 ≤ 2ms\n", "write-to-ACK p99, one at a time", m.SingleAckP99.Round(time.Microsecond), m.ClusterAckP99.Round(time.Microsecond), "")
	fmt.Fprintf(&b, "  %-34s %14v %14v\n", "write-to-ACK p50, one at a time", m.SingleAckP50.Round(time.Microsecond), m.ClusterAckP50.Round(time.Microsecond))
	fmt.Fprintf(&b, "  %-34s %14v %14v\n", "write-to-ACK p99 under 20×32 load", m.Single20.P99.Round(time.Microsecond), m.Cluster20.P99.Round(time.Microsecond))
	fmt.Fprintf(&b, "  %-34s %14v %14v\n", "write-to-ACK p99 under 1×32 load", m.Single1.P99.Round(time.Microsecond), m.Cluster1.P99.Round(time.Microsecond))
	fmt.Fprintf(&b, "  write-to-durable (admin 204, %d writes): single p50 %v p99 %v; cluster p50 %v p99 %v (×%.1f / ×%.1f)\n", r.Updates,
		r.SingleDurableP50, r.SingleDurableP99, r.ClusterDurableP50, r.ClusterDurableP99,
		ratio(r.ClusterDurableP50, r.SingleDurableP50), ratio(r.ClusterDurableP99, r.SingleDurableP99))
	fmt.Fprintf(&b, "  load of a namespace of %d updates: single (bbolt snapshot + log) %v; cluster %v (×%.1f): snapshot of %d bytes through position %d, %d records kept in the log",
		r.LoadUpdates, r.SingleLoad, r.ClusterLoad, ratio(r.ClusterLoad, r.SingleLoad),
		r.ClusterLog.SnapshotBytes, r.ClusterLog.SnapshotThrough, r.ClusterLog.Records)
	return b.String()
}

// benchUpdate is a small update: key k of the root map "notes", from a fresh client.
func benchUpdate(k int) []byte {
	doc := yjs.NewDoc()
	var u []byte
	unsub := doc.OnUpdate(func(b []byte, _ any) { u = append([]byte(nil), b...) })
	defer unsub()
	doc.Transact(nil, func(*yjs.Transaction) { _ = doc.GetMap("notes").Set("k"+strconv.Itoa(k), float64(k)) })
	return u
}

func pcts(d []time.Duration) (time.Duration, time.Duration) {
	slices.Sort(d)
	return d[len(d)/2], d[len(d)*99/100]
}

// measure runs n sequential writes through f and returns p50 and p99.
func measure(n, offset int, f func(u []byte) error) (time.Duration, time.Duration, error) {
	lat := make([]time.Duration, 0, n)
	for i := range n {
		u := benchUpdate(offset + i)
		t0 := time.Now()
		if err := f(u); err != nil {
			return 0, 0, err
		}
		lat = append(lat, time.Since(t0))
	}
	p50, p99 := pcts(lat)
	return p50, p99, nil
}

func runCluster(updates, loadUpdates, repeats int) (clusterResult, error) {
	res := clusterResult{Updates: updates, LoadUpdates: loadUpdates, Repeats: repeats}
	dir, err := os.MkdirTemp("", "benchrepl-cluster-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	// The single hub over bbolt, and the three cluster nodes, both up for the whole run.
	single := func() (*registry.Registry, *persistence.BoltStore, error) {
		st, err := persistence.OpenDataDir(filepath.Join(dir, "single"), persistence.Options{Compactor: registry.Compactor()})
		if err != nil {
			return nil, nil, err
		}
		reg, err := registry.New(registry.Config{Role: registry.RoleHub, Catalog: st, Documents: st})
		return reg, st, err
	}
	reg, st, err := single()
	if err != nil {
		return res, err
	}
	nodes, regs, err := startBenchCluster(filepath.Join(dir, "cluster"), 3)
	defer func() {
		for i := range nodes {
			regs[i].Close(ctx)
			nodes[i].Close(ctx)
		}
	}()
	if err != nil {
		return res, err
	}
	for range repeats {
		var r clusterRound
		if r.SingleAckP50, r.SingleAckP99, err = ackLatency(ctx, []*registry.Registry{reg}, updates); err != nil {
			return res, err
		}
		if r.Single20, err = throughput(ctx, []*registry.Registry{reg}, 20, 500, 32); err != nil {
			return res, err
		}
		if r.Single1, err = throughput(ctx, []*registry.Registry{reg}, 1, 10000, 32); err != nil {
			return res, err
		}
		if r.ClusterAckP50, r.ClusterAckP99, err = ackLatency(ctx, regs, updates); err != nil {
			return res, err
		}
		if r.Cluster20, err = throughput(ctx, regs, 20, 500, 32); err != nil {
			return res, err
		}
		if r.Cluster1, err = throughput(ctx, regs, 1, 10000, 32); err != nil {
			return res, err
		}
		res.Rounds = append(res.Rounds, r)
	}
	res.Median = medianRound(res.Rounds)

	// Durable writes and the load, once.
	if res.SingleDurableP50, res.SingleDurableP99, err = durableLatency(ctx, []*registry.Registry{reg}, updates); err != nil {
		return res, err
	}
	loadNS, err := fillNamespace(ctx, reg, loadUpdates)
	if err != nil {
		return res, err
	}
	reg.Close(ctx)
	st.Close(ctx)
	if reg, st, err = single(); err != nil {
		return res, err
	}
	t0 := time.Now()
	l, err := reg.Open(ctx, "default", loadNS)
	if err != nil {
		return res, err
	}
	res.SingleLoad = time.Since(t0)
	l.Release()
	reg.Close(ctx)
	st.Close(ctx)

	if res.ClusterDurableP50, res.ClusterDurableP99, err = durableLatency(ctx, regs, updates); err != nil {
		return res, err
	}
	if loadNS, err = fillNamespace(ctx, regs[0], loadUpdates); err != nil {
		return res, err
	}
	// Let the compaction the writes started finish.
	time.Sleep(2 * time.Second)
	if res.ClusterLog, err = nodes[2].LogInfo(ctx, "default", loadNS); err != nil {
		return res, err
	}
	t0 = time.Now()
	l, err = regs[2].Open(ctx, "default", loadNS)
	if err != nil {
		return res, err
	}
	res.ClusterLoad = time.Since(t0)
	l.Release()
	return res, nil
}

// ackLatency creates a namespace, opens it on every registry (in a cluster the other
// nodes follow it, as when peers are attached to them) and measures n peer-session applies
// one after the other on the first.
func ackLatency(ctx context.Context, regs []*registry.Registry, n int) (p50, p99 time.Duration, err error) {
	c, err := regs[0].Create(ctx, "default")
	if err != nil {
		return 0, 0, err
	}
	for _, r := range regs[1:] {
		l, err := r.Open(ctx, "default", c.NamespaceID)
		if err != nil {
			return 0, 0, err
		}
		defer l.Release()
	}
	l, err := regs[0].Open(ctx, "default", c.NamespaceID)
	if err != nil {
		return 0, 0, err
	}
	defer l.Release()
	s, _, err := l.OpenSession(ctx, registry.SessionOptions{Peer: "bench"})
	if err != nil {
		return 0, 0, err
	}
	defer s.Close()
	for range 20 { // warm-up
		if _, err := s.Apply(ctx, benchUpdate(-1)); err != nil {
			return 0, 0, err
		}
	}
	return measure(n, 0, func(u []byte) error { _, err := s.Apply(ctx, u); return err })
}

// durableLatency measures n local writes on a fresh namespace of the first registry, each
// waited for until durable (the admin API's 204).
func durableLatency(ctx context.Context, regs []*registry.Registry, n int) (p50, p99 time.Duration, err error) {
	c, err := regs[0].Create(ctx, "default")
	if err != nil {
		return 0, 0, err
	}
	l, err := regs[0].Open(ctx, "default", c.NamespaceID)
	if err != nil {
		return 0, 0, err
	}
	defer l.Release()
	return measure(n, n, func(u []byte) error {
		r, err := l.WriteLocal(ctx, u)
		if err == nil && r.Seq > 0 {
			err = l.WaitFlushed(ctx, r.Seq)
		}
		return err
	})
}

// fillNamespace creates a namespace holding n updates (written as local writes; the registry's
// compaction or the store's folds what it folds).
func fillNamespace(ctx context.Context, reg *registry.Registry, n int) (string, error) {
	c, err := reg.Create(ctx, "default")
	if err != nil {
		return "", err
	}
	l, err := reg.Open(ctx, "default", c.NamespaceID)
	if err != nil {
		return "", err
	}
	defer l.Release()
	for i := range n {
		r, err := l.WriteLocal(ctx, benchUpdate(100000+i))
		if err != nil {
			return "", err
		}
		if i == n-1 && r.Seq > 0 {
			if err := l.WaitFlushed(ctx, r.Seq); err != nil {
				return "", err
			}
		}
	}
	return c.NamespaceID, nil
}

func startBenchCluster(dir string, n int) ([]*hubcluster.Node, []*registry.Registry, error) {
	var addrs, routes []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		addrs = append(addrs, ln.Addr().String())
		routes = append(routes, "nats://"+ln.Addr().String())
		ln.Close()
	}
	var nodes []*hubcluster.Node
	var regs []*registry.Registry
	for i := range n {
		node, err := hubcluster.Start(hubcluster.Config{NodeName: "n" + strconv.Itoa(i+1), DataDir: filepath.Join(dir, strconv.Itoa(i)),
			ClusterName: "bench", ClusterListen: addrs[i], Routes: routes, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return nodes, regs, err
		}
		reg, err := registry.New(registry.Config{Role: registry.RoleHub, Catalog: node.Store(), Shared: node})
		if err != nil {
			node.Close(context.Background())
			return nodes, regs, err
		}
		nodes, regs = append(nodes, node), append(regs, reg)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, node := range nodes {
		for !node.Healthy() {
			if time.Now().After(deadline) {
				return nodes, regs, fmt.Errorf("the cluster did not reach quorum: %v", node.Ready())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nodes, regs, nil
}

// throughput runs nsCount namespaces, each with one session (on the registries in turn)
// keeping window updates in flight until perNS were acknowledged; it returns acknowledged
// updates per second and the write-to-ACK percentiles of those updates. Each session's
// writer makes its updates as it goes, as a peer would.
func throughput(ctx context.Context, regs []*registry.Registry, nsCount, perNS, window int) (throughputResult, error) {
	var sessions []*registry.Session
	for i := range nsCount {
		c, err := regs[0].Create(ctx, "default")
		if err != nil {
			return throughputResult{}, err
		}
		l, err := regs[i%len(regs)].Open(ctx, "default", c.NamespaceID)
		if err != nil {
			return throughputResult{}, err
		}
		defer l.Release()
		s, _, err := l.OpenSession(ctx, registry.SessionOptions{Peer: "bench", MaxInFlight: window + 8})
		if err != nil {
			return throughputResult{}, err
		}
		defer s.Close()
		sessions = append(sessions, s)
	}
	lat := make([]time.Duration, nsCount*perNS)
	errc := make(chan error, len(sessions))
	t0 := time.Now()
	for i, s := range sessions {
		go func() {
			slots := make(chan struct{}, window)
			done := make(chan error, perNS)
			for k := range perNS {
				slots <- struct{}{}
				at := i*perNS + k
				u := benchUpdate(200000 + at)
				sent := time.Now()
				err := s.ApplyAsync(u, func(_ registry.ApplyResult, err error) {
					lat[at] = time.Since(sent)
					<-slots
					done <- err
				})
				if err != nil {
					errc <- err
					return
				}
			}
			for range perNS {
				if err := <-done; err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for range sessions {
		if err := <-errc; err != nil {
			return throughputResult{}, err
		}
	}
	r := throughputResult{PerS: float64(nsCount*perNS) / time.Since(t0).Seconds()}
	r.P50, r.P99 = pcts(lat)
	return r, nil
}
