package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/node/adminapi"
	"github.com/nomicore/nomicore/node/cli"
	"github.com/nomicore/nomicore/node/dashboard"
	"github.com/nomicore/nomicore/node/tlsconf"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/ws"
)

// Instance is what a serving binary opens before it serves anything: its store, the
// registry over it, and its observer with the store's counters registered.
type Instance struct {
	// Store is the instance's store as every node has one: entries, configuration, health
	// and counters (a hub node of a cluster has no other; on a single hub or a peer the
	// registry keeps its documents in the same store).
	Store    persistence.Catalog
	Registry *registry.Registry
	Obs      *Observability
	// Ready, when set, reports readiness beyond the store's (a hub node of a cluster is
	// ready only with quorum); nil when the instance is always ready.
	Ready func() error
	// Started is when the instance opened (the uptime the dashboard shows).
	Started time.Time
	// StoreProblem says why a local store cannot commit writes now ("" while it can; nil for
	// a cluster node, whose Ready says it), for /readyz.
	StoreProblem func() string

	clock      clock.Clock
	log        *slog.Logger
	closeExtra func() // closes what NewInstance's caller opened under the store, if anything
}

// OpenInstance opens the store in dir (OpenStore), the registry of role over it, and the
// observability of side. On an error it closes what it had opened.
func OpenInstance(dir string, role registry.Role, side observer.Side, clk clock.Clock, log *slog.Logger) (*Instance, error) {
	return OpenInstanceFeed(dir, role, side, clk, log, nil)
}

// OpenInstanceFeed is OpenInstance with a store that keeps a change feed (a single hub's:
// GET /v1/changes, webhooks and automatic versions read it) when feed is set.
func OpenInstanceFeed(dir string, role registry.Role, side observer.Side, clk clock.Clock, log *slog.Logger, feed *persistence.ChangeFeedOptions) (*Instance, error) {
	store, health, err := openStore(dir, log, feed)
	if err != nil {
		return nil, err
	}
	reg, err := registry.New(registry.Config{Role: role, Catalog: store, Documents: store, Clock: clk, StageClock: clk, Logger: log})
	if err != nil {
		store.Close(context.Background())
		return nil, err
	}
	in, err := NewInstance(store, reg, side, clk, log, nil)
	if err != nil {
		return nil, err
	}
	in.StoreProblem = health.Problem
	return in, nil
}

// NewInstance is OpenInstance over a store and registry the caller opened (a hub node of a
// cluster, whose store is the cluster's catalog): it registers the observability of side. closeExtra,
// when set, runs after the store closes in Close. On an error it closes everything.
func NewInstance(store persistence.Catalog, reg *registry.Registry, side observer.Side, clk clock.Clock, log *slog.Logger, closeExtra func()) (*Instance, error) {
	in := &Instance{Store: store, Registry: reg, Started: clk.Now(), clock: clk, log: log, closeExtra: closeExtra}
	var err error
	if in.Obs, err = NewObservability(log, side); err == nil {
		err = in.Obs.RegisterStore(store, reg)
	}
	if err != nil {
		in.Close()
		return nil, err
	}
	return in, nil
}

// Close closes the registry, then the store (and what NewInstance was given to close): for a
// start-up that fails before the orderly shutdown owns them.
func (in *Instance) Close() {
	in.Registry.Close(context.Background())
	in.Store.Close(context.Background())
	if in.closeExtra != nil {
		in.closeExtra()
	}
}

// AdminOptions returns the admin API options the binaries share: the instance's side,
// registry, store, metrics, clock and logger, the admin flags of c, and the dashboard with
// what its status routes show (the timeline, the start time, the version). The caller adds
// its side's own (the hub's Sessions and Connections; the peer's Targets, Ready and Link;
// the instance id, listeners and load).
func (in *Instance) AdminOptions(c *Common) adminapi.Options {
	return adminapi.Options{Side: in.Obs.Side, Registry: in.Registry, Store: in.Store, Metrics: in.Obs.Handler(),
		Ready: in.Ready, StoreProblem: in.StoreProblem, Token: c.AdminToken, MaxUpdateBytes: maxLocalWrite(&c.Protocol),
		MaxUpdateFlag: maxLocalWriteFlag(&c.Protocol), MaxEventStreams: c.MaxEventStreams,
		MaxRecreateBytes: max(c.Protocol.MaxChunkedBootstrapBytes, c.Protocol.MaxBootstrapBytes),
		Clock:            in.clock, Logger: in.log,
		Timeline: in.Obs.Timeline, StartedAt: in.Started, Version: cli.Version(string(in.Obs.Side)),
		UI: dashboard.Handler(dashboard.Options{TokenRequired: c.AdminToken != ""})}
}

// CheckInstanceID refuses a flag value that is not an instance id
// (docs/protocol.md#field-rules).
func CheckInstanceID(flagName, v string) error {
	if !protocol.ValidInstanceID(v) {
		return fmt.Errorf("--%s %q does not match ^[a-z][a-z0-9-]{0,62}$", flagName, v)
	}
	return nil
}

// OpenStore opens the instance's bbolt store DIR/nomicore.db (creating DIR with mode 0700),
// with the registry's compactor, and checks all of it (every page reached, every record's
// checksum) before anything is served. A store locked by another process is the error "data
// dir DIR is in use by another process"; a damaged one a *DamagedStoreError (the caller says
// what to do: HubDamagedFix, PeerDamagedFix); one of a newer format names the version to
// run. Store health changes are logged, a full disk with what to free
// (docs/protocol.md#degraded-persistence).
func OpenStore(dir string, log *slog.Logger) (*persistence.BoltStore, error) {
	return OpenStoreFeed(dir, log, nil)
}

// OpenStoreFeed is OpenStore keeping a change feed when feed is set.
func OpenStoreFeed(dir string, log *slog.Logger, feed *persistence.ChangeFeedOptions) (*persistence.BoltStore, error) {
	st, _, err := openStore(dir, log, feed)
	return st, err
}

// slowStoreCheck is how long the check of the store at start may take before it is logged
// at info level.
const slowStoreCheck = time.Second

func openStore(dir string, log *slog.Logger, feed *persistence.ChangeFeedOptions) (*persistence.BoltStore, *storeHealth, error) {
	if dir == "" {
		return nil, nil, errors.New("--data must name a directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	health := &storeHealth{dir: dir, log: log}
	file := filepath.Join(dir, persistence.FileName)
	st, err := persistence.OpenDataDir(dir, persistence.Options{
		Compactor:      registry.Compactor(),
		ChangeFeed:     feed,
		OnHealthChange: health.changed,
		OnCompactionError: func(_, ns string, err error) {
			log.Warn("compaction failed", slog.String("namespaceId", ns), slog.String("error", err.Error()))
		},
	})
	switch {
	case errors.Is(err, persistence.ErrLocked):
		return nil, nil, fmt.Errorf("data dir %s is in use by another process", dir)
	case errors.Is(err, persistence.ErrNewerFormat):
		return nil, nil, fmt.Errorf("data dir %s: %s", dir, strings.TrimPrefix(err.Error(), "persistence: "))
	case errors.Is(err, persistence.ErrCorrupt):
		return nil, nil, &DamagedStoreError{Dir: dir, File: file, Cause: err}
	case err != nil:
		return nil, nil, fmt.Errorf("data dir %s: %v", dir, err)
	}
	t0 := time.Now()
	if err := st.Verify(context.Background()); err != nil {
		st.Close(context.Background())
		if errors.Is(err, persistence.ErrCorrupt) {
			return nil, nil, &DamagedStoreError{Dir: dir, File: file, Cause: err}
		}
		return nil, nil, fmt.Errorf("data dir %s: checking the store: %v", dir, err)
	}
	size := int64(-1)
	if fi, err := os.Stat(file); err == nil {
		size = fi.Size()
	}
	// At debug level unless it took long enough for an operator to wonder what the node is
	// doing: a start-up refusal that follows (a bad tokens file, say) stays one line.
	level, took := slog.LevelDebug, time.Since(t0)
	if took >= slowStoreCheck {
		level = slog.LevelInfo
	}
	log.Log(context.Background(), level, "store checked", slog.String("file", file), slog.Int64("bytes", size),
		slog.Float64("tookMs", float64(took.Microseconds())/1000))
	return st, health, nil
}

// Listen opens a TCP listener, naming the flag in its error.
func Listen(flagName, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--%s %s: %v", flagName, addr, err)
	}
	return ln, nil
}

// IsLoopback reports whether a listen address binds only loopback interfaces (an empty host
// binds every interface).
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckAdmin refuses an admin listener beyond loopback without an admin token
// (docs/operations.md#the-admin-api-beyond-loopback).
func CheckAdmin(addr, token string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("--admin-listen %q: %v", addr, err)
	}
	if !IsLoopback(addr) && token == "" {
		return fmt.Errorf("--admin-listen %s is not loopback: set --admin-token-file (or NOMICORE_ADMIN_TOKEN) so the admin API requires a bearer token", addr)
	}
	return nil
}

// HubDialer returns the peer's WebSocket dialer, speaking HTTP/1.1 only (the upgrade needs
// it; a TLS proxy must not negotiate HTTP/2 for it). With caFile, a wss:// hub must present a
// certificate signed by one of its PEM certificates (the file is read again when it changes:
// HubDialerCA); without, the system roots are trusted.
func HubDialer(caFile string) (ws.Dialer, error) {
	ca, err := tlsconf.NewCAFile(caFile)
	if err != nil {
		return nil, err
	}
	return HubDialerCA(ca, 0), nil
}
