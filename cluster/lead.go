package cluster

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Lead returns whether this node leads the job name now: of the nodes that ask, one holds
// the lease lead.<name> of the leases bucket at a time and renews it every third of
// Config.LeaseTTL; a node that stops (or cannot reach the cluster) loses it within the
// TTL, and another takes it. For jobs that one node of the cluster does for all: delivering
// the webhooks, taking the automatic versions. Whoever does such a job checks Lead before
// each step; two nodes may both believe they lead for at most a renewal period after a
// partition, so a job must tolerate doing a step twice (the webhooks are at least once).
func (n *Node) Lead(name string) func() bool {
	var held atomic.Bool
	key := "lead." + name
	holder := []byte(n.cfg.NodeName)
	go func() {
		var rev uint64
		t := time.NewTicker(max(n.cfg.LeaseTTL/3, 100*time.Millisecond))
		defer t.Stop()
		for {
			ctx, cancel := context.WithTimeout(n.life, n.cfg.OpTimeout)
			r, err := n.resources(ctx)
			if err == nil {
				if rev == 0 {
					rev, err = r.leases.Create(ctx, key, holder)
				} else {
					rev, err = r.leases.Update(ctx, key, holder, rev)
				}
			}
			cancel()
			if err != nil {
				if held.Load() {
					n.log.Warn("this node no longer leads a job of the cluster; another node takes it over",
						slog.String("job", name), slog.String("error", err.Error()))
				}
				rev = 0
			} else if !held.Load() {
				n.log.Info("this node leads a job of the cluster", slog.String("job", name))
			}
			held.Store(err == nil)
			select {
			case <-n.life.Done():
				if held.Swap(false) {
					// Hand over at once rather than after the TTL.
					dctx, dcancel := context.WithTimeout(context.Background(), n.cfg.OpTimeout)
					if r, err := n.resources(dctx); err == nil {
						err := r.leases.Delete(dctx, key, jetstream.LastRevision(rev))
						if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
							n.log.Debug("handing over a job of the cluster failed; another node takes it after the lease expires",
								slog.String("job", name), slog.String("error", err.Error()))
						}
					}
					dcancel()
				}
				return
			case <-t.C:
			}
		}
	}()
	return held.Load
}
