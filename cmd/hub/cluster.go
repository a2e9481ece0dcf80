package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/nomicore/nomicore/cluster"
	"github.com/nomicore/nomicore/internal/adminapi"
	"github.com/nomicore/nomicore/internal/clock"
	"github.com/nomicore/nomicore/internal/node"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
)

// clusterFlags are the cluster flags of hub serve (GUIDE §7). Without --cluster-listen and
// --nats-url the hub is a single process over its bbolt store.
type clusterFlags struct {
	name, node, listen, routes, natsURL, clientListen string
	replicas                                          int
	fsync                                             bool
}

func registerClusterFlags(fs *flag.FlagSet) *clusterFlags {
	c := &clusterFlags{}
	fs.StringVar(&c.node, "node-name", "", "cluster mode: this node's name, unique in the cluster and stable across restarts (e.g. n1)")
	fs.StringVar(&c.name, "cluster-name", "", "cluster mode with embedded NATS: the cluster's name, the same on every node")
	fs.StringVar(&c.listen, "cluster-listen", "", "cluster mode with embedded NATS: HOST:PORT of this node's route listener")
	fs.StringVar(&c.routes, "cluster-routes", "", "cluster mode with embedded NATS: the other nodes' routes, nats://H1:P1,nats://H2:P2,… (this node's own may be listed)")
	fs.StringVar(&c.natsURL, "nats-url", "", "cluster mode on an existing NATS cluster with JetStream: nats://HOST:PORT (several: comma-separated)")
	fs.StringVar(&c.clientListen, "nats-client-listen", "", "cluster mode with embedded NATS: also open a NATS client port on HOST:PORT (for the nats CLI; no authentication: keep it on loopback)")
	fs.BoolVar(&c.fsync, "cluster-fsync", false, "cluster mode with embedded NATS: sync every JetStream write to disk before acknowledging it (slower; survives a power loss of a quorum at once)")
	fs.IntVar(&c.replicas, "cluster-replicas", 0, "cluster mode: copies of every stream and bucket (default min(3, nodes); 3 survives the loss of one node)")
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

// hubInstance is what hub serve opens: a single hub over its bbolt store, or one node of a
// cluster.
type hubInstance struct {
	store persistence.Store
	reg   *registry.Registry
	obs   *node.Observability
	admin func(*node.Common) adminapi.Options
	ready func() error  // readiness for /readyz (nil: always ready)
	node  *cluster.Node // nil for a single hub
	close func()        // for a start-up that fails before the shutdown sequence owns it
}

// openHub opens the hub's store, registry and observability.
func openHub(data string, cf *clusterFlags, clk clock.Clock, log *slog.Logger) (*hubInstance, error) {
	on, err := cf.enabled()
	if err != nil {
		return nil, err
	}
	if !on {
		inst, err := node.OpenInstance(data, registry.RoleHub, observer.SideHub, clk, log)
		if err != nil {
			return nil, err
		}
		return &hubInstance{store: inst.Store, reg: inst.Registry, obs: inst.Obs, admin: inst.AdminOptions, close: inst.Close}, nil
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", data, err)
	}
	n, err := cluster.Start(cluster.Config{
		NodeName: cf.node, DataDir: data, ClusterName: cf.name, ClusterListen: cf.listen,
		Routes: cluster.ParseRoutes(cf.routes), ClientListen: cf.clientListen, NATSURL: cf.natsURL,
		Replicas: cf.replicas, Fsync: cf.fsync, Clock: clk, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	store := n.Store()
	reg, err := registry.New(registry.Config{Role: registry.RoleHub, Store: store, Shared: n, Clock: clk, StageClock: clk, Logger: log})
	if err != nil {
		n.Close(context.Background())
		return nil, err
	}
	in := &hubInstance{store: store, reg: reg, node: n, ready: n.Ready}
	in.close = func() {
		reg.Close(context.Background())
		n.Close(context.Background())
	}
	if in.obs, err = node.NewObservability(log, observer.SideHub); err == nil {
		if err = in.obs.RegisterStore(store, reg); err == nil {
			err = n.RegisterMetrics(in.obs.Registry)
		}
	}
	if err != nil {
		in.close()
		return nil, err
	}
	in.admin = func(c *node.Common) adminapi.Options {
		o := node.AdminOptionsFor(store, reg, in.obs, c, clk, log)
		o.Ready = n.Ready
		return o
	}
	log.Info("cluster node started", slog.String("node", cf.node), slog.String("cluster", cf.name),
		slog.String("clusterListen", cf.listen), slog.String("natsUrl", cf.natsURL), slog.String("natsClientURL", n.ClientURL()))
	return in, nil
}

// gateReplication refuses peer connections (503, before the upgrade) while a cluster node
// has not had quorum since it started: it could neither load nor write a namespace yet, and
// the peer's backoff brings it back (or, with several hub URLs, to another node).
func (in *hubInstance) gateReplication(h http.Handler) http.Handler {
	if in.node == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !in.node.Started() {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "this hub node is joining its cluster; retry shortly", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// closeCluster is the last shutdown step of a cluster node (after the registry): the NATS
// connection and the embedded server.
func (in *hubInstance) closeCluster(ctx context.Context) error {
	if in.node == nil {
		return nil
	}
	return in.node.Close(ctx)
}
