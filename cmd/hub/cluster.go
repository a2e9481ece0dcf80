package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/cluster"
	"github.com/nomicore/nomicore/node"
	"github.com/nomicore/nomicore/node/cli"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/yws"
)

// clusterFlags are the cluster flags of hub serve
// (docs/cluster.md#starting-three-nodes-on-one-machine). Without --cluster-listen and
// --nats-url the hub is a single process over its bbolt store.
type clusterFlags struct {
	name, node, listen, routes, natsURL, clientListen string
	replicas, logStreams                              int
	fsync                                             bool
	quorumTimeout                                     time.Duration
}

// defaultQuorumTimeout is --cluster-quorum-timeout's default: the cluster package's default
// probe (4 failed probes in a row, each a 2 s attempt then 1 s apart), longer than a leader
// election (4 to 9 s) so that the loss of one node of three does not count.
const defaultQuorumTimeout = cluster.DefaultProbeFailures * (cluster.DefaultProbeTimeout + cluster.DefaultProbeInterval)

// probe returns the quorum probe's pacing for a quorum timeout d: 4 probes in a row, each
// an attempt of d/6 then a pause of d/12, fail within d.
func probe(d time.Duration) (interval, timeout time.Duration, failures int) {
	return d / 12, d / 6, 4
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
		f.IntVar(&c.logStreams, "cluster-log-streams", cluster.DefaultLogStreams, "how many streams the logs of new namespaces are spread over (1 to 64; NOMICORE_LOG, NOMICORE_LOG_1, …), so that no one stream leader takes every write; a namespace keeps the stream it was created on, and the change feed follows them all")
		f.DurationVar(&c.quorumTimeout, "cluster-quorum-timeout", defaultQuorumTimeout, "how long this node fails to reach a quorum of the cluster before it refuses writes (PERSISTENCE_DEGRADED) and reports not ready; keep it above a leader election (4 to 9 s) so that losing one node of three does not count")
	})
	return c
}

// enabled reports cluster mode; a cluster flag without --cluster-listen or --nats-url is an
// error.
func (c *clusterFlags) enabled() (bool, error) {
	if c.listen != "" || c.natsURL != "" {
		return true, nil
	}
	if c.node != "" || c.name != "" || c.routes != "" || c.clientListen != "" || c.replicas != 0 || c.logStreams != cluster.DefaultLogStreams || c.fsync || c.quorumTimeout != defaultQuorumTimeout {
		return false, errors.New("cluster mode needs --cluster-listen HOST:PORT (embedded NATS) or --nats-url nats://… (an existing NATS cluster)")
	}
	return false, nil
}

// largestWrite is the largest update the hub takes as one write — a peer's live update or
// catch-up difference, in one message or (v2) in chunks, or a local write — which a
// cluster node publishes as one record of its log.
func largestWrite(p *protocol.Config) int {
	n := max(p.MaxUpdateBytes, p.MaxSyncDiffBytes)
	if p.Generation == protocol.GenerationV2 {
		n = max(n, p.MaxChunkedUpdateBytes, p.MaxChunkedSyncDiffBytes)
	}
	return n
}

// openHub opens the hub's store, registry and observability: a single hub over its bbolt
// store, or one node of a cluster (then the cluster node is returned too; nil otherwise).
// A cluster node carries every write the replication limits let in as one record of its
// log: the embedded NATS server is sized for it, and an existing NATS cluster whose
// max_payload is smaller is refused at start (raise max_payload, or lower the limits).
func openHub(data string, cf *clusterFlags, feed *persistence.ChangeFeedOptions, limits *protocol.Config, restored *node.Restored, clk clock.Clock, log *slog.Logger) (*node.Instance, *cluster.Node, error) {
	on, err := cf.enabled()
	if err != nil {
		return nil, nil, err
	}
	if restored != nil && restored.Pending && !on {
		return nil, nil, fmt.Errorf("data dir %s holds a hub cluster's backup to load (hub restore of a cluster's backup): start this hub as a node of a new cluster (--cluster-listen, --cluster-routes)", data)
	}
	if !on {
		inst, err := node.OpenInstanceFeed(data, registry.RoleHub, observer.SideHub, clk, log, feed)
		return inst, nil, err
	}
	if cf.quorumTimeout < time.Second {
		return nil, nil, fmt.Errorf("--cluster-quorum-timeout %v: give at least 1s (the default, %v, rides through a leader election)", cf.quorumTimeout, defaultQuorumTimeout)
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, nil, fmt.Errorf("data dir %s: %w", data, err)
	}
	interval, timeout, failures := probe(cf.quorumTimeout)
	n, err := cluster.Start(cluster.Config{
		NodeName: cf.node, DataDir: data, ClusterName: cf.name, ClusterListen: cf.listen,
		Routes: cluster.ParseRoutes(cf.routes), ClientListen: cf.clientListen, NATSURL: cf.natsURL,
		Replicas: cf.replicas, LogStreams: cf.logStreams, Fsync: cf.fsync, MaxUpdateBytes: largestWrite(limits), Clock: clk, Logger: log,
		ProbeInterval: interval, ProbeTimeout: timeout, ProbeFailures: failures,
	})
	if err != nil {
		return nil, nil, err
	}
	if got, want := n.MaxUpdateBytes(), largestWrite(limits); got < want {
		n.Close(context.Background())
		return nil, nil, fmt.Errorf("the NATS servers carry records of at most %d bytes (their max_payload), less than the largest write "+
			"this hub takes (%d bytes, --max-chunked-sync-diff-bytes and --max-chunked-update-bytes): raise max_payload on the NATS "+
			"servers to at least %d, or lower those limits on every hub node and peer", got, want, want+8<<10)
	}
	store := n.Store()
	reg, err := registry.New(registry.Config{Role: registry.RoleHub, Catalog: store, Shared: n, Clock: clk, StageClock: clk, Logger: log})
	if err != nil {
		n.Close(context.Background())
		return nil, nil, err
	}
	var loading *clusterRestore
	if restored != nil && restored.Pending {
		loading = startClusterRestore(n, reg, data, restored, log)
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
	if loading != nil {
		inst.Ready = func() error {
			if err := loading.Ready(); err != nil {
				return err
			}
			return n.Ready()
		}
	}
	log.Info("cluster node started", slog.String("node", cf.node), slog.String("cluster", cf.name),
		slog.String("clusterListen", cf.listen), slog.String("natsUrl", cf.natsURL), slog.String("natsClientURL", n.ClientURL()))
	return inst, n, nil
}

// gateCluster refuses peer connections (503 with Retry-After, before the upgrade) while a
// cluster node cannot serve them (ready, its Ready, says why): before it has quorum, while
// it has none, and after a restart until its replicas caught up with the cluster — until
// then opening a namespace may fail on it. The client's backoff brings it back (a peer with
// several hub URLs tries another node). Connections already open are not affected: their
// namespaces answer as degraded without quorum. On a single hub (ready nil) h is returned
// as it is.
func gateCluster(ready func() error, h http.Handler) http.Handler {
	if ready == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := ready(); err != nil {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "this hub node cannot serve yet: "+err.Error()+"; retry shortly", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// gateEditors is gateCluster for the editors' WebSocket endpoints of the client listener
// (y-websocket and Hocuspocus); its pages and assets are served regardless.
func gateEditors(ready func() error, h http.Handler) http.Handler {
	if ready == nil {
		return h
	}
	gated := gateCluster(ready, h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/yjs/") || r.URL.Path == yws.HocuspocusPath {
			gated.ServeHTTP(w, r)
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
