package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"log/slog"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
	"github.com/nomicore/nomicore/replication/ws"
	"github.com/nomicore/nomicore/replication/ws/wstest"
)

type jsonLines struct {
	mu    sync.Mutex
	lines []map[string]any
}

func (j *jsonLines) Write(b []byte) (int, error) {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return 0, err
	}
	j.mu.Lock()
	j.lines = append(j.lines, m)
	j.mu.Unlock()
	return len(b), nil
}

func (j *jsonLines) take() []map[string]any {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := j.lines
	j.lines = nil
	return out
}

// fakeDialer answers each Dial with the next error of errs.
type fakeDialer struct{ errs []error }

func (f *fakeDialer) Dial(context.Context, string, http.Header) (ws.Transport, error) {
	err := f.errs[0]
	f.errs = f.errs[1:]
	return nil, err
}

const hubURL = "ws://127.0.0.1:9/v1/replication"

// Dial failures: a WARN with the address and the error at once, then at most one per
// DialWarnEvery counting the failures in between; the recovery at INFO; the problem for
// /readyz meanwhile.
func TestDiagnosisDialFailuresAreRateLimited(t *testing.T) {
	var logs jsonLines
	clk := clock.NewFake(time.Unix(1000, 0))
	d := NewPeerDiagnosis(PeerDiagnosisOptions{TokenSource: "the token file t", Clock: clk, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	refused := errors.New("dial tcp 127.0.0.1:9: connect: connection refused")
	fd := &fakeDialer{errs: []error{refused, refused, refused, refused, nil}}
	dialer := d.Dialer(fd)
	dial := func() { dialer.Dial(context.Background(), hubURL, nil) }
	dial()
	if got := logs.take(); len(got) != 1 || got[0]["level"] != "WARN" || got[0]["hubUrl"] != hubURL || got[0]["error"] != refused.Error() || got[0]["failedDials"] != 1.0 {
		t.Fatalf("first failure: %v", got)
	}
	if p := d.ConnectionProblem(); !strings.Contains(p, "cannot reach the hub at "+hubURL) || !strings.Contains(p, "connection refused") {
		t.Fatalf("problem %q", p)
	}
	dial()
	dial()
	if got := logs.take(); len(got) != 0 {
		t.Fatalf("repeated within %v: %v", DialWarnEvery, got)
	}
	clk.Advance(DialWarnEvery)
	dial()
	if got := logs.take(); len(got) != 1 || got[0]["failedDials"] != 3.0 {
		t.Fatalf("after %v: %v", DialWarnEvery, got)
	}
	dial() // succeeds
	if got := logs.take(); len(got) != 1 || got[0]["level"] != "INFO" || got[0]["msg"] != "reached the hub again" {
		t.Fatalf("recovery: %v", got)
	}
	if p := d.ConnectionProblem(); p != "" {
		t.Fatalf("problem after a successful dial: %q", p)
	}
}

// A hub whose TLS certificate the peer does not trust: the problem /readyz and the waiting
// targets give names the error and the flag that fixes it, as the log line does.
func TestDiagnosisUntrustedHubNamesHubCA(t *testing.T) {
	var logs jsonLines
	d := NewPeerDiagnosis(PeerDiagnosisOptions{TokenSource: "the token file t", Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	untrusted := fmt.Errorf("failed to WebSocket dial: %w", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}})
	d.Dialer(&fakeDialer{errs: []error{untrusted}}).Dial(context.Background(), "wss://hub.example:8787/v1/replication", nil)
	if got := logs.take(); len(got) != 1 || !strings.Contains(fmt.Sprint(got[0]["fix"]), "--hub-ca") {
		t.Fatalf("log: %v", got)
	}
	problem := d.ConnectionProblem()
	if !strings.Contains(problem, "unknown authority") || !strings.Contains(problem, "give --hub-ca FILE") {
		t.Fatalf("problem %q", problem)
	}
	_, reason := d.ExplainTarget(namespace.TargetStatus{Target: namespace.Target{NamespaceID: "ns-0123456789abcdef0123456789abcdef"}, State: observer.ChannelTargeted})
	if !strings.Contains(reason, "give --hub-ca FILE") {
		t.Fatalf("target reason %q", reason)
	}
}

// A refusal that waiting will not heal is one ERROR line naming the cause and the fix, and
// the reason /readyz and waiting targets give.
func TestDiagnosisRefusalsNameCauseAndFix(t *testing.T) {
	for _, tc := range []struct {
		status     int
		cause, fix string
	}{
		{401, "refused this peer's token (HTTP 401)", "hub token add --data DIR --peer peer-a (DIR: the hub's data directory"},
		{403, "does not let it replicate (HTTP 403)", "hub token list --data DIR"},
		{404, "no replication endpoint at " + hubURL + " (HTTP 404)", "/v1/replication"},
	} {
		var logs jsonLines
		d := NewPeerDiagnosis(PeerDiagnosisOptions{TokenSource: "the token file t", InstanceID: "peer-a", Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
		d.Dialer(&fakeDialer{errs: []error{&ws.DialError{StatusCode: tc.status, Err: errors.New("x")}}}).Dial(context.Background(), hubURL, nil)
		got := logs.take()
		if len(got) != 1 || got[0]["level"] != "ERROR" || !strings.Contains(got[0]["cause"].(string), tc.cause) || !strings.Contains(got[0]["fix"].(string), tc.fix) {
			t.Errorf("%d: %v", tc.status, got)
		}
		if p := d.ConnectionProblem(); !strings.Contains(p, tc.cause) || !strings.Contains(p, tc.fix) {
			t.Errorf("%d: problem %q", tc.status, p)
		}
		_, reason := d.ExplainTarget(namespace.TargetStatus{Target: namespace.Target{NamespaceID: "ns-x"}, State: observer.ChannelTargeted})
		if !strings.HasPrefix(reason, "waiting for the connection to the hub: ") || !strings.Contains(reason, tc.cause) {
			t.Errorf("%d: target reason %q", tc.status, reason)
		}
	}
	// Another peer's token: the connection fails with INSTANCE_IDENTITY_MISMATCH.
	var logs jsonLines
	d := NewPeerDiagnosis(PeerDiagnosisOptions{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	d.Observe(observer.Event{Side: observer.SidePeer, Payload: observer.ConnectionFailed{Code: observer.ConnErrPongTimeout, WSCloseCode: 1006}})
	if got := logs.take(); len(got) != 0 {
		t.Fatalf("a transient failure logged: %v", got)
	}
	d.Observe(observer.Event{Side: observer.SidePeer, Payload: observer.ConnectionFailed{Code: observer.ConnErrInstanceIdentityMismatch, WSCloseCode: 1008}})
	got := logs.take()
	if len(got) != 1 || got[0]["level"] != "ERROR" || !strings.Contains(got[0]["fix"].(string), "made for another peer") {
		t.Fatalf("identity mismatch: %v", got)
	}
	d.Observe(observer.Event{Side: observer.SidePeer, Payload: observer.ConnectionStateChanged{From: observer.ConnHandshaking, To: observer.ConnReady}})
	if p := d.ConnectionProblem(); p != "" {
		t.Fatalf("problem once ready: %q", p)
	}
}

// A target the hub refused shows the code and what to do; it clears when the target is live.
func TestDiagnosisExplainsFailedTargets(t *testing.T) {
	d := NewPeerDiagnosis(PeerDiagnosisOptions{})
	const ns = "ns-0123456789abcdef0123456789abcdef"
	failed := namespace.TargetStatus{Target: namespace.Target{NamespaceID: ns}, State: observer.ChannelFailed}
	if code, reason := d.ExplainTarget(failed); code != "" || reason != "" {
		t.Fatalf("nothing known yet: %q %q", code, reason)
	}
	d.Observe(observer.Event{Side: observer.SidePeer, Payload: observer.NamespaceError{NamespaceID: ns, Code: observer.NsErrNamespaceNotFound,
		Direction: observer.DirectionReceived, TerminalState: observer.Some(observer.TerminalFailed)}})
	d.Observe(observer.Event{Side: observer.SidePeer, Payload: observer.NamespaceFailed{NamespaceID: ns, Cause: observer.FailedRemoteError}})
	code, reason := d.ExplainTarget(failed)
	if code != "NAMESPACE_NOT_FOUND" || !strings.Contains(reason, "the hub has no namespace "+ns) || !strings.Contains(reason, "DELETE /v1/targets/"+ns) {
		t.Fatalf("not found: %q %q", code, reason)
	}
	if code, _ := d.ExplainTarget(namespace.TargetStatus{Target: namespace.Target{NamespaceID: ns}, State: observer.ChannelLive}); code != "" {
		t.Fatalf("a live target explained: %q", code)
	}
	d.Observe(observer.Event{Side: observer.SidePeer, Payload: observer.ChannelStateChanged{NamespaceID: ns, From: observer.ChannelReconciling, To: observer.ChannelLive}})
	if code, _ := d.ExplainTarget(failed); code != "" {
		t.Fatalf("kept after the target went live: %q", code)
	}
	d.Observe(observer.Event{Side: observer.SidePeer, Payload: observer.IdentityConflicted{NamespaceID: ns, Via: observer.ViaIdentityChangedFrame}})
	code, reason = d.ExplainTarget(namespace.TargetStatus{Target: namespace.Target{NamespaceID: ns}, State: observer.ChannelConflicted})
	if code != "IDENTITY_CHANGED" || !strings.Contains(reason, "/reset") {
		t.Fatalf("conflicted: %q %q", code, reason)
	}
}

// A target failed on a large document says which flag to raise, or that a side runs v1.
func TestDiagnosisExplainsLargeDocuments(t *testing.T) {
	d := NewPeerDiagnosis(PeerDiagnosisOptions{})
	const ns = "ns-0123456789abcdef0123456789abcdef"
	failed := namespace.TargetStatus{Target: namespace.Target{NamespaceID: ns}, State: observer.ChannelFailed}
	for code, want := range map[observer.NamespaceCode]string{
		observer.NamespaceCode("BOOTSTRAP_TOO_LARGE"):         "--generation v2",
		observer.NamespaceCode("SYNC_DIFF_TOO_LARGE"):         "--generation v2",
		observer.NamespaceCode("SNAPSHOT_TRANSFER_TOO_LARGE"): "--max-chunked-bootstrap-bytes",
		observer.NamespaceCode("SYNC_TRANSFER_TOO_LARGE"):     "--max-chunked-sync-diff-bytes",
	} {
		d.Observe(observer.Event{Side: observer.SidePeer, Payload: observer.NamespaceError{NamespaceID: ns, Code: code,
			Direction: observer.DirectionReceived, TerminalState: observer.Some(observer.TerminalFailed)}})
		got, reason := d.ExplainTarget(failed)
		if got != string(code) || !strings.Contains(reason, want) {
			t.Errorf("%s: %q %q", code, got, reason)
		}
	}
}

// The fatal connection ERROR a hub sends before it closes (another peer's token) reaches
// the diagnosis as the peer's connection-failed event: one ERROR line, however often the
// peer tries again.
func TestDiagnosisHearsTheHubsConnectionError(t *testing.T) {
	var logs jsonLines
	d := NewPeerDiagnosis(PeerDiagnosisOptions{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	cfg := protocol.DefaultConfig()
	dialer := wstest.NewDialer()
	p, err := ws.NewPeer(ws.PeerOptions{Config: cfg, InstanceID: "peer-a", HubInstanceID: "hub", URL: hubURL,
		Token: func() (string, error) { return "t", nil }, Dialer: d.Dialer(dialer), Clock: clock.NewFake(time.Unix(1000, 0)),
		Namespaces: func(seam.Session) seam.Handler { return nil }, Observer: observer.ObserverFunc(d.Observe)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	codec := protocol.NewCodec(cfg.Limits(), 0)
	for range 2 {
		before := dialer.Dials()
		p.Start()
		var hub *wstest.End
		select {
		case dl := <-dialer.Accepted:
			hub = dl.End
		case <-time.After(5 * time.Second):
			t.Fatal("no dial")
		}
		// The hub reads the HELLO (so the peer's write cannot fail first), then refuses.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := hub.Recv(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		em, err := protocol.NewErrorMessage(protocol.ScopeConnection, protocol.CodeInstanceIdentityMismatch, protocol.NamespaceID{}, "")
		if err != nil {
			t.Fatal(err)
		}
		frame, err := codec.AppendFrame(nil, 1, em)
		if err != nil {
			t.Fatal(err)
		}
		if err := hub.Send(frame); err != nil {
			t.Fatal(err)
		}
		hub.Close(protocol.ClosePolicy, "")
		deadline := time.Now().Add(5 * time.Second)
		for p.State() != observer.ConnBlocked || dialer.Dials() == before {
			if time.Now().After(deadline) {
				t.Fatalf("peer %s, want blocked", p.State())
			}
			time.Sleep(time.Millisecond)
		}
	}
	got := logs.take()
	if len(got) != 1 || got[0]["level"] != "ERROR" || got[0]["code"] != "INSTANCE_IDENTITY_MISMATCH" {
		t.Fatalf("lines %v", got)
	}
	if !strings.Contains(d.ConnectionProblem(), "made for another peer") {
		t.Fatalf("problem %q", d.ConnectionProblem())
	}
}

// A failed target's reason says how it recovers, from its recorded failure: when a failure
// that heals by itself is retried, that one a fix needs is retried too, the operator's next
// step when retrying cannot help; and the bytes of local writes it holds.
func TestDiagnosisExplainsRecovery(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	d := NewPeerDiagnosis(PeerDiagnosisOptions{Clock: clk})
	const ns = "ns-0123456789abcdef0123456789abcdef"
	at := clk.Now().Add(30 * time.Second)
	for _, tc := range []struct {
		failure namespace.TargetFailure
		want    []string
	}{
		{namespace.TargetFailure{Code: "PERSISTENCE_DEGRADED", Remote: true, Recovery: namespace.RecoveryAutomatic, Attempts: 3, RetryAt: at},
			[]string{"cannot save changes now", "heals by itself", "2026-01-01T12:00:30Z", "failure 3 in a row"}},
		{namespace.TargetFailure{Code: "INTERNAL_ERROR", Remote: true, Recovery: namespace.RecoveryAutomatic, Attempts: 1, RetryAt: clk.Now()},
			[]string{"the hub ended replication", "on the next connection to the hub"}},
		{namespace.TargetFailure{Code: "SYNC_TRANSFER_TOO_LARGE", Remote: true, Recovery: namespace.RecoveryAfterConfig, Attempts: 1, RetryAt: at},
			[]string{"--max-chunked-sync-diff-bytes", "on every new connection", "succeeds once that is fixed"}},
		{namespace.TargetFailure{Code: "ROLE_VIOLATION", Remote: true, Recovery: namespace.RecoveryNone, Attempts: 1},
			[]string{"not retried by itself", "may only read", "/v1/targets/" + ns + "/reset"}},
		{namespace.TargetFailure{Code: "NAMESPACE_STATE_VIOLATION", Recovery: namespace.RecoveryNone, Attempts: 1},
			[]string{"this peer ended replication", "not retried by itself", "--version"}},
	} {
		f := tc.failure
		code, reason := d.ExplainTarget(namespace.TargetStatus{Target: namespace.Target{NamespaceID: ns}, State: observer.ChannelFailed,
			Failure: &f, UnreplicatedBytes: 42})
		if code != f.Code {
			t.Errorf("%s: code %q", f.Code, code)
		}
		for _, w := range append(tc.want, "42 bytes of local writes not replicated yet") {
			if !strings.Contains(reason, w) {
				t.Errorf("%s: reason %q lacks %q", f.Code, reason, w)
			}
		}
	}
	if _, reason := d.ExplainTarget(namespace.TargetStatus{Target: namespace.Target{NamespaceID: ns}, State: observer.ChannelLive,
		UnreplicatedBytes: 42}); reason != "" {
		t.Errorf("a live target's writes in flight explained: %q", reason)
	}
}
