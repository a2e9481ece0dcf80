package namespace_test

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/observer/observertest"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/ws"
	"github.com/nomicore/nomicore/replication/ws/wstest"
	"github.com/nomicore/nomicore/yjs"
)

// Helpers of the namespace-layer tests: a hub or a peer with a real registry on a memory
// store and a fake clock, driven frame by frame by the test playing the other side.

const owner = "default"

// nsConfig is smallConfig for the namespace layer: the v1 generation (no chunking, the
// layer's requirement) and a window of 4.
func nsConfig(t testing.TB) protocol.Config {
	c := wstest.SmallConfig(t)
	c.Generation = protocol.GenerationV1
	c.MaxInFlightUpdates = 4
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// ctxT is the context of a test's calls: it ends after 30 s, or with the test.
func ctxT(t testing.TB) context.Context { return testkit.Context(t, 30*time.Second) }

// must fails the test at once when err is not nil.
var must = testkit.Must

// newRegistry returns a registry of role over a memory store (store options opts), closed
// at cleanup after everything registered later (docs/protocol.md#restart-and-shutdown order:
// registry, then store).
func newRegistry(t testing.TB, role registry.Role, opts persistence.Options) (*registry.Registry, persistence.Store) {
	t.Helper()
	return newRegistryWith(t, registry.Config{Role: role}, opts)
}

// newRegistryWith is newRegistry with the registry's configuration (its Catalog and
// Documents are set here).
func newRegistryWith(t testing.TB, cfg registry.Config, opts persistence.Options) (*registry.Registry, persistence.Store) {
	t.Helper()
	return newRegistryWrapped(t, cfg, opts, nil)
}

// newRegistryWrapped is newRegistryWith whose registry reaches the memory store through
// wrap (nil: directly); it returns the memory store itself.
func newRegistryWrapped(t testing.TB, cfg registry.Config, opts persistence.Options, wrap func(persistence.Store) persistence.Store) (*registry.Registry, persistence.Store) {
	t.Helper()
	opts.Compactor = registry.Compactor()
	if opts.CommitDelay == 0 {
		opts.CommitDelay = -1
	}
	st, err := persistence.NewMemoryStore(opts)
	must(t, err)
	var wrapped persistence.Store = st
	if wrap != nil {
		wrapped = wrap(st)
	}
	cfg.Catalog, cfg.Documents = wrapped, wrapped
	reg, err := registry.New(cfg)
	must(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := reg.Close(ctx); err != nil {
			t.Errorf("registry close: %v", err)
		}
		if err := st.Close(ctx); err != nil {
			t.Errorf("store close: %v", err)
		}
	})
	return reg, st
}

// ---- the wire as the test sees it ---------------------------------------------------------

// wire is the test's end of a connection (a fake pair or a real WebSocket): it encodes and
// decodes frames with the protocol codec and checks nothing itself.
type wire struct {
	t        testing.TB
	cfg      protocol.Config
	end      wstest.Messenger
	out      *protocol.Outbound
	in       *protocol.Inbound
	barriers int

	asm  *protocol.Assembler  // the chunked transfers received (chunk_test.go)
	tids protocol.TransferIDs // ... and sent
}

// newWire speaks the generation of cfg: with v2, UPDATE_CHUNK is negotiated.
func newWire(t testing.TB, end wstest.Messenger, cfg protocol.Config) *wire {
	codec := protocol.NewCodec(cfg.Limits(), cfg.Capabilities())
	return &wire{t: t, cfg: cfg, end: end, out: protocol.NewOutbound(codec), in: protocol.NewInbound(codec)}
}

func (w *wire) send(m protocol.Message) uint32 {
	w.t.Helper()
	return wstest.SendFrame(w.t, w.end, w.out, m)
}

func (w *wire) recv() protocol.Frame {
	w.t.Helper()
	return wstest.RecvFrame(w.t, w.end, w.in)
}

// expect receives the next frame and requires it to be a T.
func expect[T protocol.Message](w *wire) (T, uint32) {
	w.t.Helper()
	f := w.recv()
	m, ok := f.Message.(T)
	if !ok {
		var zero T
		w.t.Fatalf("got %s %s, want %T", f.Type(), describe(f), zero)
	}
	return m, f.Sequence
}

// expectError receives the next frame and requires a namespace ERROR of code for ns.
func (w *wire) expectError(ns protocol.NamespaceID, code protocol.ErrorCode) *protocol.ErrorMessage {
	w.t.Helper()
	m, _ := expect[*protocol.ErrorMessage](w)
	if m.Scope != protocol.ScopeNamespace || m.Code != code || m.NamespaceID != ns {
		w.t.Fatalf("got ERROR %s scope %d for %s, want %s for %s", m.Code, m.Scope, m.NamespaceID, code, ns)
	}
	return m
}

func describe(f protocol.Frame) string {
	if m, ok := f.Message.(*protocol.ErrorMessage); ok {
		return fmt.Sprintf("%s(%s)", m.Code, m.NamespaceID)
	}
	if m, ok := f.Message.(protocol.NamespaceMessage); ok {
		return m.Namespace().String()
	}
	return ""
}

// barrier sends a frame for a namespace nobody opened, which the other side answers with a
// namespace ERROR at once, and returns every frame received before that answer. The other
// side handles frames in order and sends what it can right after each, so the frames
// returned are everything it had to send when the barrier arrived.
func (w *wire) barrier() []protocol.Frame {
	w.t.Helper()
	w.barriers++
	ns := wstest.NamespaceID(0xbabe0000 + w.barriers)
	w.send(&protocol.ResyncRequired{NamespaceID: ns, ReasonCode: protocol.ResyncSendQueueOverflow})
	var before []protocol.Frame
	for {
		f := w.recv()
		if m, ok := f.Message.(*protocol.ErrorMessage); ok && m.NamespaceID == ns {
			return before
		}
		before = append(before, f)
	}
}

// quiet requires that the other side had nothing to send.
func (w *wire) quiet() {
	w.t.Helper()
	if fs := w.barrier(); len(fs) > 0 {
		w.t.Fatalf("unexpected frames: %s", types(fs))
	}
}

func types(fs []protocol.Frame) string {
	var b bytes.Buffer
	for i, f := range fs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.Type().String())
		if d := describe(f); d != "" {
			b.WriteString(" " + d)
		}
	}
	return b.String()
}

// expectClose reads until the other side closes; it returns the close code and the
// connection ERROR code received before it, if any.
func (w *wire) expectClose() (protocol.CloseCode, protocol.ErrorCode) {
	w.t.Helper()
	return wstest.RecvClose(w.t, w.end, w.in)
}

// ---- Yjs documents for the tests ---------------------------------------------------------------

// ydoc is an application document: it makes updates and applies those it receives.
type ydoc struct {
	t    testing.TB
	d    *yjs.Doc
	last []byte
}

func newYDoc(t testing.TB, client uint32) *ydoc {
	y := &ydoc{t: t, d: yjs.NewDoc(yjs.WithClientID(client))}
	y.d.OnUpdate(func(u []byte, origin any) {
		if origin == nil {
			y.last = u
		}
	})
	return y
}

// set writes app[key] = v and returns the update.
func (y *ydoc) set(key string, v any) []byte {
	y.t.Helper()
	y.last = nil
	must(y.t, y.d.GetMap("app").Set(key, v))
	return y.last
}

// setMeta writes meta[key] = v (a protected write) and returns the update.
func (y *ydoc) setMeta(key string, v any) []byte {
	y.t.Helper()
	y.last = nil
	must(y.t, y.d.GetMap(registry.MetaRoot).Set(key, v))
	return y.last
}

func (y *ydoc) apply(u []byte) {
	y.t.Helper()
	must(y.t, yjs.ApplyUpdate(y.d, u, "remote"))
}

func (y *ydoc) app() map[string]any {
	v, _ := y.d.ToJSON()["app"].(map[string]any)
	return v
}

func (y *ydoc) sv() []byte { return y.d.EncodeStateVector() }

func (y *ydoc) diff(sv []byte) []byte {
	y.t.Helper()
	b, err := yjs.EncodeStateAsUpdate(y.d, sv)
	must(y.t, err)
	return b
}

// appOf reads the app root of a namespace through a lease.
func appOf(t testing.TB, reg *registry.Registry, ns protocol.NamespaceID) map[string]any {
	t.Helper()
	l, err := reg.Open(ctxT(t), owner, ns.String())
	must(t, err)
	defer l.Release()
	j, err := l.JSON(ctxT(t), registry.Root{Name: "app", Kind: yjs.KindMap})
	must(t, err)
	m, _ := j["app"].(map[string]any)
	return m
}

func sameApp(a, b map[string]any) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

// writeLocal applies a local write to a namespace (the admin API's POST …/update).
func writeLocal(t testing.TB, reg *registry.Registry, ns protocol.NamespaceID, u []byte) error {
	t.Helper()
	l, err := reg.Open(ctxT(t), owner, ns.String())
	if err != nil {
		return err
	}
	defer l.Release()
	_, err = l.WriteLocal(ctxT(t), u)
	return err
}

// ---- events ----------------------------------------------------------------------------------

// channelPath returns the channel states a namespace went through, in order, from the
// recorded channel-state-changed events of a side.
func channelPath(rec *observertest.Recorder, side observer.Side, ns protocol.NamespaceID) []observer.ChannelState {
	var out []observer.ChannelState
	for _, e := range rec.OfType(observer.TypeChannelStateChanged) {
		p := e.Payload.(observer.ChannelStateChanged)
		if e.Side == side && p.NamespaceID == ns.String() {
			if len(out) == 0 {
				out = append(out, p.From)
			}
			out = append(out, p.To)
		}
	}
	return out
}

func waitPath(t testing.TB, rec *observertest.Recorder, side observer.Side, ns protocol.NamespaceID, want ...observer.ChannelState) {
	t.Helper()
	var got []observer.ChannelState
	deadline := time.Now().Add(wait)
	for {
		got = channelPath(rec, side, ns)
		if len(got) >= len(want) {
			break
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s channel path of %s = %v, want %v", side, ns, got, want)
	}
}

// eventsOf returns the payloads of type T recorded for a side.
func eventsOf[T observer.Payload](rec *observertest.Recorder, side observer.Side) []T {
	var out []T
	for _, e := range rec.Events() {
		if p, ok := e.Payload.(T); ok && e.Side == side {
			out = append(out, p)
		}
	}
	return out
}

// ---- the unsent queue's overflow, on either side ------------------------------------------

// overflowConfig is nsConfig with an unsent queue of 4 KiB, and room for the round's diff
// that carries everything the queue dropped.
func overflowConfig(t testing.TB) protocol.Config {
	cfg := nsConfig(t)
	cfg.MaxSyncDiffBytes, cfg.MaxBootstrapBytes, cfg.MaxFrameBytes = 16<<10, 16<<10, 17<<10
	cfg.MaxQueuedControlBytes, cfg.MaxQueuedUpdateBytes, cfg.MaxChunkedUpdateBytes = 64<<10, 4<<10, 4<<10
	must(t, cfg.Validate())
	return cfg
}

// overflowUnsent fills the window of ns with local writes of local through reg (remote
// applies each UPDATE), then writes past maxQueuedUpdateBytes; it requires
// RESYNC_REQUIRED{send-queue-overflow} and nothing after it, then acknowledges the window.
func overflowUnsent(w *wire, cfg protocol.Config, reg *registry.Registry, ns protocol.NamespaceID, local, remote *ydoc) {
	t := w.t
	t.Helper()
	var inFlight []uint32
	for i := range cfg.MaxInFlightUpdates {
		must(t, writeLocal(t, reg, ns, local.set(fmt.Sprint("w", i), 1.0)))
		up, seq := expect[*protocol.Update](w)
		remote.apply(up.Update)
		inFlight = append(inFlight, seq)
	}
	value := strings.Repeat("v", 600)
	for i := 0; i*600 <= cfg.MaxQueuedUpdateBytes; i++ {
		must(t, writeLocal(t, reg, ns, local.set(fmt.Sprint("q", i), value)))
	}
	if r, _ := expect[*protocol.ResyncRequired](w); r.ReasonCode != protocol.ResyncSendQueueOverflow {
		t.Fatalf("reason %q", r.ReasonCode)
	}
	w.quiet()
	for _, seq := range inFlight {
		w.send(&protocol.UpdateAck{NamespaceID: ns, AckedSequence: seq})
	}
}

// checkOverflowResync requires one resync-required event on side, for either bound that
// may be hit first: the unsent queue, or the session's fan-out queue it is pulled from
// (both sized maxQueuedUpdateBytes).
func checkOverflowResync(t testing.TB, rec *observertest.Recorder, side observer.Side) {
	t.Helper()
	rs := eventsOf[observer.ResyncRequired](rec, side)
	if len(rs) != 1 || rs[0].Cause != observer.ResyncQueueOverflow && rs[0].Cause != observer.ResyncSessionFanoutOverflow {
		t.Fatalf("resync-required %+v", rs)
	}
}

// ---- a hub with its namespace layer, played against by hand ----------------------------------------

type nsHub struct {
	t     *testing.T
	cfg   protocol.Config
	clk   *clock.Fake
	rec   *observertest.Recorder
	reg   *registry.Registry
	store persistence.Store
	hub   *ws.Hub
	nsl   *namespace.Hub
	table *auth.PeerTable

	mu         sync.Mutex // guards mismatches
	mismatches []string   // the hub's OwnerMismatch calls: "peer ns grantOwner namespaceOwner"
}

const (
	readOnlyPeer = "peer-ro"
	limitedPeer  = "peer-limited" // may replicate limitedNS only
)

var limitedNS = wstest.NamespaceID(0xa11)

func newNSHub(t *testing.T, cfg protocol.Config, storeOpts persistence.Options) *nsHub {
	t.Helper()
	rec := &observertest.Recorder{}
	return newNSHubObserved(t, cfg, storeOpts, rec, rec)
}

// newNSHubObserved is newNSHub with the hub's observer (nil: none) and the recorder checked
// at cleanup.
func newNSHubObserved(t *testing.T, cfg protocol.Config, storeOpts persistence.Options, obs observer.Observer, rec *observertest.Recorder) *nsHub {
	t.Helper()
	return newNSHubWrapped(t, cfg, storeOpts, obs, rec, nil)
}

// newNSHubWrapped is newNSHubObserved whose registry reaches its store through wrap.
func newNSHubWrapped(t *testing.T, cfg protocol.Config, storeOpts persistence.Options, obs observer.Observer, rec *observertest.Recorder,
	wrap func(persistence.Store) persistence.Store) *nsHub {
	t.Helper()
	f := &nsHub{t: t, cfg: cfg, clk: clock.NewFake(epoch), rec: rec}
	f.reg, f.store = newRegistryWrapped(t, registry.Config{Role: registry.RoleHub}, storeOpts, wrap)
	var err error
	f.table, err = auth.NewPeerTable([]auth.PeerEntry{
		{PeerInstanceID: peerID, TokenSHA256: auth.HashToken("secret-a"), Owner: owner, Namespaces: []string{"*"}, Read: true, Submit: true},
		{PeerInstanceID: readOnlyPeer, TokenSHA256: auth.HashToken("secret-ro"), Owner: owner, Namespaces: []string{"*"}, Read: true},
		{PeerInstanceID: limitedPeer, TokenSHA256: auth.HashToken("secret-limited"), Owner: owner, Namespaces: []string{limitedNS.String()}, Read: true, Submit: true},
	})
	must(t, err)
	f.nsl, err = namespace.NewHub(namespace.HubOptions{Registry: f.reg, OwnerMismatch: func(peer, ns, grantOwner, nsOwner string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.mismatches = append(f.mismatches, strings.Join([]string{peer, ns, grantOwner, nsOwner}, " "))
	}})
	must(t, err)
	f.hub, err = ws.NewHub(ws.HubOptions{Config: cfg, InstanceID: hubID, Auth: f.table, Namespaces: f.nsl.NewHandler,
		Clock: f.clk, Random: bytes.NewReader(bytes.Repeat([]byte{7}, 1<<16)), Observer: obs})
	must(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := f.hub.Shutdown(ctx); err != nil {
			t.Errorf("hub shutdown: %v", err)
		}
		f.rec.AssertValid(t)
		f.rec.AssertSafe(t, "secret-a", "secret-ro", owner)
	})
	return f
}

// create makes a namespace on the hub.
func (f *nsHub) create() (protocol.NamespaceID, registry.Identity) {
	f.t.Helper()
	c, err := f.reg.Create(ctxT(f.t), owner)
	must(f.t, err)
	return protocol.MustNamespaceID(c.NamespaceID), c.Identity
}

// dial connects a hand-played peer and completes the handshake.
func (f *nsHub) dial(peer string) *wire {
	f.t.Helper()
	w, _ := f.dialEnds(peer, 256)
	return w
}

// dialEnds is dial with the pair's capacity, returning the hub's end too.
func (f *nsHub) dialEnds(peer string, capacity int) (*wire, *wstest.End) {
	f.t.Helper()
	a, b := wstest.Pair(capacity)
	must(f.t, f.hub.Accept(b, auth.PeerIdentity{PeerInstanceID: peer}))
	w := newWire(f.t, a, f.cfg)
	h := wstest.Hello(peerID, hubID)
	h.PeerInstanceID = peer
	w.send(h)
	expect[*protocol.HelloAck](w)
	return w, b
}

// bootstrap opens ns on w without a local replica, applies the snapshot to doc and
// acknowledges it; it returns the BOOTSTRAP_SNAPSHOT sequence.
func (f *nsHub) bootstrap(w *wire, ns protocol.NamespaceID, doc *ydoc) uint32 {
	return peerBootstrap(w, ns, doc)
}

func peerBootstrap(w *wire, ns protocol.NamespaceID, doc *ydoc) uint32 {
	w.t.Helper()
	w.send(&protocol.OpenNamespace{NamespaceID: ns})
	ok, _ := expect[*protocol.OpenOK](w)
	if ok.Mode != protocol.ModeBootstrap {
		w.t.Fatalf("OPEN_OK mode %v", ok.Mode)
	}
	snap, seq := expect[*protocol.BootstrapSnapshot](w)
	doc.apply(snap.Snapshot)
	w.send(&protocol.BootstrapAck{NamespaceID: ns, AckedSequence: seq})
	return seq
}

// round plays the peer's side of a complete round with id.
func (f *nsHub) round(w *wire, ns protocol.NamespaceID, doc *ydoc, id uint32) {
	peerRound(w, ns, doc, id)
}

func peerRound(w *wire, ns protocol.NamespaceID, doc *ydoc, id uint32) {
	w.t.Helper()
	s1 := w.send(&protocol.SyncStep1{NamespaceID: ns, SyncRoundID: id, StateVector: doc.sv()})
	var hub1 *protocol.SyncStep1
	var h1seq, s2seq uint32
	gotDiff := false
	for !gotDiff || hub1 == nil {
		f := w.recv()
		switch m := f.Message.(type) {
		case *protocol.SyncStep2:
			if m.SyncRoundID != id || m.RelatedStep1Sequence != s1 || hub1 != nil {
				w.t.Fatalf("hub Step2 round %d related %d after its Step1 %v, want %d/%d first", m.SyncRoundID, m.RelatedStep1Sequence, hub1 != nil, id, s1)
			}
			doc.apply(m.Update)
			s2seq, gotDiff = f.Sequence, true
		case *protocol.UpdateChunk: // a diff over maxSyncDiffBytes, chunked (docs/protocol.md#sync_step2)
			tr, err := w.assembler().Add(m, f.Sequence, protocol.Binding{SyncRoundID: id})
			must(w.t, err)
			if tr.Complete {
				doc.apply(tr.Data)
				s2seq, gotDiff = tr.AckSequence, true
			}
		case *protocol.SyncStep1:
			if m.SyncRoundID != id {
				w.t.Fatalf("hub Step1 round %d, want %d", m.SyncRoundID, id)
			}
			hub1, h1seq = m, f.Sequence
		default:
			w.t.Fatalf("unexpected %s %s during the round", f.Type(), describe(f))
		}
	}
	w.send(&protocol.SyncApplied{NamespaceID: ns, SyncRoundID: id, AckedSequence: s2seq})
	diff := doc.diff(hub1.StateVector)
	if len(diff) > w.cfg.MaxSyncDiffBytes && w.cfg.Capabilities() != 0 {
		w.sendRest(w.splitter(protocol.KindSyncDiff, ns, diff, protocol.Binding{SyncRoundID: id}))
	} else {
		w.send(&protocol.SyncStep2{NamespaceID: ns, SyncRoundID: id, RelatedStep1Sequence: h1seq, Update: diff})
	}
	applied, _ := expect[*protocol.SyncApplied](w)
	if applied.SyncRoundID != id {
		w.t.Fatalf("SYNC_APPLIED round %d", applied.SyncRoundID)
	}
}

// live opens ns (bootstrap) and completes the first round.
func (f *nsHub) live(w *wire, ns protocol.NamespaceID, doc *ydoc) {
	f.t.Helper()
	f.bootstrap(w, ns, doc)
	f.round(w, ns, doc, 1)
	waitPath(f.t, f.rec, observer.SideHub, ns, observer.ChannelOpening, observer.ChannelBootstrapping,
		observer.ChannelReconciling, observer.ChannelLive)
}

// liveNS creates a namespace and brings it live on w, with a peer document of client.
func (f *nsHub) liveNS(w *wire, client uint32) (protocol.NamespaceID, *ydoc) {
	f.t.Helper()
	ns, _ := f.create()
	doc := newYDoc(f.t, client)
	f.live(w, ns, doc)
	return ns, doc
}

func (f *nsHub) lease(ns protocol.NamespaceID) *registry.Lease {
	f.t.Helper()
	l, err := f.reg.Open(ctxT(f.t), owner, ns.String())
	must(f.t, err)
	f.t.Cleanup(l.Release)
	return l
}

// ---- a peer with its target controller, against a hand-played hub -------------------------------

type nsPeer struct {
	t     *testing.T
	cfg   protocol.Config
	clk   *clock.Fake
	rec   *observertest.Recorder
	reg   *registry.Registry
	store persistence.Store
	tc    *namespace.TargetController
	peer  *ws.Peer
	d     *wstest.Dialer
	hubs  *nsHubSource // where the test hub's snapshots come from
	conns int          // connections the test hub answered
}

// nsHubSource is a real hub registry the hand-played hub takes its namespaces from.
type nsHubSource struct {
	reg *registry.Registry
}

func newNSPeer(t *testing.T, cfg protocol.Config) *nsPeer {
	return newNSPeerWith(t, cfg, persistence.Options{})
}

// newNSPeerWith is newNSPeer with the peer store's options.
func newNSPeerWith(t *testing.T, cfg protocol.Config, storeOpts persistence.Options) *nsPeer {
	t.Helper()
	return newNSPeerOpts(t, cfg, nsPeerOptions{store: storeOpts})
}

// nsPeerOptions are the less common settings of a test peer.
type nsPeerOptions struct {
	store      persistence.Options
	unobserved bool         // no observer (f.rec stays empty)
	stageClock clock.Reader // the peer registry's stage clock
	ledger     namespace.LocalWriteLedger
}

func newNSPeerOpts(t *testing.T, cfg protocol.Config, o nsPeerOptions) *nsPeer {
	t.Helper()
	f := &nsPeer{t: t, cfg: cfg, clk: clock.NewFake(epoch), rec: &observertest.Recorder{}, d: wstest.NewDialer()}
	hubReg, _ := newRegistry(t, registry.RoleHub, persistence.Options{})
	f.hubs = &nsHubSource{reg: hubReg}
	f.reg, f.store = newRegistryWith(t, registry.Config{Role: registry.RolePeer, StageClock: o.stageClock}, o.store)
	var err error
	f.tc, err = namespace.NewTargetController(namespace.TargetControllerOptions{Registry: f.reg, Rand: wstest.MaxRand{}, Ledger: o.ledger})
	must(t, err)
	var obs observer.Observer = f.rec
	if o.unobserved {
		obs = nil
	}
	f.peer, err = ws.NewPeer(ws.PeerOptions{Config: cfg, InstanceID: peerID, HubInstanceID: hubID, URL: "ws://hub/v1/replication",
		Token: func() (string, error) { return "tok-peer", nil }, Dialer: f.d, Namespaces: f.tc.NewHandler,
		Clock: f.clk, Rand: wstest.MaxRand{}, Observer: obs})
	must(t, err)
	t.Cleanup(func() {
		f.peer.Close()
		f.tc.Close()
		f.rec.AssertValid(t)
		f.rec.AssertSafe(t, "tok-peer", owner)
	})
	return f
}

// create makes a namespace in the hub source registry and returns its id, identity and
// snapshot.
func (f *nsPeer) create() (protocol.NamespaceID, registry.Identity, []byte) {
	f.t.Helper()
	c, err := f.hubs.reg.Create(ctxT(f.t), owner)
	must(f.t, err)
	l, err := f.hubs.reg.Open(ctxT(f.t), owner, c.NamespaceID)
	must(f.t, err)
	defer l.Release()
	snap, err := l.EncodeState(ctxT(f.t), nil)
	must(f.t, err)
	return protocol.MustNamespaceID(c.NamespaceID), c.Identity, snap
}

// bump raises the epoch of ns in the hub source registry and returns its new snapshot.
func (f *nsPeer) bump(ns protocol.NamespaceID) []byte {
	f.t.Helper()
	l, err := f.hubs.reg.Open(ctxT(f.t), owner, ns.String())
	must(f.t, err)
	defer l.Release()
	_, err = l.BumpEpoch(ctxT(f.t))
	must(f.t, err)
	snap, err := l.EncodeState(ctxT(f.t), nil)
	must(f.t, err)
	return snap
}

// target adds ns as a target of the peer.
func (f *nsPeer) target(ns protocol.NamespaceID) {
	f.t.Helper()
	must(f.t, f.tc.AddTarget(namespace.Target{NamespaceID: ns.String(), Owner: owner}))
}

// connect starts the peer (first time) and plays the hub's handshake on the next dial.
func (f *nsPeer) connect() *wire {
	f.t.Helper()
	if f.conns == 0 {
		f.peer.Start()
	}
	select {
	case d := <-f.d.Accepted:
		return f.answer(d)
	case <-time.After(wait):
		f.t.Fatal("no dial")
		return nil
	}
}

// answer plays the hub's side of the handshake on the peer's dial d.
func (f *nsPeer) answer(d wstest.Dialed) *wire {
	f.t.Helper()
	f.conns++
	w := newWire(f.t, d.End, f.cfg)
	h, _ := expect[*protocol.Hello](w)
	w.send(&protocol.HelloAck{HubInstanceID: hubID, ProtocolVersion: 1, ConnectionNonce: h.ConnectionNonce,
		ConnectionID: fmt.Sprintf("c-test-%d", f.conns), SelectedCapabilities: h.OptionalCapabilities & f.cfg.Capabilities()})
	return w
}

// bootstrapOn answers the peer's OPEN_NAMESPACE for ns with a bootstrap and checks that the
// BOOTSTRAP_ACK acknowledges the snapshot.
func (f *nsPeer) bootstrapOn(w *wire, ns protocol.NamespaceID, id registry.Identity, snap []byte) {
	f.t.Helper()
	open, _ := expect[*protocol.OpenNamespace](w)
	if open.NamespaceID != ns || open.HasLocalReplica {
		f.t.Fatalf("OPEN %+v, want a bootstrap of %s", open, ns)
	}
	w.send(&protocol.OpenOK{NamespaceID: ns, Mode: protocol.ModeBootstrap, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
	seq := w.send(&protocol.BootstrapSnapshot{NamespaceID: ns, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch, Snapshot: snap})
	ack, _ := expect[*protocol.BootstrapAck](w)
	if ack.AckedSequence != seq {
		f.t.Fatalf("BOOTSTRAP_ACK acks %d, want %d", ack.AckedSequence, seq)
	}
}

// hubRound plays the hub's side of a round the peer starts, with doc as the hub's document.
func (f *nsPeer) hubRound(w *wire, ns protocol.NamespaceID, doc *ydoc) uint32 {
	f.t.Helper()
	s1, s1seq := expect[*protocol.SyncStep1](w)
	return f.answerRound(w, ns, doc, s1, s1seq)
}

// answerRound plays the hub's part of the round the peer opened with s1 (received at s1seq).
func (f *nsPeer) answerRound(w *wire, ns protocol.NamespaceID, doc *ydoc, s1 *protocol.SyncStep1, s1seq uint32) uint32 {
	f.t.Helper()
	if s1.NamespaceID != ns {
		f.t.Fatalf("Step1 for %s, want %s", s1.NamespaceID, ns)
	}
	id := s1.SyncRoundID
	s2seq := w.send(&protocol.SyncStep2{NamespaceID: ns, SyncRoundID: id, RelatedStep1Sequence: s1seq, Update: doc.diff(s1.StateVector)})
	h1seq := w.send(&protocol.SyncStep1{NamespaceID: ns, SyncRoundID: id, StateVector: doc.sv()})
	var gotApplied, gotStep2 bool
	for !gotApplied || !gotStep2 {
		fr := w.recv()
		switch m := fr.Message.(type) {
		case *protocol.SyncApplied:
			if m.SyncRoundID != id || m.AckedSequence != s2seq || gotApplied {
				f.t.Fatalf("SYNC_APPLIED %+v, want round %d acking %d", m, id, s2seq)
			}
			gotApplied = true
		case *protocol.SyncStep2:
			if m.SyncRoundID != id || m.RelatedStep1Sequence != h1seq || gotStep2 {
				f.t.Fatalf("peer Step2 %+v, want round %d related %d", m, id, h1seq)
			}
			doc.apply(m.Update)
			w.send(&protocol.SyncApplied{NamespaceID: ns, SyncRoundID: id, AckedSequence: fr.Sequence})
			gotStep2 = true
		default:
			f.t.Fatalf("unexpected %s during the round", fr.Type())
		}
	}
	return id
}

func (f *nsPeer) state(ns protocol.NamespaceID) observer.ChannelState {
	st, ok := f.tc.Target(ns.String())
	if !ok {
		return ""
	}
	return st.State
}

func (f *nsPeer) waitState(ns protocol.NamespaceID, want observer.ChannelState) {
	f.t.Helper()
	testkit.Eventually(f.t, wait, fmt.Sprintf("target %s %s (is %s)", ns, want, f.state(ns)), func() bool { return f.state(ns) == want })
}

// peerApp reads the peer replica's app root.
func (f *nsPeer) peerApp(ns protocol.NamespaceID) map[string]any { return appOf(f.t, f.reg, ns) }

// waitFailed waits for the namespace-failed event of ns on side and checks its cause, and
// that there is exactly one.
func waitFailed(t testing.TB, rec *observertest.Recorder, side observer.Side, ns protocol.NamespaceID, cause observer.FailedCause) observer.NamespaceFailed {
	t.Helper()
	var got []observer.NamespaceFailed
	testkit.Eventually(t, wait, "namespace-failed "+string(cause), func() bool {
		got = nil
		for _, e := range eventsOf[observer.NamespaceFailed](rec, side) {
			if e.NamespaceID == ns.String() {
				got = append(got, e)
			}
		}
		return len(got) > 0
	})
	if len(got) != 1 || got[0].Cause != cause {
		t.Fatalf("namespace-failed of %s: %+v, want one with cause %s", ns, got, cause)
	}
	return got[0]
}

// nsErrors returns the namespace-error events of ns on side, as "code/direction".
func nsErrors(rec *observertest.Recorder, side observer.Side, ns protocol.NamespaceID) []string {
	var out []string
	for _, e := range eventsOf[observer.NamespaceError](rec, side) {
		if e.NamespaceID == ns.String() {
			out = append(out, string(e.Code)+"/"+string(e.Direction))
		}
	}
	return out
}

// live bootstraps ns on the peer through w and completes the first round with hubDoc (which
// starts from the snapshot) as the hub's document.
func (f *nsPeer) live(w *wire, ns protocol.NamespaceID, id registry.Identity, snap []byte, hubDoc *ydoc) {
	f.t.Helper()
	f.bootstrapOn(w, ns, id, snap)
	hubDoc.apply(snap)
	f.hubRound(w, ns, hubDoc)
	f.waitState(ns, observer.ChannelLive)
}

// reconnect waits for the peer's next dial after backoff (the fake clock moves it along).
func (f *nsPeer) reconnect() *wire {
	f.t.Helper()
	for {
		select {
		case d := <-f.d.Accepted:
			return f.answer(d)
		case <-time.After(time.Millisecond):
			f.clk.Advance(50 * time.Millisecond)
		}
	}
}

// liveTarget creates a namespace in the hub source, makes it a target, connects (the first
// connection) and brings it live against a hub document of client 300.
func (f *nsPeer) liveTarget() (protocol.NamespaceID, registry.Identity, *wire, *ydoc) {
	f.t.Helper()
	ns, id, snap := f.create()
	f.target(ns)
	w := f.connect()
	hubDoc := newYDoc(f.t, 300)
	f.live(w, ns, id, snap, hubDoc)
	return ns, id, w, hubDoc
}

// addLiveTarget creates a namespace in the hub source and makes it a target, which the peer
// opens at once on its ready connection w; it brings it live against a hub document of
// client.
func (f *nsPeer) addLiveTarget(w *wire, client uint32) (protocol.NamespaceID, registry.Identity, *ydoc) {
	f.t.Helper()
	ns, id, snap := f.create()
	f.target(ns)
	hubDoc := newYDoc(f.t, client)
	f.live(w, ns, id, snap, hubDoc)
	return ns, id, hubDoc
}

// reconnectOpeningOnly drops the connection w and plays the next one, on which the peer must
// open only ns — reconciled, with doc as the hub's document. It returns the new wire.
func (f *nsPeer) reconnectOpeningOnly(w *wire, ns protocol.NamespaceID, id registry.Identity, doc *ydoc) *wire {
	f.t.Helper()
	w.end.(*wstest.End).Drop()
	w = f.reconnect()
	if open, _ := expect[*protocol.OpenNamespace](w); open.NamespaceID != ns {
		f.t.Fatalf("OPEN for %s, want only %s", open.NamespaceID, ns)
	}
	w.send(&protocol.OpenOK{NamespaceID: ns, Mode: protocol.ModeReconcile, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch})
	f.hubRound(w, ns, doc)
	w.quiet()
	return w
}

func (f *nsPeer) backoffReasons() []observer.BackoffReason {
	var out []observer.BackoffReason
	for _, e := range eventsOf[observer.ConnectionBackoffScheduled](f.rec, observer.SidePeer) {
		out = append(out, e.Reason)
	}
	return out
}
