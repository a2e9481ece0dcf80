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
	"time"

	hubcluster "github.com/nomicore/nomicore/cluster"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/yjs"
)

// clusterResult compares a hub cluster of three nodes (embedded NATS, R3, in this process)
// with a single hub over bbolt, at the registry — where the hub answers a peer's UPDATE
// (UPDATE_ACK when the session's apply settles) and the admin API's POST …/update (204
// when the write is applied and durable):
//
//   - ack: a peer session writes small updates one after the other; the time from submit
//     to the settled apply. Single hub: sequenced apply + dirty notification (the append is
//     queued, not yet on disk, §1). Cluster: gates, quorum publish, apply in log order.
//   - durable: local writes, each waited for until durable (the admin API's 204): single
//     hub, the group commit's fsync; cluster, the same as ack.
//   - throughput: 20 namespaces, a session on each keeping 32 updates in flight (a peer's
//     window), 500 updates each: acknowledged updates per second. In the cluster, the
//     sessions are spread over the three nodes.
//   - load: a namespace of U updates opened on a node that has not loaded it: single hub,
//     from bbolt (snapshot + log after a reopen); cluster, from the newest snapshot (object
//     store) + the log after it, caught up to the head.
type clusterResult struct {
	Updates                              int
	SingleAckP50, SingleAckP99           time.Duration
	ClusterAckP50, ClusterAckP99         time.Duration
	SingleDurableP50, SingleDurableP99   time.Duration
	ClusterDurableP50, ClusterDurableP99 time.Duration
	LoadUpdates                          int
	SingleLoad, ClusterLoad              time.Duration
	ClusterLog                           hubcluster.LogInfo // the namespace's log when it was loaded
	SinglePerS, ClusterPerS              float64            // throughput: acknowledged updates per second
}

func (r clusterResult) String() string {
	ratio := func(a, b time.Duration) float64 { return float64(a) / float64(b) }
	return fmt.Sprintf(`cluster (3 nodes, R3, one process) vs single hub (bbolt), %d sequential writes each:
  write-to-ACK (peer UPDATE):   single p50 %v p99 %v; cluster p50 %v p99 %v (×%.1f / ×%.1f)
  write-to-durable (admin 204): single p50 %v p99 %v; cluster p50 %v p99 %v (×%.1f / ×%.1f)
  throughput, 20 namespaces × 32 in flight: single %.0f acknowledged updates/s; cluster %.0f/s (×%.2f)
  load of a namespace of %d updates: single (bbolt snapshot + log) %v; cluster %v (×%.1f): snapshot of %d bytes through position %d, %d records kept in the log`,
		r.Updates, r.SingleAckP50, r.SingleAckP99, r.ClusterAckP50, r.ClusterAckP99,
		ratio(r.ClusterAckP50, r.SingleAckP50), ratio(r.ClusterAckP99, r.SingleAckP99),
		r.SingleDurableP50, r.SingleDurableP99, r.ClusterDurableP50, r.ClusterDurableP99,
		ratio(r.ClusterDurableP50, r.SingleDurableP50), ratio(r.ClusterDurableP99, r.SingleDurableP99),
		r.SinglePerS, r.ClusterPerS, r.ClusterPerS/r.SinglePerS,
		r.LoadUpdates, r.SingleLoad, r.ClusterLoad, ratio(r.ClusterLoad, r.SingleLoad),
		r.ClusterLog.SnapshotBytes, r.ClusterLog.SnapshotThrough, r.ClusterLog.Records)
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

func runCluster(updates, loadUpdates int) (clusterResult, error) {
	res := clusterResult{Updates: updates, LoadUpdates: loadUpdates}
	dir, err := os.MkdirTemp("", "benchrepl-cluster-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	// Single hub over bbolt.
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
	c, err := reg.Create(ctx, "default")
	if err != nil {
		return res, err
	}
	if err := writeLatencies(ctx, reg, c.NamespaceID, updates, &res.SingleAckP50, &res.SingleAckP99, &res.SingleDurableP50, &res.SingleDurableP99); err != nil {
		return res, err
	}
	if res.SinglePerS, err = throughput(ctx, []*registry.Registry{reg}, 20, 500, 32); err != nil {
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

	// Three cluster nodes.
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
	c, err = regs[0].Create(ctx, "default")
	if err != nil {
		return res, err
	}
	// The other nodes follow the namespace, as when peers are attached to them.
	for _, r := range regs[1:] {
		l, err := r.Open(ctx, "default", c.NamespaceID)
		if err != nil {
			return res, err
		}
		defer l.Release()
	}
	if err := writeLatencies(ctx, regs[0], c.NamespaceID, updates, &res.ClusterAckP50, &res.ClusterAckP99, &res.ClusterDurableP50, &res.ClusterDurableP99); err != nil {
		return res, err
	}
	if res.ClusterPerS, err = throughput(ctx, regs, 20, 500, 32); err != nil {
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

// writeLatencies measures peer-session applies (ack) and durable local writes.
func writeLatencies(ctx context.Context, reg *registry.Registry, ns string, n int, ackP50, ackP99, durP50, durP99 *time.Duration) error {
	l, err := reg.Open(ctx, "default", ns)
	if err != nil {
		return err
	}
	defer l.Release()
	s, _, err := l.OpenSession(ctx, registry.SessionOptions{Peer: "bench"})
	if err != nil {
		return err
	}
	defer s.Close()
	for range 20 { // warm-up
		if _, err := s.Apply(ctx, benchUpdate(-1)); err != nil {
			return err
		}
	}
	if *ackP50, *ackP99, err = measure(n, 0, func(u []byte) error { _, err := s.Apply(ctx, u); return err }); err != nil {
		return err
	}
	*durP50, *durP99, err = measure(n, n, func(u []byte) error {
		r, err := l.WriteLocal(ctx, u)
		if err == nil && r.Seq > 0 {
			err = l.WaitFlushed(ctx, r.Seq)
		}
		return err
	})
	return err
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
// updates per second.
func throughput(ctx context.Context, regs []*registry.Registry, nsCount, perNS, window int) (float64, error) {
	var sessions []*registry.Session
	for i := range nsCount {
		c, err := regs[0].Create(ctx, "default")
		if err != nil {
			return 0, err
		}
		l, err := regs[i%len(regs)].Open(ctx, "default", c.NamespaceID)
		if err != nil {
			return 0, err
		}
		defer l.Release()
		s, _, err := l.OpenSession(ctx, registry.SessionOptions{Peer: "bench", MaxInFlight: window + 8})
		if err != nil {
			return 0, err
		}
		defer s.Close()
		sessions = append(sessions, s)
	}
	errc := make(chan error, len(sessions))
	t0 := time.Now()
	for i, s := range sessions {
		go func() {
			slots := make(chan struct{}, window)
			done := make(chan error, perNS)
			for k := range perNS {
				slots <- struct{}{}
				err := s.ApplyAsync(benchUpdate(200000+i*perNS+k), func(_ registry.ApplyResult, err error) {
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
			return 0, err
		}
	}
	return float64(nsCount*perNS) / time.Since(t0).Seconds(), nil
}
