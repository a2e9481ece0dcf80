package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nomicore/nomicore/changefeed"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/cluster"
	"github.com/nomicore/nomicore/node"
	"github.com/nomicore/nomicore/node/adminapi"
	"github.com/nomicore/nomicore/node/cli"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/versions"
	"github.com/nomicore/nomicore/webhook"
)

// feedFlags are the hub's flags of the change feed, the versions and the webhooks
// (docs/operations.md#the-change-feed).
type feedFlags struct {
	changesMaxAge     time.Duration
	changesMaxRecords int
	autoVersionEvery  time.Duration
	keepVersions      int
	webhookURLs       node.StringList
	webhookSecretFile string
	webhookDebounce   time.Duration
	webhookMaxBackoff time.Duration

	secret []byte // read from webhookSecretFile by check
}

func registerFeedFlags(f *cli.Flags) *feedFlags {
	c := &feedFlags{}
	f.Define("change feed, versions and webhooks", func() {
		f.DurationVar(&c.changesMaxAge, "changes-max-age", persistence.DefaultChangeMaxAge, "how long a single hub keeps the changes of GET /v1/changes; a reader whose cursor is older gets 410 and starts over (a cluster keeps them as long as its log)")
		f.IntVar(&c.changesMaxRecords, "changes-max-records", persistence.DefaultChangeMaxRecords, "the most changes a single hub keeps for GET /v1/changes (the oldest go first)")
		f.DurationVar(&c.autoVersionEvery, "auto-version-every", 0, "take a version of a namespace automatically after this much time of writing to it, e.g. 10m (0: only versions asked for)")
		f.IntVar(&c.keepVersions, "keep-versions", versions.DefaultKeep, "how many automatic versions of each namespace are kept (the newest; versions taken by request are kept until the namespace goes)")
		f.Var(&c.webhookURLs, "webhook-url", "POST every change of the change feed to `URL` (http:// or https://; repeatable), signed with the secret of --webhook-secret-file")
		f.StringVar(&c.webhookSecretFile, "webhook-secret-file", "", "`FILE` holding the secret that signs the webhooks (header Nomicore-Signature); required with --webhook-url")
		f.DurationVar(&c.webhookMaxBackoff, "webhook-max-backoff", webhook.DefaultMaxBackoff, "the longest wait between two attempts at a change an endpoint refuses (the waits double from 1s up to this)")
		f.DurationVar(&c.webhookDebounce, "webhook-debounce", webhook.DefaultDebounce, "how long a webhook waits after the first change of a burst for more (updates of one namespace within it are sent once); 0 sends at once")
	})
	return c
}

// check validates the flags and reads the webhook secret.
func (c *feedFlags) check() error {
	if c.changesMaxAge <= 0 {
		return errors.New("--changes-max-age must be positive, e.g. 168h")
	}
	if c.changesMaxRecords <= 0 {
		return errors.New("--changes-max-records must be positive")
	}
	if c.autoVersionEvery < 0 {
		return errors.New("--auto-version-every must not be negative (0 turns automatic versions off)")
	}
	if c.autoVersionEvery > 0 && c.autoVersionEvery < time.Second {
		return fmt.Errorf("--auto-version-every %v is too short: give at least 1s (10m is usual)", c.autoVersionEvery)
	}
	if c.keepVersions < 1 {
		return errors.New("--keep-versions must be at least 1")
	}
	if c.webhookMaxBackoff < time.Second {
		return errors.New("--webhook-max-backoff must be at least 1s")
	}
	if c.webhookDebounce < 0 {
		return errors.New("--webhook-debounce must not be negative")
	}
	if len(c.webhookURLs) == 0 {
		if c.webhookSecretFile != "" {
			return errors.New("--webhook-secret-file is given without --webhook-url: say where to send the changes")
		}
		return nil
	}
	if c.webhookSecretFile == "" {
		return errors.New("--webhook-url needs --webhook-secret-file FILE: the secret that signs every delivery, so that the receiver can check it came from this hub")
	}
	b, err := os.ReadFile(c.webhookSecretFile)
	if err != nil {
		return fmt.Errorf("--webhook-secret-file: %w", err)
	}
	c.secret = []byte(strings.TrimSpace(string(b)))
	if len(c.secret) < 16 {
		return fmt.Errorf("--webhook-secret-file %s holds %d bytes: give a secret of at least 16 (e.g. openssl rand -hex 32 > FILE)", c.webhookSecretFile, len(c.secret))
	}
	return nil
}

// storeOptions are the change feed options of a single hub's store.
func (c *feedFlags) storeOptions() *persistence.ChangeFeedOptions {
	return &persistence.ChangeFeedOptions{MaxAge: c.changesMaxAge, MaxRecords: c.changesMaxRecords, StateVector: registry.FeedStateVector}
}

// feedParts are what the feed flags start: the feed's source, the versions (single hub),
// the webhooks (when configured).
type feedParts struct {
	source   changefeed.Source
	versions *versions.Service
	webhooks *webhook.Deliverer
	// webhookLeader: on a hub cluster, whether this node delivers the webhooks now.
	webhookLeader func(endpoint string) bool
}

// startFeed builds the change feed's source of the hub (its store's, or the cluster's log's)
// and what reads it, and registers their metrics. Run starts them.
func (c *feedFlags) start(inst *node.Instance, clusterNode *cluster.Node, p *adminapi.Options, clk clock.Clock, log *slog.Logger) (*feedParts, error) {
	out := &feedParts{}
	if clusterNode != nil {
		reg := inst.Registry
		out.source = changefeed.WithStateVectors(clusterNode.ChangeFeed(), func(ctx context.Context, owner, ns string, pos uint64) ([]byte, error) {
			l, err := reg.Open(ctx, owner, ns)
			if err != nil {
				return nil, err
			}
			defer l.Release()
			return l.StateVectorAt(ctx, pos)
		})
		// One node of the cluster takes the automatic versions, and one delivers the
		// webhooks: each job's leader (cluster.Node.Lead).
		out.versions = versions.New(versions.Options{Registry: inst.Registry, Store: clusterNode.Versions(), Feed: out.source,
			Config: inst.Store, AutoEvery: c.autoVersionEvery, Keep: c.keepVersions, MaxUpdateBytes: p.MaxUpdateBytes,
			Leader: clusterNode.Lead("auto-versions"), Clock: clk, Logger: log})
		if len(c.webhookURLs) > 0 {
			lead := clusterNode.Lead("webhooks")
			out.webhookLeader = func(string) bool { return lead() }
		}
	} else {
		st, ok := inst.Store.(interface {
			persistence.ChangeFeed
			persistence.VersionStore
		})
		if !ok {
			return nil, errors.New("the hub's store keeps no change feed")
		}
		out.source = changefeed.StoreSource{Feed: st}
		out.versions = versions.New(versions.Options{Registry: inst.Registry, Store: st, Feed: out.source, Config: inst.Store,
			AutoEvery: c.autoVersionEvery, Keep: c.keepVersions, MaxUpdateBytes: p.MaxUpdateBytes, Clock: clk, Logger: log})
	}
	served := prometheus.NewCounter(prometheus.CounterOpts{Name: "nomicore_changes_served_total",
		Help: "Changes sent to readers of GET /v1/changes as server-sent events."})
	if err := inst.Obs.Registry.Register(served); err != nil {
		return nil, err
	}
	p.Changes, p.ChangesServed, p.Versions = out.source, func(n int) { served.Add(float64(n)) }, out.versions
	if out.versions != nil {
		if err := registerVersionMetrics(inst.Obs.Registry, out.versions); err != nil {
			return nil, err
		}
	}
	if len(c.webhookURLs) == 0 {
		return out, nil
	}
	var d *webhook.Deliverer
	var mu sync.Mutex // guards d for the metrics' gauges
	m, err := webhook.NewMetrics(inst.Obs.Registry, func() *webhook.Deliverer { mu.Lock(); defer mu.Unlock(); return d })
	if err != nil {
		return nil, err
	}
	wd, err := webhook.New(webhook.Options{URLs: c.webhookURLs, Secret: c.secret, Debounce: c.debounce(), MaxBackoff: c.webhookMaxBackoff, Feed: out.source,
		Config: inst.Store, Leader: out.webhookLeader, Clock: clk, Logger: log, Observe: m.Observe})
	if err != nil {
		return nil, err
	}
	mu.Lock()
	d = wd
	mu.Unlock()
	out.webhooks = wd
	p.Webhooks = wd.Status
	return out, nil
}

// debounce is webhook.Options.Debounce of the flag (0 on the command line: none).
func (c *feedFlags) debounce() time.Duration {
	if c.webhookDebounce == 0 {
		return -1
	}
	return c.webhookDebounce
}

// run starts the automatic versions and the webhooks; the function returned stops them.
func (fp *feedParts) run() func(context.Context) error {
	return node.Go(func(ctx context.Context) {
		var wg sync.WaitGroup
		if fp.versions != nil {
			wg.Go(func() { fp.versions.Run(ctx) })
		}
		if fp.webhooks != nil {
			wg.Go(func() { fp.webhooks.Run(ctx) })
		}
		wg.Wait()
	})
}

// registerVersionMetrics registers the automatic versions' counters.
func registerVersionMetrics(reg prometheus.Registerer, s *versions.Service) error {
	for _, c := range []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "nomicore_versions_auto_taken_total", Help: "Automatic versions taken (--auto-version-every)."},
			func() float64 { return float64(s.AutoStats().Taken) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "nomicore_versions_auto_failed_total", Help: "Automatic versions that failed (each is tried again)."},
			func() float64 { return float64(s.AutoStats().Failed) }),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
