package ws_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nomicore/nomicore/observer"
)

// TestE2E_ConvergenceUnderDropsOfflineWritesAndHubRestart: one hub and three peers over real
// WebSockets, bbolt stores in temporary directories, four namespaces. Every instance writes
// concurrently into every namespace (the hub's local writes included) while, in turn, a
// peer's socket drops mid-stream, a peer goes offline and writes there, and the hub
// restarts mid-stream. At the end every replica of every namespace is identical to the
// hub's (JSON and state vector) and no write is lost: each array holds exactly the items
// every writer inserted.
func TestE2E_ConvergenceUnderDropsOfflineWritesAndHubRestart(t *testing.T) {
	c := newCluster(t, clusterConfig(t), 3)
	nss := c.create(4)
	c.waitStates(nss, observer.ChannelLive)

	var writers, hubWriters []*writer
	for i, ns := range nss {
		w := newWriter(t, c.hubReg(), hubOwner, ns, "hub", uint64(i))
		writers, hubWriters = append(writers, w), append(hubWriters, w)
		for j, p := range c.peers {
			writers = append(writers, newWriter(t, p.reg, peerOwner, ns, p.id, uint64(100*j+i)))
		}
	}
	of := func(p *peerNode) (out []*writer) {
		for _, w := range writers {
			if w.reg == p.reg {
				out = append(out, w)
			}
		}
		return out
	}

	// 1. Everyone writes; peer-0's socket drops in the middle of it.
	var wg sync.WaitGroup
	wg.Go(func() { writeAll(t, writers, 30) })
	waitProgress(t, writers, int64(len(writers)*10))
	c.peers[0].net.drop()
	wg.Wait()
	c.converged(nss)
	eventually(t, "a reconnection after the dropped socket", func() bool { return backoffs(c, observer.BackoffSocketClosed) > 0 })

	// 2. peer-1 goes offline and keeps writing; the others write too; it comes back.
	p1 := c.peers[1]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	must(t, p1.peer.Stop(ctx))
	cancel()
	c.waitStates(nss, observer.ChannelDisconnected, p1)
	writeAll(t, writers, 10)
	p1.peer.Start()
	c.converged(nss)

	// 3. The hub restarts while the peers write.
	var others []*writer
	for _, p := range c.peers {
		others = append(others, of(p)...)
	}
	wg.Go(func() { writeAll(t, others, 20) })
	waitProgress(t, others, int64(len(writers)*40+len(others)*5))
	c.stopHub()
	c.startHub()
	for _, w := range hubWriters {
		w.reg = c.hubReg()
	}
	eventually(t, "every peer reconnecting after the hub restart", func() bool {
		return backoffs(c, observer.BackoffSocketClosed) >= 1+len(c.peers)
	})
	wg.Wait()
	writeAll(t, writers, 5)
	c.converged(nss)

	// No write is lost: the arrays hold every insert.
	for _, ns := range nss {
		inserted := 0
		for _, w := range writers {
			if w.ns == ns {
				inserted += w.inserts
			}
		}
		r, err := readReplica(t, c.hubReg(), hubOwner, ns)
		must(t, err)
		if got := len(r.json["list"].([]any)); got != inserted {
			t.Errorf("%s: list holds %d items, %d were inserted", ns, got, inserted)
		}
	}
	if n := len(eventsOf[observer.UpdateApplied](c.rec, observer.SideHub)); n == 0 {
		t.Error("no update-applied on the hub")
	}
	if n := len(eventsOf[observer.SyncDiffApplied](c.rec, observer.SidePeer)); n == 0 {
		t.Error("no sync-diff-applied on the peers")
	}
}

func backoffs(c *cluster, reason observer.BackoffReason) int {
	n := 0
	for _, e := range eventsOf[observer.ConnectionBackoffScheduled](c.rec, observer.SidePeer) {
		if e.Reason == reason {
			n++
		}
	}
	return n
}
