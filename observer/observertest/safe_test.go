package observertest_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	o "github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/observer/observertest"
)

// Sentinels a replication test would inject: a bearer token, an owner, schema
// text and the text of an internal error.
var sentinels = []string{"tok_9f8e7d6c5b4a", "owner-alice", `"definition":{"tools"`, "disk quota exceeded"}

// fakeTB records failures instead of failing the real test.
type fakeTB struct {
	testing.TB
	errs []string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Errorf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

func TestS23_3_SamplesAreSafe(t *testing.T) {
	var rec observertest.Recorder
	for _, s := range observertest.Samples() {
		rec.Observe(s.Full)
		rec.Observe(s.Minimal)
	}
	rec.AssertSafe(t, sentinels...)
	rec.AssertValid(t)
	if len(rec.Events()) != 72 {
		t.Fatalf("recorded %d events", len(rec.Events()))
	}
}

// TestS23_3_AssertSafeCatchesEachKind proves the scan fails on every kind of
// unsafe content docs/protocol.md#safe-fields forbids.
func TestS23_3_AssertSafeCatchesEachKind(t *testing.T) {
	token, owner, schema, errText := sentinels[0], sentinels[1], sentinels[2], sentinels[3]
	for _, c := range []struct {
		name string
		ev   o.Event
		want string // a substring of the reported problem
	}{
		{"token as connectionId", o.Event{Side: o.SideHub, Payload: o.SendPaused{ConnectionID: o.Some(token)}}, "sentinel"},
		{"owner in a namespace field", o.Event{Side: o.SidePeer, Payload: o.UpdateSent{NamespaceID: owner, Sequence: 1}}, "sentinel"},
		{"schema text as a code", o.Event{Side: o.SidePeer, Payload: o.SchemaRearmFailed{NamespaceID: observertest.SampleNamespaceID,
			Code: o.SchemaRearmCode(schema)}}, "sentinel"},
		{"error text as a cause", o.Event{Side: o.SidePeer, Payload: o.NamespaceFailed{NamespaceID: observertest.SampleNamespaceID,
			Cause: o.FailedCause(errText)}}, "sentinel"},
		{"free text in a literal field", o.Event{Side: o.SidePeer, Payload: o.ConnectionFailed{Code: "connection reset by peer", WSCloseCode: 1006}},
			"free text"},
		{"free text as updatedAt", o.Event{Side: o.SidePeer, Payload: o.SchemaRearmApplied{NamespaceID: observertest.SampleNamespaceID,
			SemanticFingerprint: observertest.SampleFingerprint, UpdatedAt: o.Some("set by bob")}}, "free text"},
		{"unknown vocabulary value", o.Event{Side: o.SidePeer, Payload: o.IdentityConflicted{NamespaceID: observertest.SampleNamespaceID,
			Via: "gut-feeling"}}, "closed vocabulary"},
	} {
		var rec observertest.Recorder
		rec.Observe(c.ev)
		tb := &fakeTB{}
		rec.AssertSafe(tb, sentinels...)
		if !strings.Contains(strings.Join(tb.errs, "\n"), c.want) {
			t.Errorf("%s: AssertSafe reported %q, want a problem mentioning %q", c.name, tb.errs, c.want)
		}
	}
}

type withBytes struct {
	Name  string
	Bytes []byte
}

type withArray struct{ Token [32]byte }

type hidden struct {
	meta any
	err  error
}

func TestS23_3_ScanCatchesBytesErrorsAndNonData(t *testing.T) {
	for _, c := range []struct {
		name string
		v    any
		want string
	}{
		{"byte slice field", withBytes{Name: "x", Bytes: []byte{1, 2}}, "event.Bytes: byte payload"},
		{"byte array field", withArray{}, "event.Token: byte payload"},
		{"bytes inside an interface", []any{"ok", []byte("yjs")}, "event[1]: byte payload"},
		{"error field", hidden{err: errors.New("boom")}, "event.err: error value"},
		{"error inside an unexported interface", hidden{meta: fmt.Errorf("wrapped: %w", errors.New("x"))}, "event.meta: error value"},
		{"sentinel in a map value", map[string]string{"k": "owner-alice"}, "contains sentinel"},
		{"sentinel behind a pointer", &withBytes{Name: "tok_9f8e7d6c5b4a"}, "event.Name: contains sentinel"},
		{"func value", struct{ F func() }{F: func() {}}, "non-data value of kind func"},
		{"channel", struct{ C chan int }{C: make(chan int)}, "non-data value of kind chan"},
	} {
		got := strings.Join(observertest.Scan(c.v, sentinels...), "\n")
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: Scan = %q, want %q", c.name, got, c.want)
		}
	}
	type node struct {
		Next *node
		S    string
	}
	cyclic := &node{S: "fine"}
	cyclic.Next = cyclic
	if p := observertest.Scan(cyclic, sentinels...); len(p) != 0 {
		t.Errorf("a safe cyclic value reported %v", p)
	}
	if p := observertest.Scan(observertest.Samples()[8].Full, sentinels...); len(p) != 0 {
		t.Errorf("a safe event reported %v", p)
	}
}

func TestRecorderQueriesAndConcurrency(t *testing.T) {
	var rec observertest.Recorder
	em := o.NewEmitter(o.SideHub, &rec, nil)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				em.Emit(o.SendPaused{BufferedAmount: 1})
				em.Emit(o.SendResumed{BufferedAmount: 0})
				_ = rec.Events()
			}
		})
	}
	wg.Wait()
	if rec.Count(o.TypeSendPaused) != 200 || len(rec.OfType(o.TypeSendResumed)) != 200 {
		t.Errorf("counts %d/%d, want 200/200", rec.Count(o.TypeSendPaused), rec.Count(o.TypeSendResumed))
	}
	rec.Reset()
	if len(rec.Events()) != 0 {
		t.Error("Reset left events behind")
	}
	tb := &fakeTB{}
	rec.Observe(o.Event{Side: o.SidePeer, Payload: o.BootstrapSnapshotSent{NamespaceID: observertest.SampleNamespaceID}})
	rec.AssertValid(tb)
	if len(tb.errs) != 1 || !strings.Contains(tb.errs[0], "side") {
		t.Errorf("AssertValid reported %q, want one side violation", tb.errs)
	}
}
