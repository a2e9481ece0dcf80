package presence

import (
	"testing"
	"time"

	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/yws"
)

// A cluster node's Replication with the cluster's relay upstream: its editors' states reach
// the other node, the other node's reach its room and are not announced back upstream
// (Local holds this node's own only), the other node's leave removes them, and the room's
// close removes its editors' states on the other node. (The peers' side — what a
// connection announces goes upstream too — is exercised end to end, as it needs
// replication connections.)
func TestReplication_UpstreamCluster(t *testing.T) {
	url := natsServer(t)
	n1, n2 := startNode(t, url, "n1", 8), startNode(t, url, "n2", 8)
	r, err := NewReplication(ReplicationOptions{Hub: true, MaxStates: 8, MaxStateBytes: 64, UpdatesPerSecond: 10})
	testkit.Must(t, err)
	defer r.Close()
	asked := ""
	r.SetUpstream(n1.rel, func(ns string) (string, bool) { asked = ns; return "default", true })

	room1 := newFakeRoom(8)
	l1 := r.Join("default", testNS, room1)
	if asked != "" {
		t.Fatalf("the owner of %s was looked up though the room gave it", asked)
	}
	room2 := newFakeRoom(8)
	l2 := n2.rel.Join("default", testNS, room2)

	l1.Publish([]yws.AwarenessEntry{{ClientID: 10, Clock: 1, State: []byte(`{"user":{"name":"ada"}}`)}})
	testkit.Eventually(t, 10*time.Second, "n2 hears n1's editor", func() bool {
		s, o := room2.state(10)
		return s == `{"user":{"name":"ada"}}` && o == "n1"
	})
	l2.Publish([]yws.AwarenessEntry{{ClientID: 20, Clock: 1, State: []byte(`{"user":{"name":"bea"}}`)}})
	testkit.Eventually(t, 10*time.Second, "n1's room hears n2's editor", func() bool {
		s, o := room1.state(20)
		return s == `{"user":{"name":"bea"}}` && o == "n2"
	})
	r.mu.Lock()
	sp := r.spaces[testNS]
	r.mu.Unlock()
	local := upstreamStates{r: r, sp: sp}.Local()
	if len(local) != 1 || local[0].ClientID != 10 {
		t.Fatalf("n1 would announce %v upstream; want its editor's state only", local)
	}

	l2.Close()
	testkit.Eventually(t, 10*time.Second, "n2's leave removes its editor on n1", func() bool {
		s, _ := room1.state(20)
		return s == ""
	})
	sp.mu.Lock()
	_, kept := sp.table[20]
	sp.mu.Unlock()
	if kept {
		t.Fatal("n1's relay still holds n2's editor after n2 left")
	}

	// n2 joins again, hears n1's editor, then n1's room closes: it goes on n2.
	room2 = newFakeRoom(8)
	l2 = n2.rel.Join("default", testNS, room2)
	defer l2.Close()
	testkit.Eventually(t, 10*time.Second, "n2 hears n1's editor again", func() bool {
		s, _ := room2.state(10)
		return s != ""
	})
	l1.Close()
	testkit.Eventually(t, 10*time.Second, "n1's editor removed on n2 once n1's room closed", func() bool {
		s, _ := room2.state(10)
		return s == ""
	})
	r.mu.Lock()
	left := len(r.spaces)
	r.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d spaces left after the room closed", left)
	}
}
