package ws

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// connState is the state of one connection: the hub's connection state machine
// (docs/protocol.md#hub-connection-states), and on the peer the handshaking, ready and
// draining part of the peer's, whose controller (Peer) owns the rest.
type connState uint8

const (
	stUpgraded    connState = iota // the transport exists; goroutines not started
	stHandshaking                  // waiting for HELLO (hub) or HELLO_ACK (peer)
	stReady
	stDraining
	stClosed
)

var connStateNames = [...]observer.ConnectionState{
	stHandshaking: observer.ConnHandshaking,
	stReady:       observer.ConnReady,
	stDraining:    observer.ConnDraining,
	stClosed:      observer.ConnClosed,
}

// inboundQueue is the capacity of the reader→owner channel. When it is full the reader stops
// reading, and TCP pushes back on the remote. Every connection holds it, idle or not.
const inboundQueue = 8

// connParams is everything a connection needs from its hub or peer. It is fixed when the
// connection is made, except connID on the peer (see there).
type connParams struct {
	side    observer.Side
	cfg     *protocol.Config
	clock   clock.Clock
	em      *observer.Emitter
	log     *slog.Logger
	t       Transport
	factory seam.NamespaceFactory
	auth    Authenticator // hub only
	peerID  string        // hub: trusted upgrade identity; peer: this instance
	hubID   string
	// connID is the connection id: on the hub generated before the connection starts and
	// never changed (Hub.Connections reads it from any goroutine); on the peer "" until the
	// owner goroutine writes it, once, from HELLO_ACK, and read only there.
	connID    string
	nonce     [16]byte // peer: HELLO connectionNonce
	work      *counter
	onReady   func(*conn)                 // owner goroutine; must not block
	onWorking func(*conn)                 // peer: the namespace layer's targets are live (owner goroutine)
	onClosed  func(*conn, seam.CloseInfo) // owner goroutine; must not block
	onExit    func(*conn)                 // after every goroutine of the connection exited
	onGoAway  func(*conn, seam.Drain)     // peer: GOAWAY received (owner goroutine)
	onUpgrade func(observer.AuthRejectReason)
	// tap, when set, sees every message read and every frame written (FrameTap).
	tap func(connectionID string, sent bool, msg []byte)
}

// conn is one connection, on either side. Three goroutines share it: the owner (run), which
// alone touches the fields under "Owned by the owner goroutine" and calls the namespace
// layer; the reader (readLoop), which hands it messages through inbound; and the writer
// (writer.loop), which has its own state. The other fields are set before the goroutines
// start, or are channels, contexts and atomics made for crossing goroutines.
type conn struct {
	connParams
	local protocol.Endpoint // this end: the hub or the peer

	inbound  chan inboundMsg // reader → owner
	stopRead chan struct{}   // closed at the close decision: the reader stops posting
	done     chan struct{}   // closed when the owner goroutine exits for good

	ownerRunning atomic.Bool     // an owner goroutine runs (kick)
	runFn        func()          // c.run, made once: starting it allocates nothing
	linger       time.Duration   // goroutineLinger when the connection was made (owner and writer read it)
	ioCtx        context.Context // reads and pings; cancelled when the connection is gone
	ioCancel     context.CancelFunc
	wctx         context.Context // writes; cancelled by an aborting close or the close timer
	wcancel      context.CancelFunc
	admitted     atomic.Bool // handshake done: the reader stops counting early frames
	pubState     atomic.Uint32
	tapID        atomic.Pointer[string] // connID for the tap, readable by the reader and writer
	// progress counts the bytes read and written, the transport's own count included
	// when it keeps one: liveness reads it to tell a slow link from a dead one.
	progress atomic.Int64

	box mailbox // functions posted to the owner goroutine

	w writer

	// Owned by the owner goroutine.
	beginPending bool        // the first run calls begin
	lingerT      *time.Timer // the idle owner's wait before it exits (step)
	state        connState
	closing      bool
	exited       bool
	in           *protocol.Inbound
	out          *protocol.Outbound
	negotiated   protocol.Negotiated
	handler      seam.Handler
	session      session
	timers       map[*timer]struct{}
	helloTimer   *timer
	drainTimer   *timer
	closeTimer   clock.Timer
	drain        *seam.Drain
	goAwayRecv   *seam.Drain
	info         seam.CloseInfo
	readerDone   bool
	writerDone   bool
	pinger       liveness
	deferred     []deferredCall // run by settle, in order; the array is kept for the next ones
	opens        openAdmission
	awaiting     map[uint32]ackKey // frames sent that expect an acknowledgement
	late         map[uint32]ackKey // given up by this side, still acceptable once (see forgetOnTerminal)
	lateOrder    []uint32          // late's sequences, oldest first: bounds late to maxLateAcks
	sched        scheduler
	presence     presenceLane // the presence extension's waiting states (presence.go)
	queues       map[protocol.NamespaceID]*nsQueue
	tids         protocol.TransferIDs
	inFlight     int                                 // entries of awaiting acknowledged by UPDATE_ACK: live UPDATEs in flight
	flows        map[protocol.NamespaceID]*flowCount // live UPDATEs sent and acknowledged, per namespace
	// eventNow is the observer's time of the event being handled, read at its first use
	// (enqueueTime) and forgotten when the event is settled: the items one event queues
	// share one clock read.
	eventNow observer.Opt[time.Time]

	// Published by the owner goroutine after every event, for Hub.Load and Peer.Load.
	pubQueued, pubInFlight atomic.Int64
	// Published by the owner goroutine for ConnStatus (introspect.go).
	pub introspection
}

// inboundMsg is what the reader hands the owner: a message, or the error that ended reading.
type inboundMsg struct {
	msg []byte
	err error
}

func newConn(p connParams) *conn {
	local := protocol.EndpointPeer
	if p.side == observer.SideHub {
		local = protocol.EndpointHub
	}
	c := &conn{
		connParams: p,
		local:      local,
		inbound:    make(chan inboundMsg, inboundQueue),
		box:        newMailbox(),
		stopRead:   make(chan struct{}),
		done:       make(chan struct{}),
		timers:     make(map[*timer]struct{}),
		awaiting:   make(map[uint32]ackKey),
		late:       make(map[uint32]ackKey),
		queues:     make(map[protocol.NamespaceID]*nsQueue),
		flows:      make(map[protocol.NamespaceID]*flowCount),
		linger:     goroutineLinger,
	}
	c.ioCtx, c.ioCancel = context.WithCancel(context.Background())
	c.wctx, c.wcancel = context.WithCancel(context.Background())
	codec := protocol.NewCodec(p.cfg.Limits(), 0)
	c.in = protocol.NewInbound(codec)
	c.out = protocol.NewOutbound(codec)
	c.w.init(c)
	c.runFn = c.run
	c.pinger.c = c
	c.publishConnID()
	return c
}

// publishConnID makes connID readable by the reader and the writer, for the frame tap: on
// the hub at once, on the peer when HELLO_ACK has told it (owner goroutine).
func (c *conn) publishConnID() {
	if c.tap != nil && c.connID != "" {
		id := c.connID
		c.tapID.Store(&id)
	}
}

// tapConnectionID is the connection id the frame tap reports: "" on the peer until the
// handshake has told it.
func (c *conn) tapConnectionID() string {
	if p := c.tapID.Load(); p != nil {
		return *p
	}
	return ""
}

// start launches the reader goroutine and the owner's first run (begin); the writer's
// starts with the first frame to write.
func (c *conn) start() {
	c.setState(stHandshaking)
	c.beginPending = true
	c.kick()
	go c.readLoop()
}

// kick makes sure an owner goroutine runs to take the work just queued (an inbound message
// or a posted function). The owner runs only while there is work: an idle connection holds
// no owner stack. At most one runs at a time (ownerRunning), so the owner's fields still
// have one goroutine at a time touching them, in order.
func (c *conn) kick() {
	if c.ownerRunning.CompareAndSwap(false, true) {
		go c.runFn()
	}
}

// run is the owner goroutine: it takes inbound messages and posted functions one at a
// time, and after each runs what was deferred and the data pump. When there is nothing
// left it lingers for a moment (goroutineLinger) and then exits — the next message or post
// starts another (kick) — and exits for good once the connection has closed and its other
// goroutines are gone.
func (c *conn) run() {
	if c.beginPending {
		c.beginPending = false
		c.begin()
		c.settle()
		c.publishLoad()
		c.w.release()
	}
	for {
		for !c.exited && c.step(true) {
		}
		if c.exited {
			c.pubQueued.Store(0)
			c.pubInFlight.Store(0)
			close(c.done)
			return
		}
		// Idle. Work queued before the flag is cleared is seen by the check below; work
		// queued after it starts a new owner. The linger timer and the array of deferred
		// calls go too: an idle connection holds neither.
		c.lingerT, c.deferred = nil, nil
		c.ownerRunning.Store(false)
		if len(c.inbound) == 0 && len(c.box.wake) == 0 || !c.ownerRunning.CompareAndSwap(false, true) {
			return
		}
	}
}

// goroutineLinger is how long an owner or writer goroutine without work waits for more
// before it exits: under load it stays (starting a goroutine and growing its stack again
// costs more than waiting — a relayed update reaches a receiver every few milliseconds
// when its window is full and it waits for acknowledgements), and an idle connection gives
// its stacks back soon after its last message. A connection reads it once, when it is made
// (conn.linger); tests change it before they make theirs.
var goroutineLinger = 20 * time.Millisecond

// step handles one inbound message or the posted functions and reports whether there was
// something; with linger it waits up to goroutineLinger for them.
func (c *conn) step(linger bool) bool {
	select {
	case m := <-c.inbound:
		c.handleInbound(m)
	case <-c.box.wake:
		c.runPosted()
	default:
		if !linger {
			return false
		}
		if c.lingerT == nil {
			c.lingerT = time.NewTimer(c.linger)
		} else {
			c.lingerT.Reset(c.linger)
		}
		select {
		case m := <-c.inbound:
			c.handleInbound(m)
		case <-c.box.wake:
			c.runPosted()
		case <-c.lingerT.C:
			return false
		}
	}
	c.settle()
	c.publishLoad()
	c.w.release()
	c.maybeExit()
	return true
}

// runPosted runs the functions posted to the owner, settling after each.
func (c *conn) runPosted() {
	fs := c.box.take()
	for i, f := range fs {
		fs[i] = nil
		f()
		c.settle()
	}
	c.box.recycle(fs)
}

// settle runs deferred notifications and the data pump until neither has work: it runs
// after every event, so handlers are never re-entered.
func (c *conn) settle() {
	for {
		if len(c.deferred) > 0 {
			// What the calls defer joins the end of the list and runs in this pass, after
			// what was deferred before it.
			for i := 0; i < len(c.deferred); i++ {
				call := c.deferred[i]
				c.deferred[i] = deferredCall{}
				call.run()
			}
			if cap(c.deferred) <= maxDeferKept {
				c.deferred = c.deferred[:0]
			} else {
				c.deferred = nil
			}
			continue
		}
		if !c.pump() {
			if len(c.sched.parked) > 0 && parkAudit.Load() {
				c.auditParked()
			}
			c.pumpPresence() // the lowest lane: only when no data frame could go
			c.eventNow = observer.None[time.Time]()
			return
		}
	}
}

// defer_ runs f on the owner goroutine once the current callback has returned, so that a
// handler is never called from inside another.
func (c *conn) defer_(f func()) { c.deferred = append(c.deferred, deferredCall{f: f}) }

// deferSent calls sent(info) as defer_ would call a function: a DataItem's Sent callback,
// one per data frame, queued without a closure.
func (c *conn) deferSent(sent func(seam.SentInfo), info seam.SentInfo) {
	c.deferred = append(c.deferred, deferredCall{sent: sent, info: info})
}

// deferredCall is a call settle makes: f, or sent(info).
type deferredCall struct {
	f    func()
	sent func(seam.SentInfo)
	info seam.SentInfo
}

func (d *deferredCall) run() {
	if d.sent != nil {
		d.sent(d.info)
		return
	}
	d.f()
}

// maxDeferKept bounds the array settle keeps for the next deferred calls.
const maxDeferKept = 256

// post queues f for the owner goroutine without blocking; false once the owner has exited.
func (c *conn) post(f func()) bool {
	if !c.box.post(f) {
		return false
	}
	c.kick()
	return true
}

// maybeExit ends the owner goroutine once the connection is closed and its reader, writer
// and pinger are gone. Posted functions that arrived before run first.
func (c *conn) maybeExit() {
	if !c.closing || !c.readerDone || !c.writerDone || c.pinger.running {
		return
	}
	c.ioCancel()
	c.wcancel()
	if c.closeTimer != nil {
		c.closeTimer.Stop()
	}
	for _, f := range c.box.shut() {
		f()
	}
	c.deferred = nil
	c.exited = true
	if c.onExit != nil {
		c.onExit(c)
	}
}

// setState moves the connection to s and, on the hub, reports the change
// (connection-state-changed). On the peer the controller reports its own states.
func (c *conn) setState(s connState) {
	from := c.state
	if from == s {
		return
	}
	c.state = s
	c.pubState.Store(uint32(s))
	if s == stReady {
		c.pub.readyAt.Store(c.clock.Now().UnixNano())
	}
	if c.side == observer.SideHub && from != stUpgraded && c.em.Enabled() {
		c.em.Emit(observer.ConnectionStateChanged{ConnectionID: c.connIDOpt(), From: connStateNames[from], To: connStateNames[s]})
	}
}

// publicState is the state as other goroutines may read it.
func (c *conn) publicState() observer.ConnectionState {
	s := connState(c.pubState.Load())
	if s == stUpgraded {
		return observer.ConnHandshaking
	}
	return connStateNames[s]
}

// connIDOpt is the connectionId of events: present only once the handshake has completed
// (docs/protocol.md#safe-fields).
func (c *conn) connIDOpt() observer.Opt[string] {
	if c.connID == "" || !c.admitted.Load() {
		return observer.None[string]()
	}
	return observer.Some(c.connID)
}

// after arms a connection timer through the injected clock; it fires on the owner goroutine
// unless stopped or the connection closed.
func (c *conn) after(d time.Duration, f func()) *timer {
	t := &timer{c: c, f: f}
	c.timers[t] = struct{}{}
	t.ct = c.clock.AfterFunc(d, func() {
		c.post(func() {
			if t.stopped || c.closing {
				return
			}
			t.stopped = true
			delete(c.timers, t)
			t.f()
		})
	})
	return t
}

// beginWork counts admitted namespace work for the hub's Shutdown (seam.Session.BeginWork).
func (c *conn) beginWork() func() {
	if c.work == nil {
		return func() {}
	}
	return c.work.begin()
}

// publishLoad makes the outbound accounting readable from other goroutines (Load).
func (c *conn) publishLoad() {
	c.w.collect()
	c.pubQueued.Store(int64(c.sched.queued + c.sched.queuedBulk + c.sched.unflushed()))
	c.pubInFlight.Store(int64(c.inFlight))
}

// Load is the outbound load of a hub's or a peer's connections, readable from any goroutine
// (the gauges of docs/protocol.md#adapters): bytes queued or handed to the writer and not
// yet written, and live UPDATEs sent and neither acknowledged nor given up at an ACK
// timeout. Each connection publishes its share after every event of its owner goroutine.
type Load struct {
	QueuedBytes int64
	InFlight    int64
	// Connections counts the connections open: from the upgrade until every goroutine of
	// the connection has exited (leak checks read it).
	Connections int64
}

func (l *Load) add(c *conn) {
	// Bytes the writer wrote since the owner last published leave the figure at once,
	// without waking the owner to collect them.
	l.QueuedBytes += max(0, c.pubQueued.Load()-c.w.flushedData.Load()-c.w.flushedControl.Load())
	l.InFlight += c.pubInFlight.Load()
	l.Connections++
}
