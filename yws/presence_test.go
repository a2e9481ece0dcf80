package yws

import (
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// recordingPresence is a Presence that records what the rooms publish and lets the test
// play another node (through the RemoteStates the room gave).
type recordingPresence struct {
	mu        sync.Mutex // guards the fields below
	remote    RemoteStates
	joined    []string
	published []AwarenessEntry
	closed    int
}

func (p *recordingPresence) Join(_, ns string, remote RemoteStates) PresenceLink {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.remote = remote
	p.joined = append(p.joined, ns)
	return recordingLink{p}
}

type recordingLink struct{ p *recordingPresence }

func (l recordingLink) Publish(entries []AwarenessEntry) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	for _, e := range entries {
		e.State = append([]byte(nil), e.State...)
		l.p.published = append(l.p.published, e)
	}
}

func (l recordingLink) Close() {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	l.p.closed++
}

func (p *recordingPresence) hasPublished(id, clk uint64, state string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.published {
		if e.ClientID == id && e.Clock == clk && string(e.State) == state {
			return true
		}
	}
	return false
}

func (p *recordingPresence) remoteStates() RemoteStates {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.remote
}

// The room's Presence seam: the first editor joins it; local changes (and the removals when
// an editor closes) are published, another node's states are not published back; another
// node's states reach the editors, greet a newcomer, count against the namespace's bound
// and go when that node leaves; the last editor leaving closes the link.
func TestPresence_RoomSeam(t *testing.T) {
	p := &recordingPresence{}
	e := newEnv(t, func(o *Options) { o.Presence = p; o.MaxAwarenessStates = 3 })
	a := e.dial("writer")
	a.sync()
	rs := p.remoteStates()
	if rs == nil {
		t.Fatal("the room did not join its Presence")
	}
	a.write(AppendAwareness(nil, AppendAwarenessUpdate(nil, []AwarenessEntry{{ClientID: 1, Clock: 1, State: []byte(`{"user":{"name":"ada"}}`)}})))
	deadline := time.Now().Add(10 * time.Second)
	for !p.hasPublished(1, 1, `{"user":{"name":"ada"}}`) {
		if time.Now().After(deadline) {
			t.Fatal("the local change was not published")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if len(rs.Local()) != 1 {
		t.Fatalf("local states %v", rs.Local())
	}

	// Another node's editors: relayed to a, not published back, bounded by the namespace.
	dropped := rs.Apply(Origin{Node: "n2", Link: "1"}, []AwarenessEntry{
		{ClientID: 2, Clock: 4, State: []byte(`{"user":{"name":"bea"}}`)},
		{ClientID: 3, Clock: 1, State: []byte(`{"user":{"name":"cyd"}}`)},
		{ClientID: 4, Clock: 1, State: []byte(`{"user":{"name":"dee"}}`)}, // over the three states
	})
	if dropped != 1 {
		t.Fatalf("dropped %d entries beyond the bound, want 1", dropped)
	}
	a.waitFor("the other node's state", func() bool { return hasAwareness(a, 2, 4, `{"user":{"name":"bea"}}`) })
	if p.hasPublished(2, 4, `{"user":{"name":"bea"}}`) {
		t.Fatal("another node's state was published back")
	}
	if got := len(rs.Local()); got != 1 {
		t.Fatalf("local states %d, want 1 (a remote state counted as local)", got)
	}
	// A stale remote clock changes nothing.
	rs.Apply(Origin{Node: "n2", Link: "1"}, []AwarenessEntry{{ClientID: 2, Clock: 3, State: []byte(`{"old":1}`)}})
	b := e.dial("writer")
	b.waitFor("greeting with the other node's state", func() bool { return hasAwareness(b, 2, 4, `{"user":{"name":"bea"}}`) })
	if hasAwareness(b, 2, 3, `{"old":1}`) {
		t.Fatal("a stale remote state was taken")
	}
	present := e.srv.PresentIn(e.ns)
	if len(present) != 3 || present[0].Node != "" || present[0].User != "ada" || present[0].Client != "writer" ||
		present[1].Node != "n2" || present[1].User != "bea" || present[2].User != "cyd" {
		t.Fatalf("present %+v", present)
	}

	// The other node leaves: its states go, announced as removals.
	rs.RemoveOrigin(Origin{Node: "n2", Link: "0"}) // another link of n2: nothing goes
	time.Sleep(20 * time.Millisecond)
	if hasAwareness(a, 2, 5, "null") {
		t.Fatal("the leave of another link of n2 removed this one's states")
	}
	rs.RemoveOrigin(Origin{Node: "n2", Link: "1"})
	a.waitFor("the other node's states removed", func() bool {
		return hasAwareness(a, 2, 5, "null") && hasAwareness(a, 3, 2, "null")
	})
	waitMetric(t, e, "nomicore_client_awareness_states", 1)

	// An editor that closes: its removal is published.
	a.ws.Close(websocket.StatusNormalClosure, "")
	for deadline := time.Now().Add(10 * time.Second); !p.hasPublished(1, 2, "null"); {
		if time.Now().After(deadline) {
			t.Fatal("the removal of a closed editor's state was not published")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Another node's state held when the last editor leaves goes with the room.
	rs.Apply(Origin{Node: "n3", Link: "1"}, []AwarenessEntry{{ClientID: 7, Clock: 1, State: []byte(`{"user":{"name":"eve"}}`)}})
	b.waitFor("n3's state", func() bool { return hasAwareness(b, 7, 1, `{"user":{"name":"eve"}}`) })
	b.ws.Close(websocket.StatusNormalClosure, "")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if closed == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the link was not closed after the last editor left")
		}
	}
	waitMetric(t, e, "nomicore_client_awareness_states", 0)
	if rs.Apply(Origin{Node: "n3", Link: "1"}, []AwarenessEntry{{ClientID: 8, Clock: 1, State: []byte(`{}`)}}); e.metric("nomicore_client_awareness_states") != 0 {
		t.Fatal("a closed room took another node's state")
	}
}
