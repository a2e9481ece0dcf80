package namespace_test

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/protocol"
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
	testkit.Eventually(t, wait, "the hub's sessions listed live", func() bool {
		ss := c.hub.Load().nsl.Sessions(nss[0].String())
		if len(ss) != len(c.peers) {
			return false
		}
		for i, s := range ss {
			if s.PeerInstanceID != c.peers[i].id || s.State != observer.ChannelLive || s.ConnectionID == "" {
				return false
			}
		}
		return true
	})

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
	testkit.Eventually(t, wait, "a reconnection after the dropped socket", func() bool { return backoffs(c, observer.BackoffSocketClosed) > 0 })

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
	testkit.Eventually(t, wait, "every peer reconnecting after the hub restart", func() bool {
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
	applied := eventsOf[observer.UpdateApplied](c.rec, observer.SideHub)
	if len(applied) == 0 {
		t.Error("no update-applied on the hub")
	}
	for _, e := range applied {
		if !e.Stages.Present() || !e.ApplyLatencyMs.Present() {
			t.Fatalf("update-applied without the slot stages or the latency: %+v", e)
		}
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

// TestE2E_S11_EpochBumpConflictsWithoutMerging: an epoch bump on the hub fences every
// session of the namespace (docs/protocol.md#identity-fencing): the peers get IDENTITY_CHANGED
// and go conflicted, the other namespace on the same connections stays live, and no data
// crosses the epochs in either direction. A peer that restarts stays conflicted (its OPEN
// declares the old epoch: REPLICATION_EPOCH_MISMATCH); a reset bootstraps the new epoch and
// converges.
func TestE2E_S11_EpochBumpConflictsWithoutMerging(t *testing.T) {
	c := newCluster(t, clusterConfig(t), 2)
	nss := c.create(2)
	bumped, other := nss[0], nss[1]
	c.waitStates(nss, observer.ChannelLive)
	var writers []*writer
	for i, ns := range nss {
		writers = append(writers, newWriter(t, c.hubReg(), hubOwner, ns, "hub", uint64(i)))
		for j, p := range c.peers {
			writers = append(writers, newWriter(t, p.reg, peerOwner, ns, p.id, uint64(10*j+i)))
		}
	}
	writeAll(t, writers, 5)
	c.converged(nss)

	l, err := c.hubReg().Open(ctxT(t), hubOwner, bumped.String())
	must(t, err)
	id, err := l.BumpEpoch(ctxT(t))
	l.Release()
	must(t, err)
	c.waitStates([]protocol.NamespaceID{bumped}, observer.ChannelConflicted)
	c.waitStates([]protocol.NamespaceID{other}, observer.ChannelLive)

	// After the bump both sides write; nothing crosses.
	hubW, peerW := writers[0], writers[1]
	must(t, hubW.write(3))
	must(t, peerW.write(3))
	writeAll(t, writers[3:], 3) // the other namespace keeps replicating
	c.converged([]protocol.NamespaceID{other})
	hubSide, err := readReplica(t, c.hubReg(), hubOwner, bumped)
	must(t, err)
	for _, p := range c.peers {
		r, err := readReplica(t, p.reg, peerOwner, bumped)
		must(t, err)
		if r.json["meta"].(map[string]any)[registry.MetaEpoch] != 1.0 {
			t.Fatalf("%s took the new epoch into its replica: %v", p.id, r.json["meta"])
		}
		for client := range r.sv {
			if client == hubW.doc.ClientID() && r.sv[client] > uint64(hubW.writes-3) {
				t.Fatalf("%s received the hub's writes made after the bump", p.id)
			}
		}
	}
	if hubSide.sv[peerW.doc.ClientID()] > uint64(peerW.writes-3) {
		t.Fatal("the hub took the peer's writes made after the bump")
	}
	if hubSide.json["meta"].(map[string]any)[registry.MetaEpoch] != float64(id.Epoch) {
		t.Fatalf("hub meta %v", hubSide.json["meta"])
	}

	// A restarted peer stays conflicted: its replica declares the old epoch.
	p0 := c.peers[0]
	targets := p0.stop()
	p0.start(targets...)
	c.waitStates([]protocol.NamespaceID{bumped}, observer.ChannelConflicted, p0)
	c.waitStates([]protocol.NamespaceID{other}, observer.ChannelLive, p0)
	vias := map[observer.ConflictVia]int{}
	for _, e := range c.rec.Events() {
		if ic, ok := e.Payload.(observer.IdentityConflicted); ok {
			vias[ic.Via]++
		}
	}
	if vias[observer.ViaFence] != 2 || vias[observer.ViaIdentityChangedFrame] != 2 || vias[observer.ViaOpenMismatch] < 2 {
		t.Fatalf("identity-conflicted by route: %v", vias)
	}

	// Reset: the old replica is archived and the new epoch bootstrapped.
	must(t, p0.tc.Reset(ctxT(t), bumped.String()))
	c.waitStates([]protocol.NamespaceID{bumped}, observer.ChannelLive, p0)
	c.converged([]protocol.NamespaceID{bumped}, p0)
}

// TestE2E_S20_ProtectedWriteFromPeerRefused: a peer UPDATE that touches meta is refused with
// PROTECTED_FIELD_MUTATION and changes nothing on the hub or on the other peers, which keep
// replicating (docs/protocol.md#protected-apply, docs/protocol.md#document-layout).
func TestE2E_S20_ProtectedWriteFromPeerRefused(t *testing.T) {
	c := newCluster(t, clusterConfig(t), 2)
	nss := c.create(1)
	ns := nss[0]
	c.waitStates(nss, observer.ChannelLive)
	hubW := newWriter(t, c.hubReg(), hubOwner, ns, "hub", 1)
	must(t, hubW.write(3))
	c.converged(nss)
	before, err := readReplica(t, c.hubReg(), hubOwner, ns)
	must(t, err)

	w := c.dialWire(rawPeerID)
	doc := newYDoc(t, 7777)
	peerBootstrap(w, ns, doc)
	peerRound(w, ns, doc, 1)
	seq := w.send(&protocol.Update{NamespaceID: ns, Update: doc.setMeta(registry.MetaEpoch, 99.0)})
	refusal := w.expectError(ns, protocol.CodeProtectedFieldMutation)
	if !refusal.HasRelatedSequence || refusal.RelatedSequence != seq {
		t.Fatalf("refusal relates to %d, want %d", refusal.RelatedSequence, seq)
	}
	after, err := readReplica(t, c.hubReg(), hubOwner, ns)
	must(t, err)
	if !reflect.DeepEqual(before, after) {
		t.Fatal("the refused update changed the hub's replica")
	}
	// The others are unaffected and keep replicating.
	must(t, hubW.write(3))
	c.converged(nss)
	for _, p := range c.peers {
		r, err := readReplica(t, p.reg, peerOwner, ns)
		must(t, err)
		if r.json["meta"].(map[string]any)[registry.MetaEpoch] != 1.0 {
			t.Fatalf("%s meta %v", p.id, r.json["meta"])
		}
	}
	c.waitStates(nss, observer.ChannelLive)
}

// TestE2E_S17_BlockedPeerDoesNotSlowOthers: a peer that stops reading entirely (its socket
// backs up) holds up only its own connection: the hub keeps replicating to the others,
// which converge while it is blocked; once it reads again it converges too.
func TestE2E_S17_BlockedPeerDoesNotSlowOthers(t *testing.T) {
	c := newCluster(t, clusterConfig(t), 3)
	nss := c.create(2)
	c.waitStates(nss, observer.ChannelLive)
	slow, others := c.peers[2], c.peers[:2]
	slow.net.pause()
	big := strings.Repeat("x", 16<<10)
	var writers []*writer
	for i, ns := range nss {
		w := newWriter(t, c.hubReg(), hubOwner, ns, "hub", uint64(i))
		w.pad = big
		writers = append(writers, w)
		for j, p := range others {
			writers = append(writers, newWriter(t, p.reg, peerOwner, ns, p.id, uint64(10*j+i)))
		}
	}
	writeAll(t, writers, 60) // far more than the window and the socket buffers hold
	c.converged(nss, others...)
	if c.divergence(nss, []*peerNode{slow}) == "" {
		t.Fatal("the blocked peer converged while reading nothing")
	}
	slow.net.resume()
	c.converged(nss)
}

// TestE2E_HundredNamespacesOnOneConnection: one connection per peer carries 100 namespaces,
// each opened, bootstrapped, reconciled and written on both sides.
func TestE2E_HundredNamespacesOnOneConnection(t *testing.T) {
	c := newCluster(t, clusterConfig(t), 2)
	nss := c.create(100)
	c.waitStates(nss, observer.ChannelLive)
	var writers []*writer
	for i, ns := range nss {
		writers = append(writers, newWriter(t, c.hubReg(), hubOwner, ns, "hub", uint64(i)),
			newWriter(t, c.peers[i%2].reg, peerOwner, ns, c.peers[i%2].id, uint64(1000+i)))
	}
	writeAll(t, writers, 3)
	c.converged(nss)
	if n := len(c.hub.Load().hub.Connections()); n != len(c.peers) {
		t.Fatalf("%d hub connections for %d peers", n, len(c.peers))
	}
	// A restart restores all 100 targets at once; the peer paces its OPENs to the hub's
	// admission (docs/protocol.md#limits-and-defaults) and every namespace reconciles.
	p := c.peers[0]
	targets := p.stop()
	p.start(targets...)
	c.waitStates(nss, observer.ChannelLive, p)
	writeAll(t, []*writer{writers[0], newWriter(t, p.reg, peerOwner, nss[0], p.id, 7)}, 3)
	c.converged(nss)
}
