package observer_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/observer/observertest"
)

// frozenKeys is the exact key list of each docs/protocol.md#events event type, written by hand
// from the contract's tables (envelope `type` and `side` first): with every optional key and
// conditional group present (full) and with none (min).
var frozenKeys = map[observer.Type]struct{ full, min []string }{
	"connection-state-changed":     {k("connectionId from to"), k("from to")},
	"connection-backoff-scheduled": {k("attempt delayMs reason"), k("attempt delayMs reason")},
	"goaway-received":              {k("connectionId reasonCode drainTimeoutMs retryAfterMs"), k("reasonCode drainTimeoutMs")},
	"event-loop-delay-sampled":     {k("connectionId delayMs"), k("delayMs")},
	"channel-state-changed":        {k("connectionId namespaceId from to"), k("namespaceId from to")},
	"bootstrap-snapshot-sent":      {k("connectionId namespaceId bytes"), k("namespaceId bytes")},
	"bootstrap-imported":           {k("connectionId namespaceId bytes"), k("namespaceId bytes")},
	"sync-step2-sent": {k("connectionId namespaceId bytes syncRoundId encodedUpdateBytes"),
		k("namespaceId bytes syncRoundId encodedUpdateBytes")},
	"sync-diff-applied": {k("connectionId namespaceId bytes applyLatencyMs syncRoundId encodedUpdateBytes " +
		"stateVectorChanged applyEffect stateVectorBeforeHash stateVectorAfterHash sequence " +
		"queueWaitMs protectedCheckMs liveApplyMs dirtyNotifyMs"),
		k("namespaceId bytes syncRoundId encodedUpdateBytes sequence")},
	"update-sent": {k("connectionId namespaceId bytes sequence sendQueueMs"), k("namespaceId bytes sequence")},
	"update-applied": {k("connectionId namespaceId bytes applyLatencyMs sequence " +
		"queueWaitMs protectedCheckMs liveApplyMs dirtyNotifyMs"), k("namespaceId bytes sequence")},
	"update-acked":             {k("connectionId namespaceId bytes ackLatencyMs sequence"), k("namespaceId bytes sequence")},
	"degraded-bypass-applied":  {k("connectionId namespaceId bytes sequence"), k("namespaceId bytes sequence")},
	"chunked-update-sent":      {k("connectionId namespaceId transferId chunkCount totalBytes"), k("namespaceId transferId chunkCount totalBytes")},
	"chunked-update-applied":   {k("connectionId namespaceId bytes chunkCount applyLatencyMs"), k("namespaceId bytes chunkCount")},
	"chunked-update-acked":     {k("connectionId namespaceId bytes ackLatencyMs"), k("namespaceId bytes")},
	"chunked-snapshot-sent":    {k("connectionId namespaceId transferId chunkCount totalBytes"), k("namespaceId transferId chunkCount totalBytes")},
	"chunked-snapshot-applied": {k("connectionId namespaceId bytes chunkCount applyLatencyMs"), k("namespaceId bytes chunkCount")},
	"chunked-snapshot-acked":   {k("connectionId namespaceId bytes ackLatencyMs"), k("namespaceId bytes")},
	"chunked-sync-sent": {k("connectionId namespaceId transferId chunkCount totalBytes syncRoundId"),
		k("namespaceId transferId chunkCount totalBytes syncRoundId")},
	"chunked-sync-applied": {k("connectionId namespaceId bytes chunkCount syncRoundId applyLatencyMs"),
		k("namespaceId bytes chunkCount syncRoundId")},
	"chunked-sync-acked":    {k("connectionId namespaceId bytes ackLatencyMs"), k("namespaceId bytes")},
	"auth-upgrade-rejected": {k("reason"), k("reason")},
	"resync-required": {k("connectionId namespaceId cause reason updateBytes maxUpdateBytes queuedUpdateCount " +
		"queuedUpdateBytes inFlightCount channelState connectionState bufferedAmount"), k("namespaceId cause")},
	"update-dropped": {k("connectionId namespaceId reason updateBytes maxUpdateBytes queuedUpdateCount " +
		"queuedUpdateBytes inFlightCount channelState connectionState bufferedAmount"),
		k("namespaceId reason updateBytes maxUpdateBytes queuedUpdateCount queuedUpdateBytes inFlightCount " +
			"channelState connectionState")},
	"send-paused":              {k("connectionId bufferedAmount"), k("bufferedAmount")},
	"send-resumed":             {k("connectionId bufferedAmount"), k("bufferedAmount")},
	"connection-failed":        {k("connectionId code wsCloseCode"), k("code wsCloseCode")},
	"namespace-error":          {k("connectionId namespaceId code direction terminalState"), k("namespaceId code direction")},
	"namespace-failed":         {k("connectionId namespaceId cause timeoutMs"), k("namespaceId cause")},
	"identity-conflicted":      {k("connectionId namespaceId via"), k("namespaceId via")},
	"chunked-update-aborted":   {k("namespaceId transferId reason receivedChunks receivedBytes"), k("namespaceId transferId reason receivedChunks receivedBytes")},
	"chunked-snapshot-aborted": {k("namespaceId transferId reason receivedChunks receivedBytes"), k("namespaceId transferId reason receivedChunks receivedBytes")},
	"chunked-sync-aborted":     {k("namespaceId transferId reason receivedChunks receivedBytes"), k("namespaceId transferId reason receivedChunks receivedBytes")},
	// updatedAt is never absent: it renders null when unknown (docs/protocol.md#events "诚实缺席为
	// null").
	"schema-rearm-applied": {k("connectionId namespaceId semanticFingerprint updatedAt"), k("namespaceId semanticFingerprint updatedAt")},
	"schema-rearm-failed":  {k("connectionId namespaceId code"), k("namespaceId code")},
}

func k(s string) []string { return append([]string{"type", "side"}, strings.Fields(s)...) }

func TestS23_1_ThirtySixTypes(t *testing.T) {
	types := observer.Types()
	if len(types) != 36 || len(frozenKeys) != 36 {
		t.Fatalf("Types() has %d entries and the frozen table %d; docs/protocol.md#events has 36", len(types), len(frozenKeys))
	}
	for _, typ := range types {
		if _, ok := frozenKeys[typ]; !ok {
			t.Errorf("type %q is not in the frozen key table", typ)
		}
	}
	samples := observertest.Samples()
	if len(samples) != 36 {
		t.Fatalf("Samples() covers %d types, want 36", len(samples))
	}
	for i, s := range samples {
		if s.Type != types[i] || s.Full.Type() != s.Type || s.Minimal.Type() != s.Type {
			t.Errorf("sample %d is %s/%s/%s, want %s", i, s.Type, s.Full.Type(), s.Minimal.Type(), types[i])
		}
	}
}

// TestS23_7_KeySetFreeze asserts the exact, ordered key list of every event type
// with all optionals set and with none set, in both renderings (Attrs and JSON).
func TestS23_7_KeySetFreeze(t *testing.T) {
	for _, s := range observertest.Samples() {
		want := frozenKeys[s.Type]
		for _, c := range []struct {
			name string
			ev   observer.Event
			keys []string
		}{{"full", s.Full, want.full}, {"minimal", s.Minimal, want.min}} {
			if got := c.ev.Keys(); !slices.Equal(got, c.keys) {
				t.Errorf("%s %s: Attrs keys\n got %v\nwant %v", s.Type, c.name, got, c.keys)
			}
			if got := jsonKeys(t, c.ev); !slices.Equal(got, c.keys) {
				t.Errorf("%s %s: JSON keys\n got %v\nwant %v", s.Type, c.name, got, c.keys)
			}
			if err := c.ev.Validate(); err != nil {
				t.Errorf("%s %s: sample does not validate: %v", s.Type, c.name, err)
			}
		}
	}
}

// jsonKeys returns the top-level keys of the event's JSON in order, checking the
// envelope values on the way.
func jsonKeys(t *testing.T, e observer.Event) []string {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatalf("%s: marshal: %v", e.Type(), err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: rendered invalid JSON %s: %v", e.Type(), b, err)
	}
	if m["type"] != string(e.Type()) || m["side"] != string(e.Side) {
		t.Errorf("%s: envelope rendered as type=%v side=%v", e.Type(), m["type"], m["side"])
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var keys []string
	if _, err := dec.Token(); err != nil { // {
		t.Fatal(err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}
