package protocol_test

import (
	"testing"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
)

// docs/protocol.md#event-codes: the observer's code unions are the protocol's registries plus
// the seam's internal codes. The two packages keep their own lists (observer imports nothing
// of ours); this test keeps them equal.
func TestS23_2_ObserverCodeUnionsMatchRegistries(t *testing.T) {
	want := map[string]bool{
		string(protocol.CodePongTimeout):               true,
		string(protocol.CodeOutboundSequenceExhausted): true,
	}
	for _, spec := range protocol.ConnectionErrors() {
		want[string(spec.Code)] = true
	}
	got := map[string]bool{}
	for _, c := range observer.ConnectionCodes() {
		got[string(c)] = true
	}
	compareSets(t, "connection", got, want)

	want = map[string]bool{"IDENTITY_CHANGED": true}
	terminal := map[string]string{}
	for _, spec := range protocol.NamespaceErrors() {
		want[string(spec.Code)] = true
		terminal[string(spec.Code)] = string(spec.Terminal)
	}
	got = map[string]bool{}
	for _, c := range observer.NamespaceCodes() {
		got[string(c)] = true
		if reg, ok := terminal[string(c)]; ok {
			obs := c.TerminalState()
			wantState := reg
			if reg == "needs-resync" { // docs/protocol.md#event-codes: clamped to failed
				wantState = "failed"
			}
			if !obs.Present() || string(obs.Or("")) != wantState {
				t.Errorf("%s: observer terminal state %v, registry %q", c, obs, reg)
			}
		}
	}
	compareSets(t, "namespace", got, want)
}

func compareSets(t *testing.T, what string, got, want map[string]bool) {
	t.Helper()
	for c := range want {
		if !got[c] {
			t.Errorf("%s code %s missing from the observer union", what, c)
		}
	}
	for c := range got {
		if !want[c] {
			t.Errorf("observer %s code %s is not in the registry", what, c)
		}
	}
}
