package node

import (
	"log/slog"

	"github.com/nomicore/nomicore/internal/adminapi"
	"github.com/nomicore/nomicore/internal/clock"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
)

// AdminOptionsFor is Instance.AdminOptions for a store that is not the instance's bbolt
// file: a hub node of a cluster, whose store is the cluster's (package cluster).
func AdminOptionsFor(store persistence.Store, reg *registry.Registry, obs *Observability, c *Common, clk clock.Clock, log *slog.Logger) adminapi.Options {
	return adminapi.Options{Side: obs.Side, Registry: reg, Store: store, Metrics: obs.Handler(),
		Token: c.AdminToken, MaxUpdateBytes: maxLocalWrite(&c.Protocol), MaxEventStreams: c.MaxEventStreams,
		Clock: clk, Logger: log}
}
