package e2e

import (
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nomicore/nomicore/lib0"
	"github.com/nomicore/nomicore/yjs"
)

// TestE2E_StoreCheckAfterLargeUpdates: a hub and a peer with the shipped defaults. Through
// the hub's admin API, a text of 600 structs of one client (each insert of two characters
// at the start), then a deletion of struct 400 and the first character of struct 401: the
// split of struct 401 also splits the full first chunk of the struct list, which made older
// versions delete 288 live characters as well. The hub and the peer keep the text whole
// (1,197 characters). Once both are stopped, nmcr store check says of the hub's store that
// it holds every update the namespace received and an older version would have served
// 909 characters (SERVED-DAMAGED), and of the peer's that it is a large replica to reset once
// the hub is right (RESET).
func TestE2E_StoreCheckAfterLargeUpdates(t *testing.T) {
	c := newCluster(t)
	tok := c.tokenFile("peer-a", c.token("peer-a"))
	hub := c.startHub()
	ns := hub.api().createNamespace()
	a := c.startPeer("peer-a", tok, "--target", ns)
	targetState(t, a, ns, "live")

	src := yjs.NewDoc(yjs.WithClientID(7))
	body := src.GetText("body")
	for k := 0; k < 600; k++ {
		if err := body.Insert(0, "ab", nil); err != nil {
			t.Fatal(err)
		}
	}
	state, err := yjs.EncodeStateAsUpdate(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	del := lib0.NewEncoder(16)
	for _, v := range []uint64{0, 1, 7, 1, 800, 3} { // no structs; client 7: [800, 803)
		del.WriteVarUint(v)
	}
	for _, u := range [][]byte{state, del.Bytes()} {
		if status, b := hub.api().do("POST", "/v1/namespaces/"+ns+"/update", u); status != 204 {
			t.Fatalf("POST update: %d %s", status, b)
		}
	}
	sameState(t, ns, 30*time.Second, hub, a)
	for _, p := range []*proc{hub, a} {
		if n := textLen(t, p, ns); n != 1197 {
			t.Fatalf("%s: the text has %d characters, want 1197", p.name, n)
		}
	}
	a.stop()
	hub.stop()

	check := func(data string) (int, map[string]any) {
		t.Helper()
		out, err := exec.Command(bin.nmcr, "store", "check", data, ns, "--json").Output()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("nmcr store check %s: %v", data, err)
		}
		var line map[string]any
		if err := json.Unmarshal(out, &line); err != nil {
			t.Fatalf("nmcr store check %s: %v: %s", data, err, out)
		}
		return code, line
	}
	code, line := check(c.hubData())
	roots, _ := line["roots"].(map[string]any)
	older, _ := line["olderRoots"].(map[string]any)
	if code != 3 || line["verdict"] != "served-damaged" || roots["body"] != 1197.0 || older["body"] != 909.0 || line["peerReplica"] != false {
		t.Fatalf("hub store: exit %d, %v", code, line)
	}
	code, line = check(filepath.Join(c.dir, "peer-a"))
	roots, _ = line["roots"].(map[string]any)
	if code != 3 || line["verdict"] != "reset" || roots["body"] != 1197.0 || line["peerReplica"] != true {
		t.Fatalf("peer store: exit %d, %v", code, line)
	}
}
