package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// richPage is the rich-text editor page (Tiptap with Collaboration and CollaborationCaret
// over the real @hocuspocus/provider, from the binary's bundle) open in a tab of the test's
// browser.
type richPage struct {
	t    *testing.T
	name string
	tab  context.Context
}

// What the page shows: the provider's state, "saved" or "saving…", and Tiptap's text.
const (
	richStatus = `document.getElementById('status').textContent`
	richSaved  = `document.getElementById('saved').textContent`
	// The editor's text, without the other editors' carets (their labels are text inside it).
	richText = `(() => { const e = document.querySelector('.tiptap').cloneNode(true);
		e.querySelectorAll('.collaboration-carets__caret').forEach((c) => c.remove()); return e.textContent })()`
	richCarets = `Array.from(document.querySelectorAll('.collaboration-carets__label')).map(e => e.textContent).join(',')`
	richPeers  = `document.getElementById('peers').textContent`
)

// newRichTab opens a tab of its own in browser, closed when the test ends.
func newRichTab(t *testing.T, browser context.Context, name string) *richPage {
	t.Helper()
	tab, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	if err := chromedp.Do(tab); err != nil { // creates the tab (no timeout on this first run)
		t.Fatalf("opening a tab: %v", err)
	}
	return &richPage{t: t, name: name, tab: tab}
}

// open loads the page at address and waits until the provider has synced.
func (p *richPage) open(address string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.tab, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(address), chromedp.WaitVisible(chromedp.CSS(".tiptap"))); err != nil {
		p.t.Fatalf("%s: opening %s: %v", p.name, address, err)
	}
	p.waitFor("synced", richStatus, func(s string) bool { return s == "synced" })
}

func (p *richPage) eval(expr string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.tab, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		p.t.Fatalf("%s: %s: %v", p.name, expr, err)
	}
	return v
}

// waitFor waits until expr's value is ok, and returns it.
func (p *richPage) waitFor(what, expr string, ok func(string) bool) string {
	p.t.Helper()
	var got string
	eventually(p.t, 30*time.Second, p.name+": "+what, func() error {
		if got = p.eval(expr); !ok(got) {
			return fmt.Errorf("%q", got)
		}
		return nil
	})
	return got
}

// typeText clicks into the editor and types text with the keyboard.
func (p *richPage) typeText(text string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.tab, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(".tiptap")), chromedp.SendKeys(chromedp.CSS(".tiptap"), text)); err != nil {
		p.t.Fatalf("%s: typing: %v", p.name, err)
	}
}

// richConverge types on page a, then on page b, and waits until both show the same text
// with both parts, each saying "saved"; it returns that text.
func richConverge(t *testing.T, a, b *richPage, fromA, fromB string) string {
	t.Helper()
	a.typeText(fromA)
	b.waitFor("the text typed on "+a.name, richText, func(s string) bool { return s == fromA })
	a.waitFor("saved", richSaved, func(s string) bool { return s == "saved" })
	b.typeText(fromB)
	want := b.waitFor("its own text", richText, func(s string) bool { return strings.Contains(s, fromB) })
	a.waitFor("the text typed on "+b.name, richText, func(s string) bool { return s == want })
	b.waitFor("saved", richSaved, func(s string) bool { return s == "saved" })
	if !strings.Contains(want, fromA) {
		t.Fatalf("the pages converged on %q, which lost %s's text", want, a.name)
	}
	return want
}

// The rich-text editor page in a real browser on two nodes, the hub and a peer: what is
// typed on either appears on the other, each page says "saved" only once the node holds
// the change, and both nodes' documents have the text. Carets and names cross nodes: a
// second page on the hub shows the carets of the hub's first page and of the peer's page.
func TestE2E_Browser_TiptapOnTwoNodes(t *testing.T) {
	browser := browserFor(t)
	_, ns, hub, a, _, tok := editorCluster(t)
	alice, bob, dora := newRichTab(t, browser, "hub-alice"), newRichTab(t, browser, "peer-bob"), newRichTab(t, browser, "hub-dora")
	screenshotsOnFailure(t, map[string]context.Context{alice.name: alice.tab, bob.name: bob.tab, dora.name: dora.tab})
	address := func(p *proc, token, user string) string {
		return fmt.Sprintf("http://%s/edit/rich/%s?token=%s&name=%s", p.client, ns, url.QueryEscape(token), user)
	}
	bob.open(address(a, tok["peer-a"], "bob"))
	dora.open(address(hub, tok["hub"], "dora"))
	alice.open(address(hub, tok["hub"], "alice"))

	want := richConverge(t, alice, bob, "Typed in Tiptap on the hub.", " Typed on the peer.")
	// Both nodes hold the text, as Tiptap's XML: one paragraph.
	for _, p := range []*proc{hub, a} {
		eventually(t, 30*time.Second, p.name+"'s document", func() error {
			if got := xmlRoot(t, p, ns); got != "<paragraph>"+want+"</paragraph>" {
				return fmt.Errorf("%q", got)
			}
			return nil
		})
	}
	// Carets cross nodes: the other page on the hub shows alice's caret and bob's (typed on
	// the peer) with their names, and lists all three; bob's page on the peer shows alice's.
	carets := func(want ...string) func(string) bool {
		return func(s string) bool {
			got := strings.Split(s, ",")
			slices.Sort(got)
			return slices.Equal(got, want)
		}
	}
	dora.waitFor("alice's and bob's carets", richCarets, carets("alice", "bob"))
	bob.waitFor("alice's caret", richCarets, func(s string) bool { return slices.Contains(strings.Split(s, ","), "alice") })
	for _, p := range []*richPage{dora, bob} {
		p.waitFor("the editors of both nodes", richPeers+"+' | carets: '+"+richCarets, func(s string) bool {
			s, _, _ = strings.Cut(s, " | ")
			return strings.Contains(s, "alice") && strings.Contains(s, "dora") && strings.Contains(s, "bob")
		})
	}
}

// xmlRoot reads Y.XmlFragment("default") (Tiptap's content) of a node's document as XML.
func xmlRoot(t *testing.T, p *proc, ns string) string {
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
