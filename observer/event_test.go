package observer_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	o "github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/observer/observertest"
)

const ns = observertest.SampleNamespaceID

// TestS23_1_JSONRendering pins the exact JSON of a few events, written by hand.
func TestS23_1_JSONRendering(t *testing.T) {
	for _, c := range []struct {
		ev   o.Event
		want string
	}{
		{o.Event{Side: o.SideHub, Payload: o.UpdateApplied{NamespaceID: ns, Bytes: 31, Sequence: 9}},
			`{"type":"update-applied","side":"hub","namespaceId":"` + ns + `","bytes":31,"sequence":9}`},
		{o.Event{Side: o.SidePeer, Payload: o.UpdateApplied{ConnectionID: o.Some("c-1"), NamespaceID: ns, Bytes: 31,
			ApplyLatencyMs: o.Some(2.5), Sequence: 9, Stages: o.Some(o.Stages{QueueWaitMs: 0.5, ProtectedCheckMs: 1, LiveApplyMs: 0.75, DirtyNotifyMs: 0.25})}},
			`{"type":"update-applied","side":"peer","connectionId":"c-1","namespaceId":"` + ns + `","bytes":31,` +
				`"applyLatencyMs":2.5,"sequence":9,"queueWaitMs":0.5,"protectedCheckMs":1,"liveApplyMs":0.75,"dirtyNotifyMs":0.25}`},
		{o.Event{Side: o.SideHub, Payload: o.SyncDiffApplied{NamespaceID: ns, Bytes: 2, SyncRoundID: 3, Sequence: 4,
			Effect: o.Some(o.NewSVEffect([]byte("a"), []byte("a")))}},
			`{"type":"sync-diff-applied","side":"hub","namespaceId":"` + ns + `","bytes":2,"syncRoundId":3,` +
				`"encodedUpdateBytes":2,"stateVectorChanged":false,"applyEffect":"noop",` +
				`"stateVectorBeforeHash":"e40c292ce40c292c","stateVectorAfterHash":"e40c292ce40c292c","sequence":4}`},
		{o.Event{Side: o.SidePeer, Payload: o.SchemaRearmApplied{NamespaceID: ns, SemanticFingerprint: observertest.SampleFingerprint,
			UpdatedAt: o.SchemaUpdatedAt("not a timestamp")}},
			`{"type":"schema-rearm-applied","side":"peer","namespaceId":"` + ns + `","semanticFingerprint":"` +
				observertest.SampleFingerprint + `","updatedAt":null}`},
		{o.Event{Side: o.SideHub, Payload: o.AuthUpgradeRejected{Reason: o.AuthTimeout}},
			`{"type":"auth-upgrade-rejected","side":"hub","reason":"auth-timeout"}`},
		{o.Event{Side: o.SidePeer, Payload: o.GoAwayReceived{ReasonCode: o.FoldGoAwayReason("MAINTENANCE"), DrainTimeoutMs: 9007199254740991}},
			`{"type":"goaway-received","side":"peer","reasonCode":"other","drainTimeoutMs":9007199254740991}`},
	} {
		got, err := json.Marshal(c.ev)
		if err != nil {
			t.Errorf("%s: %v", c.ev.Type(), err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.ev.Type(), got, c.want)
		}
	}
}

func TestS23_1_JSONRejectsNonFinite(t *testing.T) {
	ev := o.Event{Side: o.SidePeer, Payload: o.EventLoopDelaySampled{DelayMs: math.Inf(1)}}
	if _, err := ev.MarshalJSON(); err == nil {
		t.Error("an infinite delay must not render as JSON")
	}
	if ev.Validate() == nil {
		t.Error("an infinite delay must not validate")
	}
}

func TestS23_1_LogValueIsTheAttrList(t *testing.T) {
	s := observertest.Samples()[8] // sync-diff-applied, full
	group := s.Full.LogValue().Group()
	attrs := s.Full.Attrs()
	if len(group) != len(attrs) {
		t.Fatalf("LogValue has %d attrs, Attrs %d", len(group), len(attrs))
	}
	for i := range attrs {
		if !group[i].Equal(attrs[i]) {
			t.Errorf("attr %d: %v vs %v", i, group[i], attrs[i])
		}
	}
}

// TestS23_1_Validate lists one broken event per rule and the key it must blame.
func TestS23_1_Validate(t *testing.T) {
	sample := o.QueueSample{UpdateBytes: 1, MaxUpdateBytes: 1, ChannelState: o.ChannelNeedsResync, ConnectionState: o.ConnReady}
	for _, c := range []struct {
		name string
		ev   o.Event
		key  string
	}{
		{"unknown side", o.Event{Side: "edge", Payload: o.SendPaused{}}, "side"},
		{"hub-only type on peer", o.Event{Side: o.SidePeer, Payload: o.BootstrapSnapshotSent{NamespaceID: ns}}, "side"},
		{"peer-only type on hub", o.Event{Side: o.SideHub, Payload: o.GoAwayReceived{ReasonCode: o.GoAwayOther}}, "side"},
		{"peer state on hub", o.Event{Side: o.SideHub, Payload: o.ConnectionStateChanged{From: o.ConnConnecting, To: o.ConnReady}}, "from"},
		{"hub state on peer", o.Event{Side: o.SidePeer, Payload: o.ConnectionStateChanged{From: o.ConnReady, To: o.ConnClosed}}, "to"},
		{"peer channel state on hub", o.Event{Side: o.SideHub, Payload: o.ChannelStateChanged{NamespaceID: ns, From: o.ChannelTargeted, To: o.ChannelOpening}}, "from"},
		{"bad namespaceId", o.Event{Side: o.SidePeer, Payload: o.UpdateSent{NamespaceID: "ns-ABC", Sequence: 1}}, "namespaceId"},
		{"free-text connectionId", o.Event{Side: o.SidePeer, Payload: o.SendPaused{ConnectionID: o.Some("socket hang up")}}, "connectionId"},
		{"negative bytes", o.Event{Side: o.SidePeer, Payload: o.UpdateSent{NamespaceID: ns, Bytes: -1, Sequence: 1}}, "bytes"},
		{"sequence zero", o.Event{Side: o.SidePeer, Payload: o.UpdateAcked{NamespaceID: ns}}, "sequence"},
		{"transferId zero", o.Event{Side: o.SidePeer, Payload: o.ChunkedUpdateAborted{NamespaceID: ns, Reason: o.AbortShed}}, "transferId"},
		{"negative latency", o.Event{Side: o.SidePeer, Payload: o.UpdateAcked{NamespaceID: ns, Sequence: 1, AckLatencyMs: o.Some(-1.0)}}, "ackLatencyMs"},
		{"NaN stage", o.Event{Side: o.SidePeer, Payload: o.UpdateApplied{NamespaceID: ns, Sequence: 1, Stages: o.Some(o.Stages{LiveApplyMs: math.NaN()})}}, "liveApplyMs"},
		{"unknown reason", o.Event{Side: o.SidePeer, Payload: o.ConnectionBackoffScheduled{Reason: "because"}}, "reason"},
		{"unfolded goaway code", o.Event{Side: o.SidePeer, Payload: o.GoAwayReceived{ReasonCode: "MAINTENANCE"}}, "reasonCode"},
		{"unfolded connection code", o.Event{Side: o.SidePeer, Payload: o.ConnectionFailed{Code: "ECONNRESET", WSCloseCode: 1006}}, "code"},
		{"bad close code", o.Event{Side: o.SidePeer, Payload: o.ConnectionFailed{Code: o.ConnErrInternalError, WSCloseCode: 0}}, "wsCloseCode"},
		{"unfolded namespace code", o.Event{Side: o.SidePeer, Payload: o.NamespaceError{NamespaceID: ns, Code: "E_BOOM", Direction: o.DirectionSent}}, "code"},
		{"needs-resync terminal", o.Event{Side: o.SidePeer, Payload: o.NamespaceError{NamespaceID: ns, Code: o.NsErrAckTimeout, Direction: o.DirectionSent, TerminalState: o.Some[o.TerminalState]("needs-resync")}}, "terminalState"},
		{"bad direction", o.Event{Side: o.SidePeer, Payload: o.NamespaceError{NamespaceID: ns, Code: o.NsErrAckTimeout, Direction: "inbound"}}, "direction"},
		{"timeoutMs on non-timer cause", o.Event{Side: o.SidePeer, Payload: o.NamespaceFailed{NamespaceID: ns, Cause: o.FailedRemoteError, TimeoutMs: o.Some[uint64](1)}}, "timeoutMs"},
		{"send-failed without group", o.Event{Side: o.SidePeer, Payload: o.ResyncRequired{NamespaceID: ns, Cause: o.ResyncSendFailed}}, "reason"},
		{"group without send-failed", o.Event{Side: o.SidePeer, Payload: o.ResyncRequired{NamespaceID: ns, Cause: o.ResyncAckTimeout,
			SendFailure: o.Some(o.SendFailure{Reason: o.SendFrameRejected, QueueSample: sample})}}, "reason"},
		{"resync channelState not needs-resync", o.Event{Side: o.SidePeer, Payload: o.ResyncRequired{NamespaceID: ns, Cause: o.ResyncSendFailed,
			SendFailure: o.Some(o.SendFailure{Reason: o.SendFrameRejected, QueueSample: o.QueueSample{ChannelState: o.ChannelLive, ConnectionState: o.ConnReady}})}}, "channelState"},
		{"dropped channelState not live", o.Event{Side: o.SidePeer, Payload: o.UpdateDropped{NamespaceID: ns, Reason: o.DropUpdateTooLarge, QueueSample: sample}}, "channelState"},
		{"hub connectionState on peer", o.Event{Side: o.SidePeer, Payload: o.UpdateDropped{NamespaceID: ns, Reason: o.DropUpdateTooLarge,
			QueueSample: o.QueueSample{ChannelState: o.ChannelLive, ConnectionState: o.ConnClosed}}}, "connectionState"},
		{"negative bufferedAmount", o.Event{Side: o.SidePeer, Payload: o.UpdateDropped{NamespaceID: ns, Reason: o.DropUpdateTooLarge,
			QueueSample: o.QueueSample{ChannelState: o.ChannelLive, ConnectionState: o.ConnReady, BufferedAmount: o.Some(-5)}}}, "bufferedAmount"},
		{"hand-made effect group", o.Event{Side: o.SidePeer, Payload: o.SyncDiffApplied{NamespaceID: ns, Sequence: 1, Effect: o.Some(o.SVEffect{})}}, "stateVectorBeforeHash"},
		{"bad fingerprint", o.Event{Side: o.SidePeer, Payload: o.SchemaRearmApplied{NamespaceID: ns, SemanticFingerprint: "sha256:v2:00"}}, "semanticFingerprint"},
		{"free-text updatedAt", o.Event{Side: o.SidePeer, Payload: o.SchemaRearmApplied{NamespaceID: ns,
			SemanticFingerprint: observertest.SampleFingerprint, UpdatedAt: o.Some("yesterday")}}, "updatedAt"},
		{"schema code in namespace domain", o.Event{Side: o.SidePeer, Payload: o.SchemaRearmFailed{NamespaceID: ns, Code: "INTERNAL_ERROR"}}, "code"},
	} {
		err := c.ev.Validate()
		var inv *o.InvalidEventError
		if !errors.As(err, &inv) {
			t.Errorf("%s: Validate() = %v, want an *InvalidEventError", c.name, err)
			continue
		}
		if inv.Key != c.key || inv.Type != c.ev.Type() || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s: blamed %s.%s (%v), want key %s", c.name, inv.Type, inv.Key, err, c.key)
		}
	}
	if err := (o.Event{Side: o.SidePeer}).Validate(); err == nil {
		t.Error("an event without payload must not validate")
	}
}

func TestS23_3_SchemaUpdatedAt(t *testing.T) {
	for in, present := range map[string]bool{
		"2025-01-02T03:04:05.678Z":  true,
		"2025-01-02T03:04:05+08:00": true,
		"":                          false,
		"yesterday":                 false,
		"2025-01-02 03:04:05":       false,
		strings.Repeat("1", 41):     false,
	} {
		if got := o.SchemaUpdatedAt(in); got.Present() != present || (present && got.Or("") != in) {
			t.Errorf("SchemaUpdatedAt(%q) = %v, want present=%v", in, got, present)
		}
	}
}

func TestOpt(t *testing.T) {
	var zero o.Opt[int]
	if zero.Present() || zero.Or(7) != 7 || zero != o.None[int]() {
		t.Error("the zero Opt must be absent")
	}
	if v, ok := o.Some(0).Get(); !ok || v != 0 {
		t.Error("Some(0) must be present with 0")
	}
}
