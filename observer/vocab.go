package observer

import (
	"fmt"
	"slices"
)

// The closed vocabularies of the event keys (docs/protocol.md#events). Each is a
// named string type whose values are the contract's literals, listed once, in
// order, in its vocab; its list function, its Valid method, and the validation,
// rendering and metric labels of every event key that holds it all read that
// table. The lists are append-only: event types, reason, cause and via values
// and stable codes are added, never changed or removed, so dashboards and alerts
// keep working.

// vocab is one closed vocabulary: its values in the contract's order and, for a
// vocabulary whose values come from the wire, the member every other string folds
// to, so that a remote cannot invent new values.
type vocab[T ~string] struct {
	values []T
	other  T // what an unknown string folds to; "" when the vocabulary does not fold
}

func vocabOf[T ~string](values ...T) *vocab[T] { return &vocab[T]{values: values} }

// foldingVocab is a vocabulary whose unknown strings fold to other, one of values.
func foldingVocab[T ~string](other T, values ...T) *vocab[T] {
	return &vocab[T]{values: values, other: other}
}

// list returns a copy of the values, in order.
func (v *vocab[T]) list() []T { return slices.Clone(v.values) }

// has reports membership.
func (v *vocab[T]) has(x T) bool { return slices.Contains(v.values, x) }

// fold maps s to the vocabulary: a member to itself, anything else to the fold
// value (a vocabulary without one leaves s as it is).
func (v *vocab[T]) fold(s string) T {
	if x := T(s); v.other == "" || v.has(x) {
		return x
	}
	return v.other
}

// The describer reads every vocabulary through words (describe.go).

func (v *vocab[T]) contains(_ Side, s string) bool { return v.has(T(s)) }
func (v *vocab[T]) foldWord(s string) string       { return string(v.fold(s)) }
func (v *vocab[T]) problem(_ Side, s string) string {
	return fmt.Sprintf("%q is not in the closed vocabulary", s)
}

// sidedVocab is a vocabulary whose members depend on the side that emits the
// event: the connection and channel states.
type sidedVocab[T ~string] struct {
	hub, peer *vocab[T]
	noun      string // what a member is, for validation problems
}

func (v *sidedVocab[T]) forSide(side Side) *vocab[T] {
	switch side {
	case SideHub:
		return v.hub
	case SidePeer:
		return v.peer
	}
	return nil
}

// validFor reports whether x is a member for side.
func (v *sidedVocab[T]) validFor(side Side, x T) bool {
	s := v.forSide(side)
	return s != nil && s.has(x)
}

// list returns the members for side: the hub's for SideHub, the peer's otherwise.
func (v *sidedVocab[T]) list(side Side) []T {
	if side == SideHub {
		return v.hub.list()
	}
	return v.peer.list()
}

func (v *sidedVocab[T]) contains(side Side, s string) bool { return v.validFor(side, T(s)) }
func (v *sidedVocab[T]) foldWord(s string) string          { return s }
func (v *sidedVocab[T]) problem(side Side, s string) string {
	return fmt.Sprintf("%q is not a %s %s", s, side, v.noun)
}

// Side is the envelope key `side`: which end emitted the event.
type Side string

const (
	SideHub  Side = "hub"
	SidePeer Side = "peer"
)

var sides = vocabOf(SideHub, SidePeer)

// Sides lists both sides.
func Sides() []Side { return sides.list() }

// Valid reports whether s is hub or peer.
func (s Side) Valid() bool { return sides.has(s) }

// ConnectionState is a connection state machine state: the 8 states of the peer's
// connection or the hub's (docs/protocol.md#connection-states; of the hub's,
// events report only handshaking, ready, draining and closed).
type ConnectionState string

const (
	ConnStopped      ConnectionState = "stopped"
	ConnDisconnected ConnectionState = "disconnected"
	ConnConnecting   ConnectionState = "connecting"
	ConnHandshaking  ConnectionState = "handshaking"
	ConnReady        ConnectionState = "ready"
	ConnDraining     ConnectionState = "draining"
	ConnBackoff      ConnectionState = "backoff"
	ConnBlocked      ConnectionState = "blocked"
	ConnClosed       ConnectionState = "closed" // hub only
)

var connectionStates = &sidedVocab[ConnectionState]{
	peer: vocabOf(ConnStopped, ConnDisconnected, ConnConnecting, ConnHandshaking, ConnReady,
		ConnDraining, ConnBackoff, ConnBlocked),
	hub:  vocabOf(ConnHandshaking, ConnReady, ConnDraining, ConnClosed),
	noun: "connection state",
}

// ConnectionStates lists the connection states an event of the given side may
// carry.
func ConnectionStates(side Side) []ConnectionState { return connectionStates.list(side) }

// ValidFor reports whether s is a connection state of the given side.
func (s ConnectionState) ValidFor(side Side) bool { return connectionStates.validFor(side, s) }

// Valid reports whether s is a connection state of either side.
func (s ConnectionState) Valid() bool { return s.ValidFor(SideHub) || s.ValidFor(SidePeer) }

// ChannelState is a namespace channel state (docs/protocol.md#namespace-states):
// the 11 peer states, or the 9 hub states (the peer set without the peer-only
// `targeted` and `disconnected` — see docs/decisions.md).
type ChannelState string

const (
	ChannelTargeted      ChannelState = "targeted" // peer only
	ChannelOpening       ChannelState = "opening"
	ChannelBootstrapping ChannelState = "bootstrapping"
	ChannelReconciling   ChannelState = "reconciling"
	ChannelLive          ChannelState = "live"
	ChannelNeedsResync   ChannelState = "needs-resync"
	ChannelClosing       ChannelState = "closing"
	ChannelClosed        ChannelState = "closed"
	ChannelConflicted    ChannelState = "conflicted"
	ChannelFailed        ChannelState = "failed"
	ChannelDisconnected  ChannelState = "disconnected" // peer only
)

var channelStates = &sidedVocab[ChannelState]{
	peer: vocabOf(ChannelTargeted, ChannelOpening, ChannelBootstrapping, ChannelReconciling,
		ChannelLive, ChannelNeedsResync, ChannelClosing, ChannelClosed, ChannelConflicted,
		ChannelFailed, ChannelDisconnected),
	hub: vocabOf(ChannelOpening, ChannelBootstrapping, ChannelReconciling, ChannelLive,
		ChannelNeedsResync, ChannelClosing, ChannelClosed, ChannelConflicted, ChannelFailed),
	noun: "channel state",
}

// ChannelStates lists the channel states an event of the given side may carry.
func ChannelStates(side Side) []ChannelState { return channelStates.list(side) }

// ValidFor reports whether s is a channel state of the given side.
func (s ChannelState) ValidFor(side Side) bool { return channelStates.validFor(side, s) }

// Valid reports whether s is a channel state of either side.
func (s ChannelState) Valid() bool { return s.ValidFor(SidePeer) }

// BackoffReason is connection-backoff-scheduled.reason (8 values).
type BackoffReason string

const (
	BackoffDialFailed             BackoffReason = "dial-failed"
	BackoffSocketClosed           BackoffReason = "socket-closed"
	BackoffHelloTimeout           BackoffReason = "hello-timeout"
	BackoffPongTimeout            BackoffReason = "pong-timeout"
	BackoffConnectionBackpressure BackoffReason = "connection-backpressure"
	BackoffGoAwayClosed           BackoffReason = "goaway-closed"
	BackoffGoAwayRetryHint        BackoffReason = "goaway-retry-hint"
	BackoffNamespaceRecovery      BackoffReason = "namespace-recovery"
)

var backoffReasons = vocabOf(BackoffDialFailed, BackoffSocketClosed, BackoffHelloTimeout,
	BackoffPongTimeout, BackoffConnectionBackpressure, BackoffGoAwayClosed, BackoffGoAwayRetryHint,
	BackoffNamespaceRecovery)

// BackoffReasons lists the backoff reasons.
func BackoffReasons() []BackoffReason { return backoffReasons.list() }

// Valid reports membership in the closed vocabulary.
func (r BackoffReason) Valid() bool { return backoffReasons.has(r) }

// GoAwayReason is goaway-received.reasonCode: the GOAWAY reason codes of the
// contract, every other wire string folded to `other`, so a remote cannot inject
// unbounded label values.
type GoAwayReason string

const (
	GoAwayServerRestarting   GoAwayReason = "SERVER_RESTARTING"
	GoAwayServerShuttingDown GoAwayReason = "SERVER_SHUTTING_DOWN"
	GoAwayReauthRequired     GoAwayReason = "REAUTH_REQUIRED"
	GoAwayOther              GoAwayReason = "other"
)

var goAwayReasons = foldingVocab(GoAwayOther, GoAwayServerRestarting, GoAwayServerShuttingDown,
	GoAwayReauthRequired, GoAwayOther)

// GoAwayReasons lists the goaway reason codes, `other` last.
func GoAwayReasons() []GoAwayReason { return goAwayReasons.list() }

// Valid reports membership in the closed vocabulary.
func (r GoAwayReason) Valid() bool { return goAwayReasons.has(r) }

// FoldGoAwayReason maps a wire GOAWAY reasonCode to the event vocabulary: the
// three known codes map to themselves, anything else (including "other") to
// GoAwayOther.
func FoldGoAwayReason(wire string) GoAwayReason { return goAwayReasons.fold(wire) }

// AuthRejectReason is auth-upgrade-rejected.reason: the contract's 9 values and hub-busy,
// the hub's admission control (docs/decisions.md).
type AuthRejectReason string

const (
	AuthHubShutdown        AuthRejectReason = "hub-shutdown"
	AuthMissingToken       AuthRejectReason = "missing-token"
	AuthVerifierMissing    AuthRejectReason = "verifier-missing"
	AuthFrameTooLarge      AuthRejectReason = "frame-too-large"
	AuthEarlyFrameLimit    AuthRejectReason = "early-frame-limit"
	AuthTimeout            AuthRejectReason = "auth-timeout"
	AuthInvalidCredentials AuthRejectReason = "invalid-credentials"
	AuthInvalidInstanceID  AuthRejectReason = "invalid-instance-id"
	AuthPeerDisconnected   AuthRejectReason = "peer-disconnected"
	AuthHubBusy            AuthRejectReason = "hub-busy" // an upgrade refused with 503 and Retry-After
)

var authRejectReasons = vocabOf(AuthHubShutdown, AuthMissingToken, AuthVerifierMissing,
	AuthFrameTooLarge, AuthEarlyFrameLimit, AuthTimeout, AuthInvalidCredentials,
	AuthInvalidInstanceID, AuthPeerDisconnected, AuthHubBusy)

// AuthRejectReasons lists the upgrade rejection reasons.
func AuthRejectReasons() []AuthRejectReason { return authRejectReasons.list() }

// Valid reports membership in the closed vocabulary.
func (r AuthRejectReason) Valid() bool { return authRejectReasons.has(r) }

// ResyncCause is resync-required.cause (6 values).
type ResyncCause string

const (
	ResyncQueueOverflow         ResyncCause = "queue-overflow"
	ResyncSendFailed            ResyncCause = "send-failed"
	ResyncConnectionShed        ResyncCause = "connection-shed"
	ResyncAckTimeout            ResyncCause = "ack-timeout"
	ResyncSessionFanoutOverflow ResyncCause = "session-fanout-overflow"
	ResyncRemoteDeclared        ResyncCause = "remote-declared"
)

var resyncCauses = vocabOf(ResyncQueueOverflow, ResyncSendFailed, ResyncConnectionShed,
	ResyncAckTimeout, ResyncSessionFanoutOverflow, ResyncRemoteDeclared)

// ResyncCauses lists the resync causes.
func ResyncCauses() []ResyncCause { return resyncCauses.list() }

// Valid reports membership in the closed vocabulary.
func (c ResyncCause) Valid() bool { return resyncCauses.has(c) }

// SendFailureReason is resync-required.reason, present only with cause
// send-failed.
type SendFailureReason string

const (
	SendUpdateTooLarge SendFailureReason = "update-too-large"
	SendFrameRejected  SendFailureReason = "send-frame-rejected"
)

var sendFailureReasons = vocabOf(SendUpdateTooLarge, SendFrameRejected)

// SendFailureReasons lists the send-failed sub-reasons.
func SendFailureReasons() []SendFailureReason { return sendFailureReasons.list() }

// Valid reports membership in the closed vocabulary.
func (r SendFailureReason) Valid() bool { return sendFailureReasons.has(r) }

// DropReason is update-dropped.reason (one value today).
type DropReason string

const DropUpdateTooLarge DropReason = "update-too-large"

var dropReasons = vocabOf(DropUpdateTooLarge)

// DropReasons lists the drop reasons.
func DropReasons() []DropReason { return dropReasons.list() }

// Valid reports membership in the closed vocabulary.
func (r DropReason) Valid() bool { return dropReasons.has(r) }

// FailedCause is namespace-failed.cause (13 values).
type FailedCause string

const (
	FailedOpenTimeout         FailedCause = "open-timeout"
	FailedBootstrapTimeout    FailedCause = "bootstrap-timeout"
	FailedReconcileTimeout    FailedCause = "reconcile-timeout"
	FailedOpenFailed          FailedCause = "open-failed"
	FailedSessionOpenFailed   FailedCause = "session-open-failed"
	FailedReplicationDisabled FailedCause = "replication-disabled"
	FailedSessionMissing      FailedCause = "session-missing"
	FailedProtocolViolation   FailedCause = "protocol-violation"
	FailedApplyRefused        FailedCause = "apply-refused"
	FailedApplyRejected       FailedCause = "apply-rejected"
	FailedRemoteError         FailedCause = "remote-error"
	FailedSendFailed          FailedCause = "send-failed"
	FailedInternalError       FailedCause = "internal-error"
)

var failedCauses = vocabOf(FailedOpenTimeout, FailedBootstrapTimeout, FailedReconcileTimeout,
	FailedOpenFailed, FailedSessionOpenFailed, FailedReplicationDisabled, FailedSessionMissing,
	FailedProtocolViolation, FailedApplyRefused, FailedApplyRejected, FailedRemoteError,
	FailedSendFailed, FailedInternalError)

// FailedCauses lists the namespace-failed causes.
func FailedCauses() []FailedCause { return failedCauses.list() }

// Valid reports membership in the closed vocabulary.
func (c FailedCause) Valid() bool { return failedCauses.has(c) }

// Timer reports whether c is one of the timer causes (the local mapping of
// NAMESPACE_TIMEOUT), the only causes that may carry timeoutMs.
func (c FailedCause) Timer() bool {
	return c == FailedOpenTimeout || c == FailedBootstrapTimeout || c == FailedReconcileTimeout
}

// ConflictVia is identity-conflicted.via (3 values).
type ConflictVia string

const (
	ViaOpenMismatch         ConflictVia = "open-mismatch"
	ViaFence                ConflictVia = "fence"
	ViaIdentityChangedFrame ConflictVia = "identity-changed-frame"
)

var conflictVias = vocabOf(ViaOpenMismatch, ViaFence, ViaIdentityChangedFrame)

// ConflictVias lists the identity-conflicted routes.
func ConflictVias() []ConflictVia { return conflictVias.list() }

// Valid reports membership in the closed vocabulary.
func (v ConflictVia) Valid() bool { return conflictVias.has(v) }

// AbortReason is the reason of the chunked-*-aborted events (6 values, shared by
// all three transfer kinds).
type AbortReason string

const (
	AbortTimeout            AbortReason = "timeout"
	AbortShed               AbortReason = "shed"
	AbortResyncDeclared     AbortReason = "resync-declared"
	AbortChannelTeardown    AbortReason = "channel-teardown"
	AbortConnectionTeardown AbortReason = "connection-teardown"
	AbortEpochFence         AbortReason = "epoch-fence"
)

var abortReasons = vocabOf(AbortTimeout, AbortShed, AbortResyncDeclared,
	AbortChannelTeardown, AbortConnectionTeardown, AbortEpochFence)

// AbortReasons lists the chunked abort reasons.
func AbortReasons() []AbortReason { return abortReasons.list() }

// Valid reports membership in the closed vocabulary.
func (r AbortReason) Valid() bool { return abortReasons.has(r) }

// Direction is namespace-error.direction: whether this side sent or received the
// ERROR frame.
type Direction string

const (
	DirectionSent     Direction = "sent"
	DirectionReceived Direction = "received"
)

var directions = vocabOf(DirectionSent, DirectionReceived)

// Directions lists both directions.
func Directions() []Direction { return directions.list() }

// Valid reports membership in the closed vocabulary.
func (d Direction) Valid() bool { return directions.has(d) }

// TerminalState is namespace-error.terminalState: failed, conflicted or closed
// (the registry's needs-resync is clamped to failed, see ClampTerminalState).
type TerminalState string

const (
	TerminalFailed     TerminalState = "failed"
	TerminalConflicted TerminalState = "conflicted"
	TerminalClosed     TerminalState = "closed"
)

var terminalStates = vocabOf(TerminalFailed, TerminalConflicted, TerminalClosed)

// TerminalStates lists the event terminal states.
func TerminalStates() []TerminalState { return terminalStates.list() }

// Valid reports membership in the closed vocabulary.
func (s TerminalState) Valid() bool { return terminalStates.has(s) }

// ClampTerminalState maps a terminal state of the namespace error registry to the
// event vocabulary (docs/protocol.md#event-codes): needs-resync clamps to
// failed; failed, conflicted and closed map to themselves; anything else is
// absent.
func ClampTerminalState(registry string) Opt[TerminalState] {
	if s := TerminalState(registry); s.Valid() {
		return Some(s)
	}
	if registry == "needs-resync" {
		return Some(TerminalFailed)
	}
	return None[TerminalState]()
}

// ApplyEffect is sync-diff-applied.applyEffect: whether the state vector advanced
// across the apply window.
type ApplyEffect string

const (
	EffectChanged ApplyEffect = "changed"
	EffectNoop    ApplyEffect = "noop"
)

var applyEffects = vocabOf(EffectChanged, EffectNoop)

// ApplyEffects lists both effects.
func ApplyEffects() []ApplyEffect { return applyEffects.list() }

// Valid reports membership in the closed vocabulary.
func (e ApplyEffect) Valid() bool { return applyEffects.has(e) }

// SchemaRearmCode is schema-rearm-failed.code: the two stable codes of a failed
// schema re-arm (the definition is invalid, or installing failed), a domain of
// its own with no folding — it is not part of NamespaceCode.
type SchemaRearmCode string

const (
	SchemaRearmInvalid  SchemaRearmCode = "NSRT-FATAL-SCHEMA-REARM-INVALID"
	SchemaRearmInternal SchemaRearmCode = "NSRT-FATAL-SCHEMA-REARM-INTERNAL"
)

var schemaRearmCodes = vocabOf(SchemaRearmInvalid, SchemaRearmInternal)

// SchemaRearmCodes lists both codes.
func SchemaRearmCodes() []SchemaRearmCode { return schemaRearmCodes.list() }

// Valid reports membership in the closed vocabulary.
func (c SchemaRearmCode) Valid() bool { return schemaRearmCodes.has(c) }
