package observer_test

import (
	"encoding/json"
	"testing"

	o "github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/observer/observertest"
)

// FuzzFoldAndRender feeds arbitrary strings to the folds and into event fields:
// folds always land in their unions (docs/protocol.md#event-codes), rendering never panics and
// always yields valid JSON that round-trips the strings, and the safe-field check never
// accepts an event whose identifiers and literals are the same arbitrary string.
func FuzzFoldAndRender(f *testing.F) {
	for _, s := range []string{"", "INTERNAL_ERROR", "SERVER_RESTARTING", "ns-0123456789abcdef0123456789abcdef",
		"sent", "\x00\xff\"\\", "connection reset by peer", "日本語"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !o.FoldConnectionCode(s).Valid() || !o.FoldNamespaceCode(s).Valid() || !o.FoldGoAwayReason(s).Valid() {
			t.Fatalf("a fold of %q left its union", s)
		}
		ev := o.Event{Side: o.SidePeer, Payload: o.NamespaceError{ConnectionID: o.Some(s), NamespaceID: s,
			Code: o.NamespaceCode(s), Direction: o.Direction(s), TerminalState: o.ClampTerminalState(s)}}
		js, err := ev.MarshalJSON()
		if err != nil || !json.Valid(js) {
			t.Fatalf("rendering %q: %v %s", s, err, js)
		}
		var back map[string]any
		if err := json.Unmarshal(js, &back); err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		wantJS, _ := json.Marshal(map[string]any{"connectionId": s})
		json.Unmarshal(wantJS, &want) // encoding/json's own view of s (invalid UTF-8 replaced)
		if back["connectionId"] != want["connectionId"] {
			t.Fatalf("connectionId %q came back as %q", s, back["connectionId"])
		}
		if ev.Validate() == nil || len(observertest.Problems(ev)) == 0 {
			t.Fatalf("an event made of %q passed the safe-field check", s)
		}
	})
}
