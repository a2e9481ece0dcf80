package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The rich-text editor page (Tiptap with Collaboration and CollaborationCaret over the real
// @hocuspocus/provider, from the binary's bundle) in a real browser on two nodes, the hub
// and a peer: what is typed on either appears on the other, each page says "saved" only
// once the node holds the change, and both nodes' documents have the text. A second page
// on the hub shows the first's caret and name (awareness stays on the node it was sent to,
// so carets are shared among the pages of one node).
func TestE2E_Browser_TiptapOnTwoNodes(t *testing.T) {
	browser := browserFor(t)
	_, ns, hub, a, _, tok := editorCluster(t)
	tabs := map[string]context.Context{}
	for _, name := range []string{"hub-alice", "peer-bob", "hub-dora"} {
		tab, cancel := chromedp.NewContext(browser)
		t.Cleanup(cancel)
		if err := chromedp.Do(tab); err != nil { // creates the tab (no timeout on this first run)
			t.Fatalf("opening a tab: %v", err)
		}
		tabs[name] = tab
	}
	screenshotsOnFailure(t, tabs)

	eval := func(tab string, expr string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(tabs[tab], 10*time.Second)
		defer cancel()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %s: %v", tab, expr, err)
		}
		return v
	}
	waitPage := func(tab, what, expr string, ok func(string) bool) string {
		t.Helper()
		var got string
		eventually(t, 30*time.Second, tab+": "+what, func() error {
			got = eval(tab, expr)
			if !ok(got) {
				return fmt.Errorf("%q", got)
			}
			return nil
		})
		return got
	}
	const (
		statusText = `document.getElementById('status').textContent`
		savedText  = `document.getElementById('saved').textContent`
		editorText = `document.querySelector('.tiptap').textContent`
	)
	open := func(tab string, p *proc, token, user string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(tabs[tab], 30*time.Second)
		defer cancel()
		u := fmt.Sprintf("http://%s/edit/rich/%s?token=%s&name=%s", p.client, ns, url.QueryEscape(token), user)
		if err := chromedp.Do(ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS(".tiptap"))); err != nil {
			t.Fatalf("opening the rich-text page on %s: %v", p.name, err)
		}
		waitPage(tab, "synced", statusText, func(s string) bool { return s == "synced" })
	}
	typeIn := func(tab, text string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(tabs[tab], 30*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(".tiptap")), chromedp.SendKeys(chromedp.CSS(".tiptap"), text)); err != nil {
			t.Fatalf("%s: typing: %v", tab, err)
		}
	}
	open("peer-bob", a, tok["peer-a"], "bob")
	open("hub-dora", hub, tok["hub"], "dora")
	open("hub-alice", hub, tok["hub"], "alice")

	fromHub := "Typed in Tiptap on the hub."
	typeIn("hub-alice", fromHub)
	waitPage("peer-bob", "the hub's text", editorText, func(s string) bool { return s == fromHub })
	waitPage("hub-alice", "saved", savedText, func(s string) bool { return s == "saved" })

	fromPeer := " Typed on the peer."
	typeIn("peer-bob", fromPeer)
	want := waitPage("peer-bob", "its own text", editorText, func(s string) bool { return strings.Contains(s, fromPeer) })
	waitPage("hub-alice", "the peer's text", editorText, func(s string) bool { return s == want })
	waitPage("peer-bob", "saved", savedText, func(s string) bool { return s == "saved" })
	if !strings.Contains(want, fromHub) {
		t.Fatalf("the pages converged on %q, which lost the hub's text", want)
	}
	// Both nodes hold the text, as Tiptap's XML: one paragraph.
	for _, p := range []*proc{hub, a} {
		eventually(t, 30*time.Second, p.name+"'s document", func() error {
			if got := richText(t, p, ns); got != "<paragraph>"+want+"</paragraph>" {
				return fmt.Errorf("%q", got)
			}
			return nil
		})
	}
	// The other page on the hub shows alice's caret with her name, and lists her.
	waitPage("hub-dora", "alice's caret", `Array.from(document.querySelectorAll('.collaboration-carets__label')).map(e => e.textContent).join(',')`,
		func(s string) bool { return s == "alice" })
	waitPage("hub-dora", "the editors here", `document.getElementById('peers').textContent`,
		func(s string) bool {
			return strings.Contains(s, "alice") && strings.Contains(s, "dora") && !strings.Contains(s, "bob")
		})
}

// richText reads Y.XmlFragment("default") (Tiptap's content) of a node's document as XML.
func richText(t *testing.T, p *proc, ns string) string {
	t.Helper()
	status, b := p.api().do("GET", "/v1/namespaces/"+ns+"/doc?root=default:xml", nil)
	if status != 200 {
		return fmt.Sprintf("<status %d: %s>", status, b)
	}
	var doc map[string]string
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc["default"]
}
