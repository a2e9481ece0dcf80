package observer_test

import (
	"slices"
	"strings"
	"testing"

	o "github.com/nomicore/nomicore/observer"
)

func words(s string) []string { return strings.Fields(s) }

func asStrings[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// TestS23_1_ClosedVocabularies compares every vocabulary with its list, copied by
// hand from docs/protocol.md#connection-states, docs/protocol.md#namespace-states and
// docs/protocol.md#events.
func TestS23_1_ClosedVocabularies(t *testing.T) {
	for _, c := range []struct {
		name string
		got  []string
		want string
	}{
		{"peer connection states", asStrings(o.ConnectionStates(o.SidePeer)),
			"stopped disconnected connecting handshaking ready draining backoff blocked"},
		{"hub connection states", asStrings(o.ConnectionStates(o.SideHub)), "handshaking ready draining closed"},
		{"peer channel states", asStrings(o.ChannelStates(o.SidePeer)),
			"targeted opening bootstrapping reconciling live needs-resync closing closed conflicted failed disconnected"},
		{"hub channel states", asStrings(o.ChannelStates(o.SideHub)),
			"opening bootstrapping reconciling live needs-resync closing closed conflicted failed"},
		{"backoff reasons", asStrings(o.BackoffReasons()),
			"dial-failed socket-closed hello-timeout pong-timeout connection-backpressure goaway-closed goaway-retry-hint namespace-recovery"},
		{"goaway reason codes", asStrings(o.GoAwayReasons()), "SERVER_RESTARTING SERVER_SHUTTING_DOWN REAUTH_REQUIRED other"},
		{"auth-upgrade-rejected reasons", asStrings(o.AuthRejectReasons()),
			"hub-shutdown missing-token verifier-missing frame-too-large early-frame-limit auth-timeout invalid-credentials invalid-instance-id peer-disconnected hub-busy"},
		{"resync causes", asStrings(o.ResyncCauses()),
			"queue-overflow send-failed connection-shed ack-timeout session-fanout-overflow remote-declared"},
		{"send-failed reasons", asStrings(o.SendFailureReasons()), "update-too-large send-frame-rejected"},
		{"update-dropped reasons", asStrings(o.DropReasons()), "update-too-large"},
		{"namespace-failed causes", asStrings(o.FailedCauses()),
			"open-timeout bootstrap-timeout reconcile-timeout open-failed session-open-failed replication-disabled " +
				"session-missing protocol-violation apply-refused apply-rejected remote-error send-failed internal-error"},
		{"identity-conflicted via", asStrings(o.ConflictVias()), "open-mismatch fence identity-changed-frame"},
		{"chunked abort reasons", asStrings(o.AbortReasons()),
			"timeout shed resync-declared channel-teardown connection-teardown epoch-fence"},
		{"directions", asStrings(o.Directions()), "sent received"},
		{"terminal states", asStrings(o.TerminalStates()), "failed conflicted closed"},
		{"apply effects", asStrings(o.ApplyEffects()), "changed noop"},
		{"schema re-arm codes", asStrings(o.SchemaRearmCodes()),
			"NSRT-FATAL-SCHEMA-REARM-INVALID NSRT-FATAL-SCHEMA-REARM-INTERNAL"},
		{"sides", asStrings(o.Sides()), "hub peer"},
	} {
		if want := words(c.want); !slices.Equal(c.got, want) {
			t.Errorf("%s:\n got %v\nwant %v", c.name, c.got, want)
		}
	}
}

func TestS23_1_VocabularyMembership(t *testing.T) {
	if !o.AbortShed.Valid() || o.AbortReason("Shed").Valid() || o.AbortReason("").Valid() {
		t.Error("AbortReason membership is wrong")
	}
	if !o.ConnClosed.ValidFor(o.SideHub) || o.ConnClosed.ValidFor(o.SidePeer) {
		t.Error("closed is a hub-only connection state")
	}
	if !o.ConnBackoff.ValidFor(o.SidePeer) || o.ConnBackoff.ValidFor(o.SideHub) {
		t.Error("backoff is a peer-only connection state")
	}
	for _, s := range []o.ChannelState{o.ChannelTargeted, o.ChannelDisconnected} {
		if s.ValidFor(o.SideHub) || !s.ValidFor(o.SidePeer) {
			t.Errorf("%s is a peer-only channel state", s)
		}
	}
	if o.ChannelLive.ValidFor("edge") {
		t.Error("an unknown side has no channel states")
	}
	for _, c := range []o.FailedCause{o.FailedOpenTimeout, o.FailedBootstrapTimeout, o.FailedReconcileTimeout} {
		if !c.Timer() {
			t.Errorf("%s is a timer cause", c)
		}
	}
	if o.FailedRemoteError.Timer() {
		t.Error("remote-error is not a timer cause")
	}
}

func TestS23_1_GoAwayFoldsUnknownToOther(t *testing.T) {
	for in, want := range map[string]o.GoAwayReason{
		"SERVER_RESTARTING":                      o.GoAwayServerRestarting,
		"SERVER_SHUTTING_DOWN":                   o.GoAwayServerShuttingDown,
		"REAUTH_REQUIRED":                        o.GoAwayReauthRequired,
		"other":                                  o.GoAwayOther,
		"server_restarting":                      o.GoAwayOther,
		"":                                       o.GoAwayOther,
		"X-ATTACKER-" + strings.Repeat("Z", 200): o.GoAwayOther,
	} {
		if got := o.FoldGoAwayReason(in); got != want {
			t.Errorf("FoldGoAwayReason(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestS23_1_PerFrameAndSides(t *testing.T) {
	perFrame := words("event-loop-delay-sampled sync-step2-sent sync-diff-applied update-sent update-applied " +
		"update-acked degraded-bypass-applied chunked-update-sent chunked-update-applied chunked-update-acked " +
		"chunked-snapshot-sent chunked-snapshot-applied chunked-snapshot-acked chunked-sync-sent " +
		"chunked-sync-applied chunked-sync-acked send-paused send-resumed")
	hubOnly := words("bootstrap-snapshot-sent chunked-snapshot-sent chunked-snapshot-acked auth-upgrade-rejected")
	peerOnly := words("connection-backoff-scheduled goaway-received bootstrap-imported degraded-bypass-applied " +
		"chunked-snapshot-applied schema-rearm-applied schema-rearm-failed")
	for _, typ := range o.Types() {
		if got, want := typ.PerFrame(), slices.Contains(perFrame, string(typ)); got != want {
			t.Errorf("%s.PerFrame() = %v, want %v", typ, got, want)
		}
		wantHub := !slices.Contains(peerOnly, string(typ))
		wantPeer := !slices.Contains(hubOnly, string(typ))
		if typ.EmittedBy(o.SideHub) != wantHub || typ.EmittedBy(o.SidePeer) != wantPeer {
			t.Errorf("%s: hub=%v peer=%v, want hub=%v peer=%v", typ,
				typ.EmittedBy(o.SideHub), typ.EmittedBy(o.SidePeer), wantHub, wantPeer)
		}
	}
	if o.Type("update-merged").Valid() || o.Type("update-sent").EmittedBy("edge") {
		t.Error("unknown types and sides must not validate")
	}
}
