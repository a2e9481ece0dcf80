package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nomicore/nomicore/clock"
)

// Config configures one hub node of a cluster. Either the node embeds a NATS server
// (ClusterListen set; Routes name the other nodes) or it uses an existing NATS cluster
// (NATSURL set).
type Config struct {
	// NodeName names this node in the cluster: unique, stable across restarts (the
	// embedded server's name, and the origin of the records it publishes).
	NodeName string
	// DataDir is the hub's data directory; an embedded server keeps its JetStream store
	// under DataDir/jetstream.
	DataDir string

	// ClusterName, ClusterListen and Routes configure the embedded server: the NATS
	// cluster's name, this node's route listener (HOST:PORT), and the route URLs of the
	// other nodes (nats://HOST:PORT; this node's own may be listed too).
	ClusterName   string
	ClusterListen string
	Routes        []string
	// ClientListen, when set, opens a NATS client port on the embedded server (HOST:PORT),
	// for the nats CLI or monitoring; empty: the hub connects in-process and no client port
	// is open.
	ClientListen string
	// NATSURL, instead of the above, connects to an existing NATS cluster with JetStream.
	NATSURL string
	// Fsync makes the embedded server sync every JetStream write to disk before it counts
	// (sync_interval: always). Without it a record is acknowledged once a quorum of nodes
	// holds it in memory and the OS's page cache (synced every 2 minutes): a process crash
	// loses nothing, a power loss of a quorum at once may.
	Fsync bool

	// LogStreams is the number of streams the logs of new namespaces are spread over
	// (1…64; zero: DefaultLogStreams). A namespace keeps the stream it was created on;
	// nodes may differ (see streams.go).
	LogStreams int

	// Replicas is the number of copies of every stream and bucket (1…5); zero means
	// min(3, the number of nodes the routes name) when embedding, 3 with NATSURL.
	Replicas int

	// OpTimeout bounds every JetStream request (zero: DefaultOpTimeout); PublishTimeout
	// every record publish, from the first send to the stream's acknowledgement (attempts
	// that get no answer are repeated within it). Keep it below the registry's
	// SharedApplyTimeout, itself below the peers' ackTimeout.
	OpTimeout      time.Duration
	PublishTimeout time.Duration
	// ProbeInterval and ProbeTimeout pace the quorum probe: a small write to the log
	// stream; the node has quorum while the last one was acknowledged in time.
	ProbeInterval, ProbeTimeout time.Duration
	// ProbeFailures is how many probes in a row must fail before the node counts itself
	// without quorum (zero: DefaultProbeFailures).
	ProbeFailures int
	// MaxPublishQueue bounds the records waiting to be published (overflow: refuse the
	// newest at once, ErrPublishQueueFull).
	MaxPublishQueue int
	// MaxUpdateBytes is the largest update one record of the log carries: the hub's
	// largest write (a peer's catch-up difference, a live update). The embedded server's
	// max_payload and the stream's message limit are set from it; on an existing NATS
	// cluster whose max_payload is smaller it is lowered to fit (Node.MaxUpdateBytes).
	MaxUpdateBytes int
	// CompactAfterRecords and CompactAfterBytes: once the log of a namespace grew this much
	// past its snapshot, the node holding it compacts (under a lease).
	CompactAfterRecords int
	CompactAfterBytes   int
	// LeaseTTL is how long a compaction lease lasts without renewal.
	LeaseTTL time.Duration

	// Clock times publishes and probes; nil means the real clock.
	Clock clock.Clock
	// Logger receives the node's events; nil discards them.
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultOpTimeout           = 5 * time.Second
	DefaultPublishTimeout      = 20 * time.Second
	DefaultProbeInterval       = time.Second
	DefaultProbeTimeout        = 2 * time.Second
	DefaultProbeFailures       = 4
	DefaultMaxPublishQueue     = 8192
	DefaultMaxUpdateBytes      = 32 << 20 // the binaries' largest catch-up difference
	DefaultCompactAfterRecords = 1000
	DefaultCompactAfterBytes   = 16 << 20
	DefaultLeaseTTL            = 30 * time.Second
	// attemptTimeout bounds one attempt to publish a record.
	attemptTimeout = 2 * time.Second
	// maxNATSPayload is the NATS server's hard limit on a message.
	maxNATSPayload = 64 << 20
	// recordOverhead bounds a record's bytes around its update; messageOverhead the
	// headers of its message (its id, the stream it expects).
	recordOverhead  = 128
	messageOverhead = 4 << 10
	// MaxLogUpdateBytes is the largest update a record can carry at all.
	MaxLogUpdateBytes = maxNATSPayload - messageOverhead - recordOverhead
)

var nodeNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// Embedded reports whether the node embeds its NATS server.
func (c *Config) Embedded() bool { return c.NATSURL == "" }

// validate checks c and fills in the defaults. Errors name the hub's flags.
func (c *Config) validate() error {
	if !nodeNameRE.MatchString(c.NodeName) {
		return fmt.Errorf("--node-name %q must match ^[a-z][a-z0-9-]{0,62}$ and be unique in the cluster", c.NodeName)
	}
	if c.Embedded() {
		if c.ClusterName == "" || strings.ContainsAny(c.ClusterName, " \t.*>") {
			return fmt.Errorf("--cluster-name %q: give every node the same name, without spaces, dots, * or >", c.ClusterName)
		}
		if _, err := hostPort("--cluster-listen", c.ClusterListen); err != nil {
			return err
		}
		for _, r := range c.Routes {
			u, err := url.Parse(r)
			if err != nil || u.Scheme != "nats" || u.Host == "" {
				return fmt.Errorf("--cluster-routes: %q is not nats://HOST:PORT", r)
			}
			if _, err := hostPort("--cluster-routes", u.Host); err != nil {
				return err
			}
		}
		if c.ClientListen != "" {
			if _, err := hostPort("--nats-client-listen", c.ClientListen); err != nil {
				return err
			}
		}
		if c.DataDir == "" {
			return errors.New("--data must name a directory (the JetStream store goes under DATA/jetstream)")
		}
	} else {
		if c.ClusterListen != "" || len(c.Routes) > 0 || c.ClientListen != "" {
			return errors.New("--nats-url uses an existing NATS cluster: leave out --cluster-listen, --cluster-routes and --nats-client-listen")
		}
		if u, err := url.Parse(c.NATSURL); err != nil || (u.Scheme != "nats" && u.Scheme != "tls") {
			return fmt.Errorf("--nats-url %q is not nats://HOST:PORT (several: comma-separated)", c.NATSURL)
		}
	}
	if c.Replicas == 0 {
		c.Replicas = c.defaultReplicas()
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		return fmt.Errorf("--cluster-replicas %d: must be 1 to 5 (3 survives the loss of one node)", c.Replicas)
	}
	if c.LogStreams == 0 {
		c.LogStreams = DefaultLogStreams
	}
	if c.LogStreams < 1 || c.LogStreams > maxLogStreams {
		return fmt.Errorf("--cluster-log-streams %d: must be 1 to %d", c.LogStreams, maxLogStreams)
	}
	setDefault(&c.OpTimeout, DefaultOpTimeout)
	setDefault(&c.PublishTimeout, DefaultPublishTimeout)
	setDefault(&c.ProbeInterval, DefaultProbeInterval)
	setDefault(&c.ProbeTimeout, DefaultProbeTimeout)
	setDefault(&c.ProbeFailures, DefaultProbeFailures)
	setDefault(&c.LeaseTTL, DefaultLeaseTTL)
	setDefault(&c.MaxPublishQueue, DefaultMaxPublishQueue)
	setDefault(&c.MaxUpdateBytes, DefaultMaxUpdateBytes)
	setDefault(&c.CompactAfterRecords, DefaultCompactAfterRecords)
	setDefault(&c.CompactAfterBytes, DefaultCompactAfterBytes)
	if c.MaxUpdateBytes > MaxLogUpdateBytes {
		return fmt.Errorf("the largest update this hub takes (%d bytes: --max-chunked-sync-diff-bytes, --max-chunked-update-bytes) "+
			"does not fit in one record of the cluster log: NATS carries at most %d bytes in one message; lower them to %d or less",
			c.MaxUpdateBytes, maxNATSPayload, MaxLogUpdateBytes)
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// defaultReplicas is min(3, nodes): the nodes are this one and the distinct routes that
// are not its own listener.
func (c *Config) defaultReplicas() int {
	if !c.Embedded() {
		return 3
	}
	self := c.ClusterListen
	seen := map[string]bool{}
	for _, r := range c.Routes {
		if u, err := url.Parse(r); err == nil && u.Host != self {
			seen[u.Host] = true
		}
	}
	return min(3, 1+len(seen))
}

func setDefault[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

func hostPort(flag, s string) (int, error) {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return 0, fmt.Errorf("%s %q is not HOST:PORT", flag, s)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return 0, fmt.Errorf("%s %q: bad port", flag, s)
	}
	return p, nil
}

// ParseRoutes splits a comma-separated --cluster-routes value.
func ParseRoutes(s string) []string {
	var out []string
	for _, r := range strings.Split(s, ",") {
		if r = strings.TrimSpace(r); r != "" {
			out = append(out, r)
		}
	}
	return out
}
