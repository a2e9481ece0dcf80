package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nomicore/nomicore/node"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/ws"
	"github.com/nomicore/nomicore/yjs"
)

// benchConfig is the protocol configuration of the workloads: the binaries' (the v2
// generation, the shipped chunked caps), with quicker reconnects.
func benchConfig() protocol.Config {
	c := node.ShippedConfig()
	c.BaseBackoff, c.MaxBackoff = 10*time.Millisecond, 200*time.Millisecond
	return c
}

const peerOwner = "bench"

// peer is one in-process peer: a bbolt store in its own directory, its registry, its target
// controller and its connection to the hub.
type peer struct {
	id    string
	store *persistence.BoltStore
	reg   *registry.Registry
	tc    *namespace.TargetController
	p     *ws.Peer
}

func startPeer(dir string, index int, url string, targets []string) (*peer, error) {
	return startPeerWith(dir, index, targets, ws.PeerOptions{Config: benchConfig(), URL: url})
}

// startPeerWith starts a peer with opts for its connection (URL, Config and whatever else
// is set; the identity, token, targets and namespace layer are filled in here).
func startPeerWith(dir string, index int, targets []string, opts ws.PeerOptions) (*peer, error) {
	st, err := persistence.OpenDataDir(dir, persistence.Options{Compactor: registry.Compactor()})
	if err != nil {
		return nil, err
	}
	reg, err := registry.New(registry.Config{Role: registry.RolePeer, Catalog: st, Documents: st})
	if err != nil {
		return nil, err
	}
	var ts []namespace.Target
	for _, ns := range targets {
		ts = append(ts, targetOf(ns))
	}
	tc, err := namespace.NewTargetController(namespace.TargetControllerOptions{Registry: reg, Targets: ts})
	if err != nil {
		return nil, err
	}
	token := tokenOf(index)
	opts.InstanceID, opts.HubInstanceID = peerName(index), "hub"
	opts.Token = func() (string, error) { return token, nil }
	opts.Namespaces = tc.NewHandler
	opts.Observer = observer.Multi(opts.Observer, debugObserver())
	p, err := ws.NewPeer(opts)
	if err != nil {
		tc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return nil, errors.Join(err, reg.Close(ctx), st.Close(ctx))
	}
	p.Start()
	return &peer{id: peerName(index), store: st, reg: reg, tc: tc, p: p}, nil
}

// stop shuts the peer down in the order of docs/protocol.md#restart-and-shutdown.
func (p *peer) stop() error {
	p.p.Close()
	p.tc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return errors.Join(p.reg.Close(ctx), p.store.Close(ctx))
}

// waitLive waits until every target of every peer is live.
func waitLive(ps []*peer, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ready := true
		for _, p := range ps {
			for _, st := range p.tc.Targets() {
				if st.State != observer.ChannelLive {
					ready = false
				}
			}
		}
		if ready {
			return nil
		}
		if time.Now().After(deadline) {
			states := map[observer.ChannelState]int{}
			for _, p := range ps {
				for _, st := range p.tc.Targets() {
					states[st.State]++
				}
			}
			return fmt.Errorf("targets not live in time: %v", states)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func stopAll(ps []*peer) error {
	var errs []error
	for _, p := range ps {
		errs = append(errs, p.stop())
	}
	return errors.Join(errs...)
}

// ---- writers and arrival tracking -------------------------------------------------------------

// writer makes small local writes into one replica from its own Yjs client; write i has
// clock i, so a state vector tells which writes a replica holds.
type writer struct {
	lease *registry.Lease
	doc   *yjs.Doc
	last  []byte
	sent  []atomic.Int64 // unix nanoseconds when write i was submitted
}

var nextClient atomic.Uint32

func newWriter(l *registry.Lease, n int) *writer {
	w := &writer{lease: l, doc: yjs.NewDoc(yjs.WithClientID(10000 + nextClient.Add(1))), sent: make([]atomic.Int64, n)}
	w.doc.OnUpdate(func(u []byte, _ any) { w.last = u })
	return w
}

func (w *writer) client() uint64 { return w.doc.ClientID() }

// run makes len(w.sent) writes as fast as the local sequencer takes them.
func (w *writer) run(ctx context.Context) error {
	m := w.doc.GetMap("bench")
	for i := range w.sent {
		if err := m.Set(fmt.Sprintf("k%d", i%16), float64(i)); err != nil {
			return err
		}
		w.sent[i].Store(time.Now().UnixNano())
		if _, err := w.lease.WriteLocal(ctx, w.last); err != nil {
			return err
		}
	}
	return nil
}

// arrivals watches one replica and records, for every write of the tracked writers, how
// long after its submission the replica applied it: after each batch of applied updates
// the watch reports, the replica's state vector tells which writes it now holds.
type arrivals struct {
	lease   *registry.Lease
	watch   *registry.Watch
	writers map[uint64]*writer
	next    map[uint64]uint64 // the next clock expected per writer
	mu      sync.Mutex
	lat     []time.Duration
	last    time.Time
	done    chan struct{}
}

func watchArrivals(l *registry.Lease, writers []*writer, self *writer) (*arrivals, error) {
	w, err := l.Watch(1<<30, 1<<22)
	if err != nil {
		return nil, err
	}
	a := &arrivals{lease: l, watch: w, writers: map[uint64]*writer{}, next: map[uint64]uint64{}, done: make(chan struct{})}
	for _, wr := range writers {
		if wr != self {
			a.writers[wr.client()] = wr
		}
	}
	go a.loop()
	return a, nil
}

func (a *arrivals) loop() {
	defer close(a.done)
	ctx := context.Background()
	for range a.watch.Wake() {
		p := a.watch.Poll() // only a signal: the state vector says what arrived
		if p.Closed {
			return
		}
		b, err := a.lease.StateVector(ctx)
		now := time.Now()
		if err != nil {
			continue
		}
		sv, err := yjs.DecodeStateVector(b)
		if err != nil {
			continue
		}
		a.record(sv, now)
	}
}

func (a *arrivals) record(sv yjs.StateVector, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for client, clock := range sv {
		w := a.writers[client]
		if w == nil {
			continue
		}
		for c := a.next[client]; c < clock && c < uint64(len(w.sent)); c++ {
			a.lat = append(a.lat, now.Sub(time.Unix(0, w.sent[c].Load())))
			a.last = now
		}
		a.next[client] = max(a.next[client], clock)
	}
}

// complete reports whether every tracked write arrived.
func (a *arrivals) complete() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for client, w := range a.writers {
		if a.next[client] < uint64(len(w.sent)) {
			return false
		}
	}
	return true
}

func (a *arrivals) stop() {
	a.watch.Close()
	<-a.done
}

// debugObserver prints the events that are not per frame when BENCHREPL_DEBUG is set.
func debugObserver() observer.Observer {
	if os.Getenv("BENCHREPL_DEBUG") == "" {
		return nil
	}
	return observer.ObserverFunc(func(e observer.Event) {
		if e.Type().PerFrame() || e.Type() == observer.TypeChannelStateChanged {
			return
		}
		b, _ := e.MarshalJSON()
		fmt.Fprintln(os.Stderr, string(b))
	})
}
