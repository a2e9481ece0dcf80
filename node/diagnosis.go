package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/node/cli"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/ws"
)

// DialWarnEvery is how often a peer that cannot reach its hub repeats its warning (the
// first failure is logged at once; later ones are counted in the next line).
const DialWarnEvery = 30 * time.Second

// PeerDiagnosisOptions configure a PeerDiagnosis.
type PeerDiagnosisOptions struct {
	// TokenSource names where the token comes from, for the fixes it suggests: "the token
	// file FILE" or "NOMICORE_TOKEN".
	TokenSource string
	// InstanceID is the peer's --instance-id, for the hub commands it suggests.
	InstanceID string
	Clock      clock.Clock
	Logger     *slog.Logger
}

// PeerDiagnosis says, in an operator's words, why a peer is not replicating and what to do:
// it watches the peer's connection attempts (Dialer wraps the peer's dialer: the address and
// the error of a failed dial, the HTTP status of a refused upgrade) and its replication
// events (Observe: a connection that failed for good — by an error either side found —, a
// target the hub refused), and
//
//   - logs a dial failure at WARN with the hub's address and the error, at most once every
//     DialWarnEvery (with the count of failures in between), and the recovery at INFO;
//   - logs a refusal that waiting will not heal (HTTP 401, 403, 404; an identity mismatch; a
//     protocol disagreement) at ERROR, naming the cause and the fix;
//   - answers ConnectionProblem (for /readyz) and ExplainTarget (for GET /v1/targets).
//
// It is safe for concurrent use: dials run on their own goroutines, events arrive on the
// connection's.
type PeerDiagnosis struct {
	opts PeerDiagnosisOptions
	log  *slog.Logger

	mu           sync.Mutex // guards everything below
	lastFailure  string     // the code of the last connection failure logged, until ready
	connProblem  string     // why the connection is not ready, when known; "" once ready
	failedDials  int        // failed dials not yet reported in a warning line
	lastDialWarn time.Time  // when the last dial warning was logged
	failing      bool       // dials fail and none succeeded since the first warning
	targets      map[string]targetProblem
}

// targetProblem is what ended a target's replication.
type targetProblem struct{ code, reason string }

// NewPeerDiagnosis returns a PeerDiagnosis.
func NewPeerDiagnosis(opts PeerDiagnosisOptions) *PeerDiagnosis {
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &PeerDiagnosis{opts: opts, log: log, targets: map[string]targetProblem{}}
}

// Dialer wraps the peer's dialer so that every attempt's outcome reaches the diagnosis.
func (d *PeerDiagnosis) Dialer(inner ws.Dialer) ws.Dialer { return diagnosingDialer{d, inner} }

type diagnosingDialer struct {
	d     *PeerDiagnosis
	inner ws.Dialer
}

func (x diagnosingDialer) Dial(ctx context.Context, url string, header http.Header) (ws.Transport, error) {
	tr, err := x.inner.Dial(ctx, url, header)
	x.d.dialed(url, err)
	return tr, err
}

// dialed records one dial's outcome.
func (d *PeerDiagnosis) dialed(url string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		if d.failing {
			d.log.Info("reached the hub again", slog.String("hubUrl", url), slog.Int("failedDials", d.failedDials))
		}
		d.failing, d.failedDials, d.connProblem = false, 0, ""
		return
	}
	var de *ws.DialError
	if errors.As(err, &de) {
		d.refused(url, de.StatusCode)
		return
	}
	// The fix travels with the problem, so /readyz and GET /v1/targets say what the log says.
	fix := dialFix(err)
	d.connProblem = fmt.Sprintf("cannot reach the hub at %s: %v: %s", url, err, fix)
	d.failedDials++
	now := d.opts.Clock.Now()
	if d.failing && now.Sub(d.lastDialWarn) < DialWarnEvery {
		return
	}
	d.log.Warn("cannot reach the hub; retrying with backoff", slog.String("hubUrl", url), slog.String("error", err.Error()),
		slog.Int("failedDials", d.failedDials), slog.String("fix", fix))
	d.failing, d.failedDials, d.lastDialWarn = true, 0, now
}

// refused handles an upgrade the hub answered with an HTTP error: permanent for a 4xx (the
// peer stays blocked until its token or configuration changes), logged at ERROR.
func (d *PeerDiagnosis) refused(url string, status int) {
	var cause, fix string
	switch status {
	case http.StatusUnauthorized:
		cause = "the hub refused this peer's token (HTTP 401)"
		peer := cli.ShellArg(d.opts.InstanceID)
		fix = fmt.Sprintf("the token in %s is not in the hub's tokens file: on the hub, run hub token add --data DIR --peer %s "+
			"(DIR: the hub's data directory; hub token rotate --data DIR --peer %s if it has a token already) and put the printed "+
			"token there; the peer tries again when it changes", d.opts.TokenSource, peer, peer)
	case http.StatusForbidden:
		cause = "the hub knows this peer's token but does not let it replicate (HTTP 403)"
		fix = "its entry in the hub's tokens file grants no namespace: on the hub, hub token list --data DIR (DIR: the hub's data " +
			"directory) shows it; give it namespaces in that file (the hub applies the change within a second)"
	case http.StatusNotFound:
		cause = fmt.Sprintf("the hub has no replication endpoint at %s (HTTP 404)", url)
		fix = "--hub-url must be ws://HOST:PORT/v1/replication (or wss://…), HOST:PORT being the hub's --listen address or its proxy"
	case http.StatusBadRequest:
		cause = "the hub refused the connection request (HTTP 400)"
		fix = "a hub serving TLS (--tls-cert) answers a plain ws:// request so: use wss:// in --hub-url; otherwise check the proxy in front of the hub"
	default:
		cause = fmt.Sprintf("the hub refused the connection with HTTP %d", status)
		fix = "check --hub-url, and the proxy in front of the hub if there is one"
	}
	d.connProblem = cause + ": " + fix
	d.failing = false
	level := slog.LevelError
	if status >= 500 {
		level = slog.LevelWarn // the peer backs off and retries
	}
	d.log.LogAttrs(context.Background(), level, "the hub refused this peer", slog.String("hubUrl", url), slog.Int("status", status),
		slog.String("cause", cause), slog.String("fix", fix))
}

// Observe takes the peer's replication events (it is an observer.Observer's function).
func (d *PeerDiagnosis) Observe(e observer.Event) {
	switch p := e.Payload.(type) {
	case observer.ConnectionStateChanged:
		if p.To == observer.ConnReady {
			d.mu.Lock()
			d.connProblem, d.lastFailure = "", ""
			d.mu.Unlock()
		}
	case observer.ConnectionFailed:
		d.connectionFailed(string(p.Code))
	case observer.GoAwayReceived:
		if p.ReasonCode == observer.GoAwayReauthRequired {
			d.log.Info("the hub asked this peer to authenticate again (its token was rotated or removed); it reconnects with the token it has now",
				slog.String("tokenSource", d.opts.TokenSource))
		}
	case observer.NamespaceError:
		if t, ok := p.TerminalState.Get(); ok && (t == observer.TerminalFailed || t == observer.TerminalConflicted) {
			d.setTarget(p.NamespaceID, targetProblem{code: string(p.Code), reason: namespaceReason(p.NamespaceID, string(p.Code), p.Direction)})
		}
	case observer.NamespaceFailed:
		d.mu.Lock()
		if _, known := d.targets[p.NamespaceID]; !known {
			d.targets[p.NamespaceID] = targetProblem{reason: fmt.Sprintf("replication of this namespace failed (%s); it is retried on the next connection", p.Cause)}
		}
		d.mu.Unlock()
	case observer.IdentityConflicted:
		d.setTarget(p.NamespaceID, targetProblem{code: "IDENTITY_CHANGED", reason: fmt.Sprintf("the hub's copy of this namespace "+
			"was replaced (an epoch bump or a restore): reset the replica with POST /v1/namespaces/%s/reset; local writes that "+
			"never reached the hub are kept in its archive (nmcr store ls)", p.NamespaceID)})
	case observer.ChannelStateChanged:
		if p.To == observer.ChannelLive {
			d.mu.Lock()
			delete(d.targets, p.NamespaceID)
			d.mu.Unlock()
		}
	}
}

func (d *PeerDiagnosis) setTarget(ns string, tp targetProblem) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.targets[ns] = tp
}

// connectionFailed handles a connection that closed on an error: one that will not heal by
// reconnecting (the contract's retry "no" or "config") is logged at ERROR with its fix.
func (d *PeerDiagnosis) connectionFailed(code string) {
	spec, ok := protocol.LookupError(protocol.ScopeConnection, protocol.ErrorCode(code))
	if !ok || spec.Retry != protocol.RetryNo && spec.Retry != protocol.RetryConfig {
		return
	}
	var cause, fix string
	switch code {
	case string(protocol.CodeInstanceIdentityMismatch):
		cause = "the hub and this peer disagree on who is who (INSTANCE_IDENTITY_MISMATCH)"
		fix = "this peer's token was made for another peer, or --hub-instance-id does not name the hub: compare --instance-id with hub token list on the hub, and --hub-instance-id with the hub's --instance-id"
	case string(protocol.CodeUnsupportedProtocolVersion), string(protocol.CodeUnsupportedCapability):
		cause = fmt.Sprintf("the hub and this peer speak different protocol versions or generations (%s)", code)
		fix = "run both with the same --generation, and binaries of compatible versions (--version)"
	case string(protocol.CodeFrameTooLarge):
		cause = "a message was larger than the other side accepts (FRAME_TOO_LARGE)"
		fix = "give the hub and every peer the same limits (--max-frame-bytes and the --max-…-bytes flags)"
	default:
		cause = fmt.Sprintf("the connection failed with %s", code)
		fix = "a protocol error between this peer and the hub: compare their versions (--version) and configuration"
	}
	d.mu.Lock()
	d.connProblem = cause + ": " + fix
	repeated := d.lastFailure == code
	d.lastFailure = code
	d.mu.Unlock()
	if repeated {
		return
	}
	d.log.Error("the connection to the hub failed and will not be retried until the configuration changes (SIGHUP or a new token)",
		slog.String("code", code), slog.String("cause", cause), slog.String("fix", fix))
}

// namespaceReason words the error that ended a target.
func namespaceReason(ns, code string, dir observer.Direction) string {
	switch protocol.ErrorCode(code) {
	case protocol.CodeNamespaceNotFound:
		return fmt.Sprintf("the hub has no namespace %s for this peer: either it does not exist there (a hub restored from "+
			"a backup taken before it was created lacks it: this replica holds it, and the hub's log says how to give it "+
			"back — POST …/%s/recreate with this peer's GET /v1/namespaces/%s/update; otherwise create it on the hub, or "+
			"remove the target: DELETE /v1/targets/%s), or it belongs to another owner than the one this peer's token "+
			"is for — the hub's log then names both owners and the fix (\"a peer asked for a namespace of another owner\")", ns, ns, ns, ns)
	case protocol.CodeNamespaceUnauthorized:
		return "this peer's token does not allow this namespace: widen its grant in the hub's tokens file (hub token list shows it), then restart the peer or send it SIGHUP"
	case protocol.CodeBootstrapTooLarge:
		return "the document is larger than one message may carry, and this connection does not send it in chunks (the hub or this peer runs --generation v1): run both with --generation v2 (the default), or raise --max-bootstrap-bytes and --max-frame-bytes on both"
	case protocol.CodeSyncDiffTooLarge:
		return "what this peer and the hub must exchange to catch up is larger than one message may carry, and this connection does not send it in chunks (--generation v1 on one side): run both with --generation v2 (the default), or raise --max-sync-diff-bytes and --max-frame-bytes on both"
	case protocol.CodeSnapshotTransferTooLarge:
		return "the document is larger than --max-chunked-bootstrap-bytes: raise it on the hub and the peers (with --max-chunks-per-update, see docs/operations.md) and restart them"
	case protocol.CodeSyncTransferTooLarge:
		return "what this peer missed or wrote while apart from the hub is larger than --max-chunked-sync-diff-bytes: raise it on the hub and the peers (with --max-chunks-per-update, see docs/operations.md) and restart them"
	case protocol.CodeUpdateTransferTooLarge:
		return "an update was larger than the receiver's --max-chunked-update-bytes: give the hub and the peers the same chunked limits"
	case protocol.CodePersistenceDegraded:
		if dir == observer.DirectionReceived {
			return "the hub cannot save changes now (its store failed, or its cluster lost quorum)"
		}
	case protocol.CodeNamespaceTimeout:
		return "the hub did not complete the open, bootstrap or catch-up of this namespace in time (--open-timeout, --bootstrap-timeout, --reconcile-timeout)"
	}
	by := "the hub"
	if dir == observer.DirectionSent {
		by = "this peer"
	}
	return fmt.Sprintf("%s ended replication of this namespace with %s", by, code)
}

// retryWords says how a failed target recovers: when it is tried again, or — when retrying
// cannot help — the operator's next step.
func retryWords(ns string, f *namespace.TargetFailure, now time.Time) string {
	at := "on the next connection to the hub"
	if f.RetryAt.After(now) {
		at = "at " + f.RetryAt.UTC().Format(time.RFC3339)
	}
	switch f.Recovery {
	case namespace.RecoveryAutomatic:
		return fmt.Sprintf("this heals by itself: retried %s (failure %d in a row)", at, f.Attempts)
	case namespace.RecoveryAfterConfig:
		return fmt.Sprintf("retried %s and on every new connection to the hub (failure %d in a row); it succeeds once that is fixed", at, f.Attempts)
	}
	reset := fmt.Sprintf("reset the replica (POST /v1/targets/%s/reset: it is archived and bootstrapped again)", ns)
	var next string
	switch protocol.ErrorCode(f.Code) {
	case protocol.CodeProtectedFieldMutation:
		next = "this replica holds a change to the protected meta map that the hub refuses: " + reset +
			"; local writes that never reached the hub stay in the archive (nmcr store ls)"
	case protocol.CodeRoleViolation:
		next = "this peer's token may only read this namespace, and a local write was sent: widen its grant on the hub " +
			"(hub token list shows it), or " + reset + " to drop the write"
	default:
		next = "the hub and this peer disagree on the protocol: compare their versions (--version); the namespace is opened " +
			"again when the connection is rebuilt (a restart of the peer), or " + reset
	}
	return "retrying cannot help, so it is not retried by itself: " + next
}

// ConnectionProblem says why the connection to the hub is not ready, when it knows
// (empty otherwise).
func (d *PeerDiagnosis) ConnectionProblem() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.connProblem
}

// ExplainTarget says why a target is not replicating: the error code that ended it and the
// reason in words; for a target that waits for a connection the hub refused, that refusal.
// Both are empty for a target that replicates or simply waits its turn.
//
// A failed target's reason says how it recovers — when it is tried again, or the operator's
// next step when retrying cannot help — and a target that is not live says how many bytes
// of local writes it holds that the hub has not confirmed.
func (d *PeerDiagnosis) ExplainTarget(ts namespace.TargetStatus) (code, reason string) {
	code, reason = d.explain(ts)
	if n := ts.UnreplicatedBytes; n > 0 && ts.State != observer.ChannelLive {
		held := fmt.Sprintf("%d bytes of local writes not replicated yet", n)
		if reason == "" {
			reason = held
		} else {
			reason += "; " + held
		}
	}
	return code, reason
}

func (d *PeerDiagnosis) explain(ts namespace.TargetStatus) (code, reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch ts.State {
	case observer.ChannelFailed, observer.ChannelConflicted, observer.ChannelClosed:
		if ts.SchemaFailed {
			return "", "the schema the hub replicated is not valid: fix it on the hub, then reset this target (POST /v1/targets/" + ts.NamespaceID + "/reset)"
		}
		if f := ts.Failure; f != nil && ts.State == observer.ChannelFailed {
			dir := observer.DirectionSent
			if f.Remote {
				dir = observer.DirectionReceived
			}
			return f.Code, namespaceReason(ts.NamespaceID, f.Code, dir) + "; " + retryWords(ts.NamespaceID, f, d.opts.Clock.Now())
		}
		if p, ok := d.targets[ts.NamespaceID]; ok {
			return p.code, p.reason
		}
	case observer.ChannelTargeted, observer.ChannelDisconnected:
		if d.connProblem != "" {
			return "", "waiting for the connection to the hub: " + d.connProblem
		}
	}
	return "", ""
}

// dialFix says what to do about a dial that did not reach the hub's replication endpoint.
func dialFix(err error) string {
	var unknownCA x509.UnknownAuthorityError
	var wrongHost x509.HostnameError
	var invalid x509.CertificateInvalidError
	var notTLS tls.RecordHeaderError
	switch {
	case errors.As(err, &unknownCA):
		return "the hub's TLS certificate is not signed by a CA this peer trusts: give --hub-ca FILE with the CA certificate that signed it (PEM)"
	case errors.As(err, &wrongHost):
		return "the hub's TLS certificate is not made for the host in --hub-url: use the name or address the certificate names, or have the hub's certificate reissued for this one"
	case errors.As(err, &invalid):
		return "the hub's TLS certificate is not valid (expired or not for a server): the hub's operator must renew it (hub --tls-cert, reloaded on SIGHUP)"
	case errors.As(err, &notTLS) || strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return "the hub does not speak TLS on that port: use ws:// in --hub-url, or start the hub with --tls-cert and --tls-key"
	}
	return "check that the hub runs and that --hub-url names its --listen address"
}
