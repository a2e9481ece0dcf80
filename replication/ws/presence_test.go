package ws

import (
	"bytes"
	"testing"

	"github.com/nomicore/nomicore/replication/protocol"
)

// The presence lane keeps the latest state of each editor (an older one waiting is dropped
// and counted), is bounded per namespace and per connection, and takes nothing on a
// connection that did not negotiate the extension.
func TestPresenceLane_LatestPerEditorAndBounds(t *testing.T) {
	nsA := protocol.MustNamespaceID("ns-0123456789abcdef0123456789abcdef")
	nsB := protocol.MustNamespaceID("ns-fedcba9876543210fedcba9876543210")
	off := &conn{}
	if n := off.queuePresence(nsA, []protocol.AwarenessEntry{{ClientID: 1, Clock: 1, State: []byte(`{}`)}}); n != 1 || len(off.presence.waiting) != 0 {
		t.Fatalf("without CAP_PRESENCE: dropped %d, waiting %v", n, off.presence.waiting)
	}
	c := &conn{negotiated: protocol.Negotiated{Capabilities: protocol.CapChunkedUpdate | protocol.CapPresence}}
	for clk := range uint64(50) {
		if n := c.queuePresence(nsA, []protocol.AwarenessEntry{{ClientID: 7, Clock: clk + 1, State: []byte(`{"n":1}`)}}); n != min(1, int(clk)) {
			t.Fatalf("change %d of one editor: dropped %d", clk, n)
		}
	}
	if q := c.presence.waiting[nsA]; len(q) != 1 || q[7].Clock != 50 {
		t.Fatalf("waiting %v, want the latest of editor 7 only", q)
	}
	var many []protocol.AwarenessEntry
	for id := range uint64(maxPresenceEntriesPerNamespace + 10) {
		many = append(many, protocol.AwarenessEntry{ClientID: 1000 + id, Clock: 1, State: []byte(`{}`)})
	}
	if n := c.queuePresence(nsA, many); n != 11 || len(c.presence.waiting[nsA]) != maxPresenceEntriesPerNamespace {
		t.Fatalf("over the namespace's bound: dropped %d, waiting %d", n, len(c.presence.waiting[nsA]))
	}
	big := bytes.Repeat([]byte("x"), 200<<10)
	dropped := 0
	for id := range uint64(40) { // 40 × 200 KiB: over the connection's 4 MiB
		dropped += c.queuePresence(nsB, []protocol.AwarenessEntry{{ClientID: id, Clock: 1, State: big}})
	}
	if dropped == 0 || c.presence.bytes > maxPresenceBytesPerConnection {
		t.Fatalf("over the connection's bound: dropped %d, waiting %d bytes", dropped, c.presence.bytes)
	}
	c.closing = true
	if n := c.queuePresence(nsA, []protocol.AwarenessEntry{{ClientID: 9, Clock: 1, State: []byte(`{}`)}}); n != 1 {
		t.Fatalf("a closing connection took an entry (dropped %d)", n)
	}
}
