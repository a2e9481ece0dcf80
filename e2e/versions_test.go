package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nomicore/nomicore/yjs"
)

type versionJSON struct {
	VersionID   string `json:"versionId"`
	Label       string `json:"label"`
	Kind        string `json:"kind"`
	CreatedAt   string `json:"createdAt"`
	StateVector string `json:"stateVector"`
}

type restoreJSON struct {
	Restored versionJSON  `json:"restored"`
	Changed  bool         `json:"changed"`
	Before   *versionJSON `json:"before"`
}

// versionText reads Y.Text("body") of a version through GET …/versions/{v}/doc.
func versionText(t *testing.T, p *proc, ns, v string) string {
	t.Helper()
	var doc map[string]string
	p.api().json("GET", "/v1/namespaces/"+ns+"/versions/"+v+"/doc?root=body:text", nil, 200, &doc)
	return doc["body"]
}

// TestE2E_Versions_RestoreSeenByEditors: a stock y-websocket editor on a peer writes a
// draft; a version of it is taken on the hub; the editor goes on writing. The version reads
// as the draft (…/doc, and …/update applied by Yjs), the current document does not. A
// restore brings the draft back for the editor on the peer and for the other peer, as a
// new change the editor goes on editing after; restoring the version taken just before the
// restore undoes it (a restore of a restore), and the change feed marks both.
func TestE2E_Versions_RestoreSeenByEditors(t *testing.T) {
	ag := startAgent(t)
	_, ns, hub, a, b, tok := editorCluster(t)
	ag.open("a", a, ns, tok["peer-a"])
	ag.open("b", b, ns, tok["peer-b"])
	api := hub.api()
	var head changesPage
	api.json("GET", "/v1/changes?after=0&wait=0s&limit=10000", nil, 200, &head)

	const draft = "first draft"
	ag.insert("a", 0, draft)
	waitBody(t, ns, draft, hub)
	var v1 versionJSON
	api.json("POST", "/v1/namespaces/"+ns+"/versions", []byte(`{"label":"draft"}`), 201, &v1)
	if v1.Label != "draft" || v1.Kind != "manual" || v1.VersionID == "" || v1.StateVector == "" || v1.CreatedAt == "" {
		t.Fatalf("the version taken: %+v", v1)
	}
	const pasted = draft + " and a paste to undo"
	ag.insert("a", len(draft), " and a paste to undo")
	waitBody(t, ns, pasted, hub, b)

	// Reading at the version.
	if got := versionText(t, hub, ns, v1.VersionID); got != draft {
		t.Fatalf("the version reads %q, want %q", got, draft)
	}
	status, update := api.do("GET", "/v1/namespaces/"+ns+"/versions/"+v1.VersionID+"/update", nil)
	doc := yjs.NewDoc()
	if status != 200 || yjs.ApplyUpdate(doc, update, nil) != nil || doc.GetText("body").String() != draft {
		t.Fatalf("the version's update: %d, %d bytes, text %q", status, len(update), doc.GetText("body").String())
	}
	var list struct{ Versions []versionJSON }
	api.json("GET", "/v1/namespaces/"+ns+"/versions", nil, 200, &list)
	if len(list.Versions) != 1 || list.Versions[0].VersionID != v1.VersionID {
		t.Fatalf("versions: %+v", list.Versions)
	}
	if status, b := api.do("GET", "/v1/namespaces/"+ns+"/versions/99/doc", nil); status != 404 {
		t.Fatalf("a version that does not exist: %d %s", status, b)
	}

	// Restore: the editors on both peers see the draft again, and go on editing after it.
	var r1 restoreJSON
	api.json("POST", "/v1/namespaces/"+ns+"/versions/"+v1.VersionID+"/restore", nil, 200, &r1)
	if !r1.Changed || r1.Before == nil || r1.Before.Kind != "before-restore" {
		t.Fatalf("the restore: %+v", r1)
	}
	ag.waitText("a", draft)
	ag.waitText("b", draft)
	waitBody(t, ns, draft, hub, a, b)
	if got := versionText(t, hub, ns, r1.Before.VersionID); got != pasted {
		t.Fatalf("the version taken before the restore reads %q, want %q", got, pasted)
	}

	// Restore of the restore: the version taken just before it brings the paste back.
	var r2 restoreJSON
	api.json("POST", "/v1/namespaces/"+ns+"/versions/"+r1.Before.VersionID+"/restore", nil, 200, &r2)
	if !r2.Changed || r2.Before == nil {
		t.Fatalf("the restore of the restore: %+v", r2)
	}
	ag.waitText("a", pasted)
	ag.waitText("b", pasted)
	// …and restoring the version taken before that one undoes it again.
	api.json("POST", "/v1/namespaces/"+ns+"/versions/"+r2.Before.VersionID+"/restore", nil, 200, nil)
	ag.waitText("b", draft)
	ag.insert("b", len(draft), "!")
	ag.waitText("a", draft+"!")
	waitBody(t, ns, draft+"!", hub, a, b)
	// Restoring what the document holds already writes nothing.
	var same restoreJSON
	api.json("POST", "/v1/namespaces/"+ns+"/versions/"+r2.Before.VersionID+"/restore", nil, 200, &same)
	ag.waitText("a", draft)
	var noop restoreJSON
	api.json("POST", "/v1/namespaces/"+ns+"/versions/"+r2.Before.VersionID+"/restore", nil, 200, &noop)
	if noop.Changed {
		t.Fatalf("a restore to what the document holds: %+v", noop)
	}

	// The change feed: each restore is a "restored" change after its update.
	restored := 0
	after := head.Cursor
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		var page changesPage
		api.json("GET", "/v1/changes?after="+after+"&wait=0s", nil, 200, &page)
		if len(page.Changes) == 0 {
			break
		}
		for _, c := range page.Changes {
			if c.Kind == "restored" && c.NamespaceID == ns {
				restored++
			}
		}
		after = page.Cursor
	}
	if restored != 4 {
		t.Fatalf("%d restored changes in the feed, want 4", restored)
	}
}

// TestE2E_Versions_Automatic: with --auto-version-every 1s --keep-versions 2, a namespace
// written for several seconds gets automatic versions, and only the newest two are kept.
func TestE2E_Versions_Automatic(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	hub := c.startHub("--auto-version-every", "1s", "--keep-versions", "2")
	api := hub.api()
	ns := api.createNamespace()
	for i := range 12 {
		api.set(ns, map[string]any{"i": float64(i)})
		time.Sleep(500 * time.Millisecond)
	}
	var list struct{ Versions []versionJSON }
	eventually(t, 20*time.Second, "two automatic versions", func() error {
		api.json("GET", "/v1/namespaces/"+ns+"/versions", nil, 200, &list)
		if len(list.Versions) != 2 {
			return fmt.Errorf("versions: %+v", list.Versions)
		}
		return nil
	})
	taken := api.metric("nomicore_versions_auto_taken_total")
	if taken < 3 {
		t.Fatalf("%v automatic versions taken, want at least 3 over 6 s of writes (2 kept)", taken)
	}
	for _, v := range list.Versions {
		if v.Kind != "auto" {
			t.Fatalf("a version %+v", v)
		}
	}
	// The newest automatic version holds one of the last writes.
	var doc map[string]map[string]any
	b := list.Versions[1]
	api.json("GET", "/v1/namespaces/"+ns+"/versions/"+b.VersionID+"/doc?root=notes:map", nil, 200, &doc)
	if i, _ := doc["notes"]["i"].(float64); i < 6 {
		t.Fatalf("the newest automatic version holds i=%v; want one of the last writes", doc["notes"]["i"])
	}
}

// TestE2E_Versions_Cluster: on a hub cluster of three nodes, a version taken on node 1 is
// listed and read on node 3; restored on node 2, the document of every node is the
// version's; the version taken before the restore, restored on node 3, undoes it; the
// change feed of node 1 has both restores.
func TestE2E_Versions_Cluster(t *testing.T) {
	t.Parallel()
	c := newHubCluster(t, 3)
	n1, n2, n3 := c.hubs[0].api(), c.hubs[1].api(), c.hubs[2].api()
	ns := n1.createNamespace()
	n1.set(ns, map[string]any{"title": "draft"})
	var v1 versionJSON
	n1.json("POST", "/v1/namespaces/"+ns+"/versions", []byte(`{"label":"draft"}`), 201, &v1)
	n2.set(ns, map[string]any{"title": "pasted", "extra": "x"})
	var list struct{ Versions []versionJSON }
	n3.json("GET", "/v1/namespaces/"+ns+"/versions", nil, 200, &list)
	if len(list.Versions) != 1 || list.Versions[0].VersionID != v1.VersionID || list.Versions[0].Label != "draft" {
		t.Fatalf("versions on node 3: %+v", list.Versions)
	}
	var doc map[string]map[string]any
	n3.json("GET", "/v1/namespaces/"+ns+"/versions/"+v1.VersionID+"/doc?root=notes:map", nil, 200, &doc)
	if fmt.Sprint(doc["notes"]) != "map[title:draft]" {
		t.Fatalf("the version read on node 3: %v", doc)
	}
	var r1 restoreJSON
	n2.json("POST", "/v1/namespaces/"+ns+"/versions/"+v1.VersionID+"/restore", nil, 200, &r1)
	if !r1.Changed || r1.Before == nil {
		t.Fatalf("the restore on node 2: %+v", r1)
	}
	converged(t, ns, map[string]any{"title": "draft"}, c.hubs...)
	var r2 restoreJSON
	n3.json("POST", "/v1/namespaces/"+ns+"/versions/"+r1.Before.VersionID+"/restore", nil, 200, &r2)
	if !r2.Changed {
		t.Fatalf("the restore of the restore on node 3: %+v", r2)
	}
	converged(t, ns, map[string]any{"title": "pasted", "extra": "x"}, c.hubs...)
	n1.json("GET", "/v1/namespaces/"+ns+"/versions", nil, 200, &list)
	if len(list.Versions) != 3 {
		t.Fatalf("versions after two restores: %+v", list.Versions)
	}
	restored := 0
	after := "0"
	for {
		var page changesPage
		n1.json("GET", "/v1/changes?after="+after+"&wait=0s", nil, 200, &page)
		if len(page.Changes) == 0 {
			break
		}
		for _, ch := range page.Changes {
			if ch.Kind == "restored" && ch.NamespaceID == ns {
				restored++
			}
		}
		after = page.Cursor
	}
	if restored != 2 {
		t.Fatalf("%d restored changes in node 1's feed, want 2", restored)
	}
}
