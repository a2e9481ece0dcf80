package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/nomicore/nomicore/cluster"
	"github.com/nomicore/nomicore/internal/cli"
	"github.com/nomicore/nomicore/internal/clock"
	"github.com/nomicore/nomicore/internal/node"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/registry"
)

// clusterFlags are the cluster flags of hub serve (GUIDE §7). Without --cluster-listen and
// --nats-url the hub is a single process over its bbolt store.
type clusterFlags struct {
	name, node, listen, routes, natsURL, clientListen string
	replicas                                          int
	fsync                                             bool
}

func registerClusterFlags(f *cli.Flags) *clusterFlags {
	c := &clusterFlags{}
	f.Define("cluster (several hub processes acting as one hub; off unless --cluster-listen or --nats-url is given)", func() {
		f.StringVar(&c.node, "node-name", "", "this node's `NAME`, unique in the cluster and stable across restarts (e.g. n1)")
		f.StringVar(&c.name, "cluster-name", "", "with embedded NATS: the cluster's `NAME`, the same on every node")
		f.StringVar(&c.listen, "cluster-listen", "", "with embedded NATS: `HOST:PORT` of this node's route listener")
		f.StringVar(&c.routes, "cluster-routes", "", "with embedded NATS: the nodes' routes, `nats://H1:P1,nats://H2:P2,…` (this node's own may be listed)")
		f.StringVar(&c.natsURL, "nats-url", "", "use an existing NATS cluster with JetStream instead of embedding one: `nats://HOST:PORT` (several: comma-separated)")
		f.StringVar(&c.clientListen, "nats-client-listen", "", "with embedded NATS: also open a NATS client port on `HOST:PORT` (for the nats CLI; no authentication: keep it on loopback)")
		f.BoolVar(&c.fsync, "cluster-fsync", false, "with embedded NATS: sync every JetStream write to disk before acknowledging it (slower; survives a power loss of a quorum at once)")
		f.IntVar(&c.replicas, "cluster-replicas", 0, "copies of every stream and bucket (default min(3, nodes); 3 survives the loss of one node)")
	})
	return c
}

// enabled reports cluster mode; a cluster flag without --cluster-listen or --nats-url is an
// error.
func (c *clusterFlags) enabled() (bool, error) {
	if c.listen != "" || c.natsURL != "" {
		return true, nil
	}
	if c.node != "" || c.name != "" || c.routes != "" || c.clientListen != "" || c.replicas != 0 || c.fsync {
		return false, errors.New("cluster mode needs --cluster-listen HOST:PORT (embedded NATS) or --nats-url nats://… (an existing NATS cluster)")
	}
	return false, nil
}

// openHub opens the hub's store, registry and observability: a single hub over its bbolt
// store, or one node of a cluster (then the cluster node is returned too; nil otherwise).
func openHub(data string, cf *clusterFlags, clk clock.Clock, log *slog.Logger) (*node.Instance, *cluster.Node, error) {
	on, err := cf.enabled()
	if err != nil {
		return nil, nil, err
	}
	if !on {
		inst, err := node.OpenInstance(data, registry.RoleHub, observer.SideHub, clk, log)
		return inst, nil, err
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, nil, fmt.Errorf("data dir %s: %w", data, err)
	}
	n, err := cluster.Start(cluster.Config{
		NodeName: cf.node, DataDir: data, ClusterName: cf.name, ClusterListen: cf.listen,
		Routes: cluster.ParseRoutes(cf.routes), ClientListen: cf.clientListen, NATSURL: cf.natsURL,
		Replicas: cf.replicas, Fsync: cf.fsync, Clock: clk, Logger: log,
	})
	if err != nil {
		return nil, nil, err
	}
	store := n.Store()
	reg, err := registry.New(registry.Config{Role: registry.RoleHub, Store: store, Shared: n, Clock: clk, StageClock: clk, Logger: log})
	if err != nil {
		n.Close(context.Background())
		return nil, nil, err
	}
	inst, err := node.NewInstance(store, reg, observer.SideHub, clk, log, func() { n.Close(context.Background()) })
	if err != nil {
		return nil, nil, err
	}
	if err := n.RegisterMetrics(inst.Obs.Registry); err != nil {
		inst.Close()
		return nil, nil, err
	}
	inst.Ready = n.Ready
	log.Info("cluster node started", slog.String("node", cf.node), slog.String("cluster", cf.name),
		slog.String("clusterListen", cf.listen), slog.String("natsUrl", cf.natsURL), slog.String("natsClientURL", n.ClientURL()))
	return inst, n, nil
}

// gateReplication refuses peer connections (503, before the upgrade) while a cluster node
// has not had quorum since it started: it could neither load nor write a namespace yet, and
// the peer's backoff brings it back (or, with several hub URLs, to another node).
func gateReplication(n *cluster.Node, h http.Handler) http.Handler {
	if n == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !n.Started() {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "this hub node is joining its cluster; retry shortly", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// closeCluster is the last shutdown step of a cluster node (after the registry): the NATS
// connection and the embedded server.
func closeCluster(n *cluster.Node) func(context.Context) error {
	return func(ctx context.Context) error {
		if n == nil {
			return nil
		}
		return n.Close(ctx)
	}
}
