package seam

import (
	"time"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/replication/protocol"
)

// Handler is the namespace layer of one ready connection. Its methods are called on the
// connection's owner goroutine, one at a time, never re-entrantly, and must not block.
type Handler interface {
	// HandleFrame receives one inbound namespace frame (OPEN_NAMESPACE to UPDATE_CHUNK, or
	// an ERROR of namespace scope). The connection has checked the envelope and payload,
	// the sequence, that the remote may send the type, that the handshake is complete, the
	// admission of OPEN_NAMESPACE, the drain filter (a draining connection delivers no frame
	// that would start work, see protocol.MessageRule.StartsWork) and, for an
	// acknowledgement, that it names an unacknowledged frame this side sent of the matching
	// type and namespace. UPDATE_CHUNK frames arrive one by one; assembling them is the
	// namespace layer's job. Byte fields alias a buffer that is never reused: the handler
	// may keep them.
	HandleFrame(f protocol.Frame)
	// HandleRejected receives an inbound frame over a namespace size cap (UPDATE_TOO_LARGE,
	// SYNC_DIFF_TOO_LARGE, BOOTSTRAP_TOO_LARGE). The frame consumed its sequence; the
	// namespace fails and the connection goes on.
	HandleRejected(err *protocol.Error)
	// HandleDrain reports that the connection started draining: a GOAWAY was sent or
	// received, or the peer is stopping. New data is refused from now on. The namespace
	// layer closes its namespaces and calls Session.Quiesced once none is left open;
	// otherwise the connection closes at d.Deadline.
	HandleDrain(d Drain)
	// HandleShed reports that backpressure dropped ns's unsent data: the namespace has lost
	// continuity and needs a resync.
	HandleShed(ns protocol.NamespaceID, info ShedInfo)
	// HandleRevoked reports that the authenticator withdrew the peer's access to
	// r.Namespaces (hub only): end those namespaces with NAMESPACE_UNAUTHORIZED.
	HandleRevoked(r auth.PeerRevocation)
	// HandleClosed is the last call: the connection is closed, nothing more is written, and
	// Session methods other than Post fail with ErrClosed. Functions already posted still
	// run on the owner goroutine until it exits. Work admitted earlier must still finish:
	// hold Session.BeginWork for it.
	HandleClosed(info CloseInfo)
}

// NamespaceFactory creates the namespace layer of a connection that has just completed its
// handshake. It is called on the connection's owner goroutine.
type NamespaceFactory func(s Session) Handler

// Drain describes a draining connection: one that finishes what it has started and admits
// nothing new before it closes.
type Drain struct {
	// ReasonCode is the GOAWAY reasonCode, or "" for a peer's local stop.
	ReasonCode string
	// Received is true when the remote sent the GOAWAY, false when this side did (or, with
	// ReasonCode "", when the peer is stopping).
	Received bool
	// Deadline is when the connection closes if its namespaces have not all ended: the
	// GOAWAY's drainTimeoutMs from when it was sent or received.
	Deadline time.Time
	// RetryAfter is the GOAWAY's retryAfterMs hint, when HasRetryAfter.
	RetryAfter    time.Duration
	HasRetryAfter bool
}

// ShedInfo says what a shed or a cleared queue dropped.
type ShedInfo struct {
	Items int // unsent data items dropped
	Bytes int // their bytes
	// TransferAborted is true when a chunked transfer had sent some of its chunks: the rest
	// will not follow, and the receiver discards what it assembled when the namespace
	// resyncs.
	TransferAborted bool
}

// CloseInfo says why a connection closed.
type CloseInfo struct {
	// Code is the WebSocket close code sent or received (protocol.CloseAbnormal when the
	// socket was lost without one).
	Code protocol.CloseCode
	// Error is the connection error that ended the connection: a code of the connection
	// registry, or a local one (protocol.CodePongTimeout,
	// protocol.CodeOutboundSequenceExhausted); "" for an orderly end.
	Error protocol.ErrorCode
	// Remote is true when the remote endpoint ended the connection (its ERROR frame or its
	// close), false when this side decided.
	Remote bool
	// Cause classifies a local decision or a lost transport.
	Cause CloseCause
	// GoAway is the GOAWAY received before the close, if any.
	GoAway    *Drain
	Handshook bool // the handshake had completed
}

// CloseCause classifies why a connection closed.
type CloseCause string

// Close causes.
const (
	CauseProtocol      CloseCause = "protocol"        // a connection protocol error (CloseInfo.Error)
	CauseRemoteClose   CloseCause = "remote-close"    // the remote closed (with or without an ERROR first)
	CauseTransport     CloseCause = "transport"       // the socket failed without a close frame
	CauseHelloTimeout  CloseCause = "hello-timeout"   // no handshake within helloTimeoutMs
	CausePongTimeout   CloseCause = "pong-timeout"    // no pong within pongTimeoutMs
	CauseDrained       CloseCause = "drained"         // a drain ended (every namespace ended, or the deadline)
	CauseShutdown      CloseCause = "shutdown"        // the hub's service shut down, or the peer stopped
	CauseReconnect     CloseCause = "reconnect"       // the namespace layer asked for a new connection
	CauseBackpressure  CloseCause = "backpressure"    // the control reserve was exhausted
	CauseEarlyFrames   CloseCause = "early-frames"    // too many frames before admission
	CauseFrameTooLarge CloseCause = "frame-too-large" // a message over maxFrameBytes
)
