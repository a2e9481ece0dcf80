package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/yjs"
)

// TestE2E_DeleteNamespace deletes a named, labelled namespace on the hub while one of its
// two peers is live and the other is offline and writing: the live peer deletes its replica
// at once without an archive (it knows the hub held everything), the offline one learns it
// when it reconnects and keeps its offline write in an archive, nothing resurrects the
// namespace, later requests are 404 everywhere, and the document's pages are free in the
// hub's and the peers' store files.
func TestE2E_DeleteNamespace(t *testing.T) {
	c := newCluster(t)
	hub := c.startHub()
	h := hub.api()
	var created struct{ NamespaceID string }
	h.json("POST", "/v1/namespaces", []byte(`{"owner":"default","name":"plan","labels":{"team":"red"}}`), 201, &created)
	ns := created.NamespaceID
	// A second namespace of the same name and owner is refused.
	h.json("POST", "/v1/namespaces", []byte(`{"owner":"default","name":"plan"}`), 409, nil)

	a := c.startPeer("peer-a", c.tokenFile("peer-a", c.token("peer-a")), "--target", ns)
	btok := c.tokenFile("peer-b", c.token("peer-b"))
	b := c.startPeer("peer-b", btok, "--target", ns)
	targetState(t, a, ns, "live")
	targetState(t, b, ns, "live")
	big := strings.Repeat("x", 1<<20)
	h.set(ns, map[string]any{"k": "v", "big": big})
	converged(t, ns, map[string]any{"k": "v"}, hub, a, b)

	// Names and labels replicate with the namespace, and change with PATCH.
	h.json("PATCH", "/v1/namespaces/"+ns, []byte(`{"name":"plan-2","labels":{"team":"blue"}}`), 200, nil)
	eventually(t, 30*time.Second, "names on the peer", func() error {
		var st struct {
			Name   string
			Labels map[string]string
		}
		a.api().json("GET", "/v1/namespaces/"+ns, nil, 200, &st)
		if st.Name != "plan-2" || st.Labels["team"] != "blue" {
			return fmt.Errorf("peer-a shows %+v", st)
		}
		return nil
	})
	var page []map[string]any
	h.json("GET", "/v1/namespaces?label=team=blue&owner=default", nil, 200, &page)
	if len(page) != 1 || page[0]["namespaceId"] != ns {
		t.Fatalf("list by label: %v", page)
	}

	// peer-b goes offline (its hub is unreachable) and writes there.
	b.stop()
	b = c.startPeer("peer-b", btok, "--hub-url", "ws://127.0.0.1:9/v1/replication")
	b.api().set(ns, map[string]any{"offline": "kept"})

	// The delete needs the epoch; a wrong one is refused.
	h.json("DELETE", "/v1/namespaces/"+ns, nil, 400, nil)
	h.json("DELETE", "/v1/namespaces/"+ns+"?expectedEpoch=2", nil, 409, nil)
	h.json("DELETE", "/v1/namespaces/"+ns+"?expectedEpoch=1", nil, 204, nil)
	for _, path := range []string{"", "/doc", "/update"} {
		if status, body := h.do("GET", "/v1/namespaces/"+ns+path, nil); status != 404 || !strings.Contains(string(body), "NAMESPACE_DELETED") {
			t.Fatalf("GET %s after the delete: %d %s", path, status, body)
		}
	}
	h.json("DELETE", "/v1/namespaces/"+ns+"?expectedEpoch=1", nil, 404, nil)
	h.json("GET", "/v1/namespaces?name=plan-2", nil, 200, &page)
	if len(page) != 0 {
		t.Fatalf("a deleted namespace is listed: %v", page)
	}

	// The live peer learns it at once.
	eventually(t, 30*time.Second, "peer-a drops the target", func() error {
		if tg := a.api().target(ns); tg != nil {
			return fmt.Errorf("target %v", tg["state"])
		}
		if status, body := a.api().do("GET", "/v1/namespaces/"+ns, nil); status != 404 {
			return fmt.Errorf("GET on peer-a: %d %s", status, body)
		}
		return nil
	})

	// The offline peer reconnects: it learns it too and keeps its offline write.
	b.stop()
	b = c.startPeer("peer-b", btok)
	eventually(t, 30*time.Second, "peer-b drops the target", func() error {
		if tg := b.api().target(ns); tg != nil {
			return fmt.Errorf("target %v", tg["state"])
		}
		if status, body := b.api().do("GET", "/v1/namespaces/"+ns, nil); status != 404 {
			return fmt.Errorf("GET on peer-b: %d %s", status, body)
		}
		return nil
	})
	// Adding the target again does not bring it back.
	if status, body := b.api().do("POST", "/v1/targets", []byte(fmt.Sprintf(`{"namespaceId":%q,"owner":"default"}`, ns))); status != 404 ||
		!strings.Contains(string(body), "NAMESPACE_DELETED") {
		t.Fatalf("re-adding a deleted namespace as a target: %d %s", status, body)
	}
	if status, _ := h.do("GET", "/v1/namespaces/"+ns, nil); status != 404 {
		t.Fatalf("the namespace came back on the hub: %d", status)
	}

	for _, p := range []*proc{a, b, hub} {
		p.stop()
	}
	checkStore := func(name, dir string, wantArchive string) {
		t.Helper()
		st, err := persistence.OpenDataDir(dir, persistence.Options{}) // read-write: bbolt reads its freelist only then
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		closed := false
		defer func() {
			if !closed {
				st.Close(context.Background())
			}
		}()
		ent, err := st.Entry(context.Background(), ns)
		if err != nil || ent.State != persistence.StateDeleted {
			t.Fatalf("%s: entry %+v %v, want a tombstone", name, ent, err)
		}
		free, file, err := st.FreeBytes()
		if err != nil || free < int64(len(big)) {
			t.Fatalf("%s: %d free bytes of %d (%v); the deleted document had more than %d", name, free, file, err, len(big))
		}
		if wantArchive == "" {
			// The operator gives the space back to the file system.
			st.Close(context.Background())
			closed = true
			out, err := exec.Command(bin.nmcr, "store", "compact", dir, "--in-place", "--yes").CombinedOutput()
			if err != nil {
				t.Fatalf("%s: nmcr store compact: %v %s", name, err, out)
			}
			fi, err := os.Stat(filepath.Join(dir, persistence.FileName))
			if err != nil || file-fi.Size() < int64(len(big)) {
				t.Fatalf("%s: compacted from %d bytes to %d (%v); the deleted document had %d", name, file, fi.Size(), err, len(big))
			}
			if st, err = persistence.OpenDataDir(dir, persistence.Options{ReadOnly: true}); err != nil {
				t.Fatalf("%s: the compacted store: %v", name, err)
			}
			closed = false
		}
		archives, err := st.Archives(context.Background(), ns)
		if err != nil {
			t.Fatal(err)
		}
		var deleted []persistence.ArchiveInfo
		for _, ai := range archives {
			if ai.Reason == persistence.ReasonDelete {
				deleted = append(deleted, ai)
			}
		}
		if wantArchive == "" {
			if len(deleted) != 0 {
				t.Fatalf("%s kept an archive of a replica the hub held entirely: %+v", name, deleted)
			}
			return
		}
		if len(deleted) != 1 {
			t.Fatalf("%s: archives %+v, want one of the delete", name, archives)
		}
		doc, err := st.LoadArchive(context.Background(), ns, deleted[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if got := docNotes(t, doc); got["offline"] != wantArchive {
			t.Fatalf("%s: the archive holds %v, want the offline write", name, got)
		}
	}
	checkStore("hub", c.hubData(), "")
	checkStore("peer-a", filepath.Join(c.dir, "peer-a"), "")
	// peer-b's pages stay in its archive: what it held that the hub may not have had.
	func() {
		st, err := persistence.OpenDataDir(filepath.Join(c.dir, "peer-b"), persistence.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close(context.Background())
		archives, _ := st.Archives(context.Background(), ns)
		for _, ai := range archives {
			if ai.Reason == persistence.ReasonDelete {
				doc, err := st.LoadArchive(context.Background(), ns, ai.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got := docNotes(t, doc); got["offline"] != "kept" {
					t.Fatalf("peer-b's archive holds %v", got)
				}
				return
			}
		}
		t.Fatalf("peer-b kept no archive of its offline write: %+v", archives)
	}()
}

// docNotes reads the notes map of a stored document.
func docNotes(t *testing.T, doc persistence.Doc) map[string]any {
	t.Helper()
	d := yjs.NewDoc()
	for _, u := range append([][]byte{doc.Snapshot}, doc.Updates...) {
		if len(u) == 0 {
			continue
		}
		if err := yjs.ApplyUpdate(d, u, nil); err != nil {
			t.Fatal(err)
		}
	}
	out, _ := d.GetMap("notes").ToJSON().(map[string]any)
	return out
}

// Stock y-websocket editors of a namespace, one on the hub and one on a peer, are closed
// with 4404 when the namespace is deleted (y-websocket then stops reconnecting), and a
// later connection to either node is refused with 404 NAMESPACE_DELETED.
func TestE2E_DeleteClosesEditors(t *testing.T) {
	ag := startAgent(t)
	_, ns, hub, a, _, tok := editorCluster(t)
	ag.open("h", hub, ns, tok["hub"])
	ag.open("a", a, ns, tok["peer-a"])
	ag.insert("h", 0, "written before the delete")
	ag.waitText("a", "written before the delete")

	hub.api().json("DELETE", "/v1/namespaces/"+ns+"?expectedEpoch=1", nil, 204, nil)
	for _, e := range []string{"h", "a"} {
		if ev := ag.waitEvent(e, "closed"); ev.Code != 4404 {
			t.Errorf("editor %s closed with %d %q, want 4404", e, ev.Code, ev.Reason)
		}
	}
	eventually(t, 30*time.Second, "peer-a drops the target", func() error {
		if tg := a.api().target(ns); tg != nil {
			return fmt.Errorf("target %v", tg["state"])
		}
		return nil
	})
	for _, node := range []*proc{hub, a} {
		name := "late-" + node.name
		ag.must("open", map[string]any{"name": name, "url": "ws://" + node.client + "/v1/yjs", "ns": ns, "token": tok[node.name], "wait": false}, nil)
		ev := ag.waitEvent(name, "refused")
		if ev.Status != 404 || !strings.Contains(ev.Body, "NAMESPACE_DELETED") {
			t.Errorf("a later editor on %s: %d %s, want 404 NAMESPACE_DELETED", node.name, ev.Status, ev.Body)
		}
		ag.must("close", map[string]any{"name": name}, nil)
	}
}

// TestE2E_Cluster_DeleteNamespace: a hub cluster of three nodes with the shipped defaults
// (editors on every node). A named namespace is created through node 1, renamed through
// node 3 (every node lists it by its new name), replicated by a peer attached to node 2 and
// one attached to node 3, and edited by a y-websocket editor on each node. Deleted through
// node 1: every node's editor is closed with 4404, both peers drop it, every node answers
// 404 NAMESPACE_DELETED (admin API and editors), the name is free again and the id is not.
func TestE2E_Cluster_DeleteNamespace(t *testing.T) {
	t.Parallel()
	ag := startAgent(t)
	keys := newAppKeys(t)
	c := newShippedHubCluster(t, 3, nil, keys.flags()...)
	var created struct{ NamespaceID string }
	c.hubs[0].api().json("POST", "/v1/namespaces", []byte(`{"owner":"default","name":"board","labels":{"team":"red"}}`), 201, &created)
	ns := created.NamespaceID
	c.hubs[1].api().json("POST", "/v1/namespaces", []byte(`{"owner":"default","name":"board"}`), 409, nil)
	c.hubs[2].api().json("PATCH", "/v1/namespaces/"+ns, []byte(`{"name":"board-2"}`), 200, nil)
	for _, h := range c.hubs {
		var page []map[string]any
		h.api().json("GET", "/v1/namespaces?name=board-2&label=team=red", nil, 200, &page)
		if len(page) != 1 || page[0]["namespaceId"] != ns {
			t.Fatalf("%s lists %v by the new name", h.name, page)
		}
	}
	a := c.startPeerOnly("peer-a", 1, ns)
	b := c.startPeerOnly("peer-b", 2, ns)
	targetState(t, a, ns, "live")
	targetState(t, b, ns, "live")
	// The new name replicated with the document (its meta), through either node.
	for _, p := range []*proc{a, b} {
		eventually(t, 30*time.Second, p.name+" shows the new name", func() error {
			var st struct{ Name string }
			p.api().json("GET", "/v1/namespaces/"+ns, nil, 200, &st)
			if st.Name != "board-2" {
				return fmt.Errorf("name %q", st.Name)
			}
			return nil
		})
	}
	tok := ag.joseMint(map[string]any{"alg": "ES256", "jwk": privateJWK(t, keys.ec), "kid": "app-ec-1",
		"claims": claims("erin", []string{ns}, nil), "expiresIn": "1h"})
	for i, h := range c.hubs {
		ag.open(fmt.Sprintf("e%d", i+1), h, ns, tok)
	}
	ag.insert("e1", 0, "on every node")
	for i := range c.hubs {
		ag.waitText(fmt.Sprintf("e%d", i+1), "on every node")
	}
	waitBody(t, ns, "on every node", a, b)

	c.hubs[0].api().json("DELETE", "/v1/namespaces/"+ns+"?expectedEpoch=2", nil, 409, nil)
	c.hubs[0].api().json("DELETE", "/v1/namespaces/"+ns+"?expectedEpoch=1", nil, 204, nil)
	for i := range c.hubs {
		if ev := ag.waitEvent(fmt.Sprintf("e%d", i+1), "closed"); ev.Code != 4404 {
			t.Errorf("the editor on node %d closed with %d %q, want 4404", i+1, ev.Code, ev.Reason)
		}
	}
	for _, p := range []*proc{a, b} {
		eventually(t, 30*time.Second, p.name+" drops the target", func() error {
			if tg := p.api().target(ns); tg != nil {
				return fmt.Errorf("target %v", tg["state"])
			}
			return nil
		})
	}
	for i, h := range c.hubs {
		if status, body := h.api().do("GET", "/v1/namespaces/"+ns, nil); status != 404 || !strings.Contains(string(body), "NAMESPACE_DELETED") {
			t.Errorf("%s after the delete: %d %s", h.name, status, body)
		}
		name := fmt.Sprintf("late-%d", i+1)
		ag.must("open", map[string]any{"name": name, "url": "ws://" + h.client + "/v1/yjs", "ns": ns, "token": tok, "wait": false}, nil)
		if ev := ag.waitEvent(name, "refused"); ev.Status != 404 || !strings.Contains(ev.Body, "NAMESPACE_DELETED") {
			t.Errorf("a later editor on %s: %d %s", h.name, ev.Status, ev.Body)
		}
		ag.must("close", map[string]any{"name": name}, nil)
	}
	var again struct{ NamespaceID string }
	c.hubs[1].api().json("POST", "/v1/namespaces", []byte(`{"owner":"default","name":"board-2"}`), 201, &again)
	if again.NamespaceID == ns {
		t.Fatal("the deleted id was given out again")
	}
	c.hubs[2].api().json("DELETE", "/v1/namespaces/"+ns+"?expectedEpoch=1", nil, 404, nil)
}
