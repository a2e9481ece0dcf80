package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/registry"
)

// Names of the cluster's JetStream resources (shared by every node).
const (
	StreamName     = "NOMICORE_LOG"
	subjectRoot    = "nomicore.log"
	EntriesBucket  = "nomicore_entries"
	ConfigBucket   = "nomicore_config"
	LeasesBucket   = "nomicore_leases"
	NodesBucket    = "nomicore_nodes"
	SnapshotBucket = "nomicore_snapshots"
	// duplicateWindow is how long the log remembers a record's id to drop a second copy.
	duplicateWindow = 2 * time.Minute
)

// Node is one hub process in a cluster: its NATS connection (and embedded server), the
// cluster's streams and buckets, and the quorum probe. It implements registry.SharedLog;
// Store gives its persistence.Catalog of namespace entries.
type Node struct {
	cfg         Config
	log         *slog.Logger
	srv         *server.Server // nil with Config.NATSURL
	srvUser     string         // the embedded server's client credentials, when it has no --nats-client-listen
	srvPass     string
	nc          *nats.Conn
	js          jetstream.JetStream
	incarnation string // this process's mark on the records it publishes
	metrics     *Metrics
	pub         *publisher

	life   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // init, probe and follower goroutines

	ready   chan struct{} // closed once the resources below exist
	res     resources     // set once, before ready is closed
	healthy atomic.Bool   // the quorum as the probe last judged it
	current atomic.Bool   // the node's replicas caught up with the cluster since it started

	probeFailures int                             // probes failed in a row; run goroutine only
	behind        atomic.Pointer[string]          // why the replicas are not current yet (nil: unknown)
	older         atomic.Pointer[OlderNodesError] // live nodes of an earlier version (upgrade.go), nil: none

	logsMu sync.Mutex // guards logs
	logs   map[*nsLog]struct{}

	awayMu     sync.Mutex           // guards leaderAway
	leaderAway map[string]time.Time // groups whose leader last went unanswered, and when (replica.go)

	streamsMu sync.Mutex               // guards streams and logOf
	streams   map[int]jetstream.Stream // the log streams opened so far, by index
	logOf     map[string]int           // the log stream of each namespace whose entry was read

	closeOnce sync.Once
}

// resources are the JetStream handles every node uses.
type resources struct {
	stream  jetstream.Stream // log stream 0, NOMICORE_LOG (the probes' stream)
	entries jetstream.KeyValue
	config  jetstream.KeyValue
	leases  jetstream.KeyValue
	nodes   jetstream.KeyValue
	snaps   jetstream.ObjectStore
}

var _ registry.SharedLog = (*Node)(nil)

// Start starts a node: the embedded NATS server (when configured), the connection, and —
// in the background, retried until a quorum of the cluster answers — the streams and
// buckets. It returns as soon as the connection is up; Healthy turns true once the node
// has quorum. Close stops it.
func Start(cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	inc := make([]byte, 8)
	if _, err := rand.Read(inc); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{
		cfg:         cfg,
		log:         cfg.Logger.With(slog.String("subsystem", "cluster"), slog.String("node", cfg.NodeName)),
		incarnation: hex.EncodeToString(inc),
		metrics:     newMetrics(),
		life:        ctx,
		cancel:      cancel,
		ready:       make(chan struct{}),
		logs:        make(map[*nsLog]struct{}),
		streams:     make(map[int]jetstream.Stream),
		logOf:       make(map[string]int),
		leaderAway:  make(map[string]time.Time),
	}
	if err := n.connect(); err != nil {
		cancel()
		n.shutdownServer()
		return nil, err
	}
	n.pub = newPublisher(n)
	n.wg.Add(1)
	go n.run()
	return n, nil
}

// connect starts the embedded server if any and connects to NATS.
func (n *Node) connect() error {
	opts := []nats.Option{
		nats.Name("nomicore-hub-" + n.cfg.NodeName),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				n.log.Warn("lost the connection to NATS; reconnecting", slog.String("error", err.Error()))
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) { n.log.Info("reconnected to NATS") }),
	}
	url := n.cfg.NATSURL
	if n.cfg.Embedded() {
		srv, err := n.startServer()
		if err != nil {
			return err
		}
		n.srv = srv
		opts = append(opts, nats.InProcessServer(srv))
		if n.srvUser != "" {
			opts = append(opts, nats.UserInfo(n.srvUser, n.srvPass))
		}
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return fmt.Errorf("connecting to NATS %s: %v", url, err)
	}
	js, err := jetstream.New(nc,
		jetstream.WithDefaultTimeout(n.cfg.OpTimeout),
		jetstream.WithPublishAsyncTimeout(min(attemptTimeout, n.cfg.PublishTimeout)),
		jetstream.WithPublishAsyncMaxPending(n.cfg.MaxPublishQueue),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) { n.pub.acked(m, nil) }),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) { n.pub.acked(m, err) }),
	)
	if err != nil {
		nc.Close()
		return err
	}
	n.nc, n.js = nc, js
	if room := int(nc.MaxPayload()) - messageOverhead - recordOverhead; room < n.cfg.MaxUpdateBytes {
		// An existing NATS cluster may carry less than the largest update (max_payload is
		// 1 MiB by default): this hub takes only updates that fit (Node.MaxUpdateBytes).
		n.log.Warn("the NATS servers' max_payload is below the largest update this hub takes: it takes only updates that fit; "+
			"raise max_payload on the NATS servers to take the hub's largest",
			slog.Int64("maxPayload", nc.MaxPayload()), slog.Int("largestUpdate", n.cfg.MaxUpdateBytes),
			slog.Int("maxPayloadNeeded", n.cfg.MaxUpdateBytes+recordOverhead+messageOverhead), slog.Int("takesUpTo", max(room, 0)))
		n.cfg.MaxUpdateBytes = max(room, 0)
	}
	return nil
}

// startServer starts the embedded NATS server with JetStream.
func (n *Node) startServer() (*server.Server, error) {
	c := &n.cfg
	host, portStr, _ := net.SplitHostPort(c.ClusterListen)
	port, _ := strconv.Atoi(portStr)
	if port == 0 {
		port = server.RANDOM_PORT
	}
	var routes []*url.URL
	for _, r := range c.Routes {
		u, _ := url.Parse(r)
		routes = append(routes, u)
	}
	o := &server.Options{
		ServerName: c.NodeName,
		JetStream:  true,
		StoreDir:   filepath.Join(c.DataDir, "jetstream"),
		MaxPayload: int32(c.MaxUpdateBytes + recordOverhead + messageOverhead),
		SyncAlways: c.Fsync,
		NoSigs:     true,
		Cluster:    server.ClusterOpts{Name: c.ClusterName, Host: host, Port: port},
		Routes:     routes,
	}
	if c.ClientListen != "" {
		h, p, _ := net.SplitHostPort(c.ClientListen)
		o.Host = h
		o.Port, _ = strconv.Atoi(p)
		if o.Port == 0 {
			o.Port = server.RANDOM_PORT
		}
	} else {
		// The server routes only once its client listener is up (it cannot run routes with
		// DontListen), so it gets one on a random loopback port, closed to everyone but this
		// process by a random password; the hub itself connects in-process.
		pw := make([]byte, 16)
		if _, err := rand.Read(pw); err != nil {
			return nil, err
		}
		o.Host, o.Port = "127.0.0.1", server.RANDOM_PORT
		o.Username, o.Password = "nomicore-hub", hex.EncodeToString(pw)
		n.srvUser, n.srvPass = o.Username, o.Password
	}
	srv, err := server.NewServer(o)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS server: %v", err)
	}
	logger := &serverLogger{log: n.cfg.Logger.With(slog.String("subsystem", "nats"), slog.String("node", c.NodeName)), clock: c.Clock}
	srv.SetLoggerV2(logger, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		srv.WaitForShutdown()
		if f := logger.fatal(); f != "" {
			return nil, fmt.Errorf("embedded NATS server: %s", f)
		}
		return nil, fmt.Errorf("embedded NATS server: not ready within 10s (is --cluster-listen %s free?)", c.ClusterListen)
	}
	return srv, nil
}

func (n *Node) shutdownServer() {
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
	}
}

// run creates the resources (retrying until a quorum answers), then probes the quorum.
func (n *Node) run() {
	defer n.wg.Done()
	backoff := 100 * time.Millisecond
	for {
		res, err := n.ensure()
		if err == nil {
			n.res = res
			close(n.ready)
			break
		}
		n.log.Info("waiting for the cluster to create its streams", slog.String("error", err.Error()))
		if !n.sleep(backoff) {
			return
		}
		backoff = min(2*backoff, 2*time.Second)
	}
	n.log.Info("cluster streams ready", slog.Int("replicas", n.cfg.Replicas))
	n.checkOlder() // before the first probe: no write passes beside a node of an earlier version
	n.wg.Add(1)
	go n.watchOlder()
	for {
		n.probe()
		if !n.current.Load() && n.healthy.Load() {
			n.checkCurrent()
		}
		if !n.sleep(n.cfg.ProbeInterval) {
			return
		}
	}
}

// checkCurrent checks whether the embedded server's replicas caught up with the cluster:
// its JetStream meta layer is current with the meta leader, and every stream (and bucket)
// it holds a replica of is current with its leader. A node restarted after a crash has
// quorum at once (its siblings form it) but catches up its replicas for a while, and
// until then a namespace may fail to open on it. A node on an existing NATS cluster
// (--nats-url) holds no replica of its own and is current at once. The follower
// consumers are left out: each node recreates its own.
func (n *Node) checkCurrent() {
	if n.srv != nil {
		hs := n.srv.Healthz(&server.HealthzOptions{Details: true})
		for _, e := range hs.Errors {
			if e.Type != server.HealthzErrorConsumer {
				reason := e.Error
				if old := n.behind.Swap(&reason); old == nil || *old != reason {
					n.log.Info("catching up with the cluster; peers are refused until then", slog.String("reason", reason))
				}
				return
			}
		}
	}
	n.current.Store(true)
	n.log.Info("caught up with the cluster: serving peers")
}

// sleep waits d on the node's clock, or until Close.
func (n *Node) sleep(d time.Duration) bool {
	fired := make(chan struct{})
	t := n.cfg.Clock.AfterFunc(d, func() { close(fired) })
	select {
	case <-fired:
		return true
	case <-n.life.Done():
		t.Stop()
		return false
	}
}

// ensure creates or opens the stream and the buckets.
func (n *Node) ensure() (resources, error) {
	var res resources
	ctx, cancel := context.WithTimeout(n.life, min(n.cfg.OpTimeout, 2*time.Second))
	defer cancel()
	r := n.cfg.Replicas
	var err error
	for k := range n.cfg.LogStreams {
		s, err := n.ensureLogStream(ctx, k)
		if err != nil {
			return res, err
		}
		n.streamsMu.Lock()
		n.streams[k] = s
		n.streamsMu.Unlock()
		if k == 0 {
			res.stream = s
		}
	}
	kv := func(cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
		cfg.Replicas, cfg.Storage = r, jetstream.FileStorage
		b, err := n.js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			b, err = n.js.KeyValue(ctx, cfg.Bucket)
		}
		return b, classify("creating bucket "+cfg.Bucket, n.cfg.OpTimeout, err)
	}
	if res.entries, err = kv(jetstream.KeyValueConfig{Bucket: EntriesBucket, Description: "Nomicore: namespace entries and their meta record", History: 1}); err != nil {
		return res, err
	}
	if res.config, err = kv(jetstream.KeyValueConfig{Bucket: ConfigBucket, Description: "Nomicore: the hub's configuration map", History: 1}); err != nil {
		return res, err
	}
	if res.leases, err = kv(jetstream.KeyValueConfig{Bucket: LeasesBucket, Description: "Nomicore: compaction leases", History: 1, TTL: n.cfg.LeaseTTL}); err != nil {
		return res, err
	}
	if res.nodes, err = kv(jetstream.KeyValueConfig{Bucket: NodesBucket, Description: "Nomicore: the hub nodes that follow namespace logs", History: 1}); err != nil {
		return res, err
	}
	res.snaps, err = n.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: SnapshotBucket,
		Description: "Nomicore: namespace snapshots, tagged with the log position they cover", Replicas: r, Storage: jetstream.FileStorage})
	if errors.Is(err, jetstream.ErrBucketExists) {
		res.snaps, err = n.js.ObjectStore(ctx, SnapshotBucket)
	}
	if err != nil {
		return res, classify("creating the snapshot bucket", n.cfg.OpTimeout, err)
	}
	b, _ := json.Marshal(nodeRecord{Incarnation: n.incarnation, Started: n.cfg.Clock.Now().UTC(), LogFormat: logFormat})
	if _, err := res.nodes.Put(ctx, n.cfg.NodeName, b); err != nil {
		return res, classify("registering the node", n.cfg.OpTimeout, err)
	}
	return res, nil
}

// maxMessageBytes is the largest message of a record this node publishes, headers included.
func (n *Node) maxMessageBytes() int {
	return n.cfg.MaxUpdateBytes + recordOverhead + messageOverhead
}

// MaxUpdateBytes is the largest update this node can publish as one record: its
// configured MaxUpdateBytes, or less when the NATS servers' max_payload is smaller. The
// hub takes no larger write (cmd/hub fits its replication limits to it).
func (n *Node) MaxUpdateBytes() int { return n.cfg.MaxUpdateBytes }

// nodeRecord is a node's entry in NodesBucket.
type nodeRecord struct {
	Incarnation string    `json:"incarnation"`
	Started     time.Time `json:"started"`
	// LogFormat is the log format the node writes (upgrade.go; absent: an earlier version).
	LogFormat int `json:"logFormat,omitempty"`
}

// probe writes one small message to the log stream (kept once per node by a roll-up): the
// node has quorum while such a write is acknowledged in time. It loses it after
// Config.ProbeFailures probes in a row failed — more than an election takes when a node
// dies (4 to 9 seconds without a leader), so that the loss of one node of three does not
// count — and regains it with the first that succeeds.
func (n *Node) probe() {
	ctx, cancel := context.WithTimeout(n.life, n.cfg.ProbeTimeout)
	defer cancel()
	err := retryUntil(ctx, func() error {
		m := nats.NewMsg(subjectRoot + ".probe." + n.cfg.NodeName)
		m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
		_, err := n.js.PublishMsg(ctx, m, jetstream.WithExpectStream(StreamName))
		return classify("probing the quorum", n.cfg.ProbeTimeout, err)
	})
	if n.life.Err() != nil {
		return
	}
	if err == nil {
		n.probeFailures = 0
		n.setHealthy(true, nil)
		return
	}
	n.probeFailures++
	if n.probeFailures >= n.cfg.ProbeFailures {
		n.setHealthy(false, err)
	}
}

// setHealthy records a quorum reading and logs a change.
func (n *Node) setHealthy(ok bool, err error) {
	if n.healthy.Swap(ok) == ok {
		return
	}
	n.metrics.quorumChanges.Inc()
	if ok {
		n.log.Info("cluster quorum regained: writes are accepted again")
	} else {
		msg := "cluster quorum lost: writes are refused (PERSISTENCE_DEGRADED to peers, 503 from the admin API), reads go on"
		if err != nil {
			n.log.Warn(msg, slog.String("error", err.Error()))
		} else {
			n.log.Warn(msg)
		}
	}
}

// Healthy reports whether the node has quorum: its streams exist and its last probe write
// was acknowledged within Config.ProbeTimeout (registry.SharedLog); and whether it may
// write: no node of an earlier version is alive (upgrade.go).
func (n *Node) Healthy() bool {
	select {
	case <-n.ready:
		return n.healthy.Load() && n.older.Load() == nil
	default:
		return false
	}
}

// Ready returns nil while the node can serve (for /readyz and the replication
// listener's gate), else why not: it has quorum now, and its replicas caught up with the
// cluster since it started.
func (n *Node) Ready() error {
	select {
	case <-n.ready:
	default:
		return errors.New("the cluster's streams are not ready (waiting for a quorum of nodes)")
	}
	if !n.healthy.Load() {
		return errors.New("no cluster quorum")
	}
	if e := n.older.Load(); e != nil {
		return e
	}
	if !n.current.Load() {
		if r := n.behind.Load(); r != nil {
			return fmt.Errorf("catching up with the cluster (%s)", *r)
		}
		return errors.New("catching up with the cluster")
	}
	return nil
}

// resources waits (bounded by ctx) for the node's resources.
func (n *Node) resources(ctx context.Context) (*resources, error) {
	select {
	case <-n.ready:
		return &n.res, nil
	default:
	}
	select {
	case <-n.ready:
		return &n.res, nil
	case <-ctx.Done():
		return nil, ErrNotReady
	case <-n.life.Done():
		return nil, &UnavailableError{Op: "using the cluster", Err: errors.New("the node is closed")}
	}
}

// Name returns the node name.
func (n *Node) Name() string { return n.cfg.NodeName }

// ClientURL returns the embedded server's client URL ("" when it has no client port).
func (n *Node) ClientURL() string {
	if n.srv == nil || n.cfg.ClientListen == "" {
		return ""
	}
	return n.srv.ClientURL()
}

// Conn returns the node's connection to the cluster's NATS, for what travels on core
// subjects beside the log (editors' presence). It is closed by Close.
func (n *Node) Conn() *nats.Conn { return n.nc }

// Metrics returns the node's Prometheus collectors.
func (n *Node) Metrics() *Metrics { return n.metrics }

// Close stops the node: the followers and the probe, the publisher (records still waiting
// are answered unavailable), the connection (flushed) and the embedded server. The
// registry must be closed first. Idempotent.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() {
		n.cancel()
		n.logsMu.Lock()
		logs := make([]*nsLog, 0, len(n.logs))
		for l := range n.logs {
			logs = append(logs, l)
		}
		n.logsMu.Unlock()
		for _, l := range logs {
			l.Close()
		}
		n.pub.close()
		n.wg.Wait()
		if err := n.nc.FlushWithContext(ctx); err != nil {
			n.log.Debug("flushing the NATS connection at close", slog.String("error", err.Error()))
		}
		n.nc.Close()
		n.shutdownServer()
	})
	return nil
}

// serverLogger sends the embedded server's log to slog: notices and debug lines at debug
// level (the server is chatty at start), warnings and errors as warnings — at most one
// line per message format every serverLogEvery (a sibling that is down makes the server
// retry its routes several times a second). A fatal error is kept for Start to report.
type serverLogger struct {
	log   *slog.Logger
	clock clock.Clock
	mu    sync.Mutex           // guards f and last
	f     string               // the first fatal error
	last  map[string]time.Time // when each format was last logged
}

// serverLogEvery is how often one message of the embedded server is repeated at most.
const serverLogEvery = 30 * time.Second

func (l *serverLogger) Noticef(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Debugf(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Tracef(format string, v ...any)  {}
func (l *serverLogger) Warnf(format string, v ...any)   { l.warn(format, v) }
func (l *serverLogger) Errorf(format string, v ...any)  { l.warn(format, v) }

func (l *serverLogger) warn(format string, v []any) {
	now := l.clock.Now()
	l.mu.Lock()
	if t, ok := l.last[format]; ok && now.Sub(t) < serverLogEvery {
		l.mu.Unlock()
		return
	}
	if l.last == nil || len(l.last) > 1024 {
		l.last = make(map[string]time.Time)
	}
	l.last[format] = now
	l.mu.Unlock()
	l.log.Warn(fmt.Sprintf(format, v...))
}
func (l *serverLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.log.Error(msg)
	l.mu.Lock()
	if l.f == "" {
		l.f = msg
	}
	l.mu.Unlock()
}

func (l *serverLogger) fatal() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f
}
