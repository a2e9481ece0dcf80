package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nomicore/nomicore/internal/testkit/faultproxy"
)

// The dashboard in a real browser: Debian's chromium, headless, driven by chromedp. The
// test has a browser context of its own in the test binary's one browser (browserFor); every
// subtest opens its pages in tabs of it; the hub and peers are the built binaries.
// Screenshots go to $NOMICORE_ARTIFACTS (every one) or, when a subtest fails, to
// e2e/artifacts; NOMICORE_DASHBOARD_DOCS=1 (make dashboard-screenshots) also writes the
// README's screenshots into docs/.

// dashBrowser is TestE2E_Dashboard's browser context.
type dashBrowser struct {
	ctx context.Context
}

func startDashBrowser(t *testing.T) *dashBrowser {
	t.Helper()
	return &dashBrowser{ctx: browserFor(t)}
}

// tab is one page of the browser, with the console messages it wrote.
type tab struct {
	t    *testing.T
	name string
	ctx  context.Context

	mu      sync.Mutex
	console []string
}

// newTab opens a tab at 1280×800 for the subtest; a failure leaves its screenshot.
func (b *dashBrowser) newTab(t *testing.T, name string) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	tb := &tab{t: t, name: name, ctx: ctx}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == "error" || m.Type == "warning" || m.IsException() || m.Type == "assert" {
				tb.mu.Lock()
				tb.console = append(tb.console, fmt.Sprintf("%s %s (%s:%d)", m.Type, m.Text, m.URL, m.Line))
				tb.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("NOMICORE_ARTIFACTS") != "" {
			tb.screenshot(name + "-end")
		}
		cancel()
	})
	return tb
}

// do runs actions within 30 s.
func (tb *tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.t.Fatalf("%s: %s: %v", tb.name, what, err)
	}
}

// eval evaluates a JavaScript expression into v.
func (tb *tab) eval(expr string, v any) error {
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	b, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// waitFor polls a JavaScript expression until it is true, failing after timeout with what
// the page shows.
func (tb *tab) waitFor(what, expr string, timeout time.Duration) {
	tb.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var ok bool
		err := tb.eval("!!("+expr+")", &ok)
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			var text string
			tb.eval(`document.body.innerText.slice(0, 3000)`, &text)
			tb.t.Fatalf("%s: %s not reached within %v (err %v); the page shows:\n%s", tb.name, what, timeout, err, text)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// noConsoleErrors fails when the page wrote an error or a warning to its console.
func (tb *tab) noConsoleErrors() {
	tb.t.Helper()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if len(tb.console) > 0 {
		tb.t.Errorf("%s: the page wrote to its console:\n%s", tb.name, strings.Join(tb.console, "\n"))
	}
}

// screenshot writes a full-page PNG into $NOMICORE_ARTIFACTS (or e2e/artifacts when the
// test failed); with a docs name and NOMICORE_DASHBOARD_DOCS=1, also into docs/.
func (tb *tab) screenshot(name string, docs ...string) {
	dir := os.Getenv("NOMICORE_ARTIFACTS")
	if dir == "" && tb.t.Failed() {
		dir = "artifacts"
	}
	writeDocs := len(docs) > 0 && os.Getenv("NOMICORE_DASHBOARD_DOCS") == "1"
	if dir == "" && !writeDocs {
		return
	}
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Logf("screenshot %s: %v", name, err)
		return
	}
	if dir != "" {
		dir = filepath.Join(dir, strings.ReplaceAll(tb.t.Name(), "/", "_"))
		p := filepath.Join(dir, name+".png")
		if err := os.MkdirAll(dir, 0o755); err != nil || os.WriteFile(p, png, 0o644) != nil {
			tb.t.Logf("screenshot %s: cannot write %s", name, p)
		} else {
			tb.t.Logf("screenshot: %s", p)
		}
	}
	if writeDocs {
		p := filepath.Join("..", "docs", docs[0])
		if err := os.WriteFile(p, png, 0o644); err != nil {
			tb.t.Errorf("writing %s: %v", p, err)
		}
	}
}

// jsString quotes s for JavaScript.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// rowState is the state word shown in the row of key in a table.
func rowStateExpr(table, key string) string {
	return `(() => { const r = document.querySelector('#` + table + ` tbody tr[data-key=' + CSS.escape(` + jsString(key) + `) + ']');
		const s = r && r.querySelector('[data-state]'); return s ? s.dataset.state : ''; })()`
}

func TestE2E_Dashboard(t *testing.T) {
	browser := startDashBrowser(t)
	c := newCluster(t)
	// Pings often enough to show their round trip soon, with a pong timeout over a second: on a
	// test machine loaded by parallel packages under -race a process can be starved for about
	// a second, and a dropped connection restarts the chunked bootstrap the page is watched on.
	hub := c.startHub("--ping-interval", "2s", "--pong-timeout", "1500ms")
	ns := hub.api().createNamespace()
	a := c.startPeer("peer-a", c.tokenFile("peer-a", c.token("peer-a")), "--target", ns)
	targetState(t, a, ns, "live")
	hub.api().set(ns, map[string]any{"greeting": "hello from the walkthrough"})

	t.Run("HubListsPeersLive", func(t *testing.T) {
		tb := browser.newTab(t, "hub")
		tb.do("open the hub's dashboard", chromedp.Navigate(hub.admin+"/"))
		tb.waitFor("peer-a's connection listed as ready",
			`Array.from(document.querySelectorAll('#connections tbody tr[data-key]')).some(r => r.cells[0].textContent === 'peer-a' && r.querySelector('[data-state=ready]'))`,
			20*time.Second)
		tb.waitFor("the namespace listed, live on one peer", rowStateExpr("namespaces", ns)+` === 'live'`, 20*time.Second)
		// A hub named hub is "Hub", not "Hub hub"; the tab says which process it shows.
		tb.waitFor("the hub's identity", `document.getElementById('node-title').textContent === 'Hub' && document.title === 'Hub · Nomicore'`, 5*time.Second)

		// A second peer connects: the page shows it without a reload.
		var marker string
		tb.eval(`window.__notReloaded = 'yes'`, &marker)
		b := c.startPeer("peer-b", c.tokenFile("peer-b", c.token("peer-b")), "--target", ns)
		targetState(t, b, ns, "live")
		tb.waitFor("two connections", `document.querySelectorAll('#connections tbody tr[data-key]').length === 2`, 20*time.Second)
		tb.waitFor("two peers live on the namespace",
			`document.querySelector('#namespaces tbody tr[data-key=`+jsString(ns)+`]').cells[6].textContent.startsWith('2 live')`, 20*time.Second)
		tb.waitFor("the page was not reloaded", `window.__notReloaded === 'yes'`, time.Second)
		tb.waitFor("a ping's round trip", `Array.from(document.querySelectorAll('#connections tbody tr[data-key]')).every(r => / ms$/.test(r.cells[7].textContent))`, 10*time.Second)
		// The connection event is in the list of recent events.
		tb.waitFor("a channel event", `Array.from(document.querySelectorAll('#events li')).some(li => li.dataset.type === 'channel-state-changed')`, 10*time.Second)
		// Sparklines have data after a few status ticks, and a write shows as writes per second.
		hub.api().set(ns, map[string]any{"tick": 1})
		tb.waitFor("the writes sparkline", `document.querySelectorAll('#sparks polyline')[0].getAttribute('points').split(' ').length >= 2`, 10*time.Second)
		// Every state is a word (the page reads without colour).
		var unnamed int
		tb.eval(`Array.from(document.querySelectorAll('[data-state]')).filter(e => e.textContent !== e.dataset.state).length`, &unnamed)
		if unnamed != 0 {
			t.Errorf("%d state badges without their word", unnamed)
		}
		if os.Getenv("NOMICORE_DASHBOARD_DOCS") == "1" { // a few seconds of writes for the README's picture
			for i := range 12 {
				a.api().set(ns, map[string]any{"tick": i})
				time.Sleep(500 * time.Millisecond)
			}
		}
		tb.screenshot("hub-overview", "dashboard-hub.png")
		tb.noConsoleErrors()
	})

	t.Run("NamespacePageShowsTheDocumentAfterAWrite", func(t *testing.T) {
		tb := browser.newTab(t, "namespace")
		tb.do("open the namespace page", chromedp.Navigate(hub.admin+"/#/ns/"+ns))
		tb.waitFor("the document", `document.getElementById('doc-json').textContent.includes('hello from the walkthrough')`, 20*time.Second)
		tb.waitFor("the peers replicating it", `document.querySelectorAll('#sessions tbody tr[data-key]').length === 2`, 20*time.Second)
		// A write through a peer reaches the hub and the page, without a reload.
		a.api().set(ns, map[string]any{"written": "through peer-a while the page is open"})
		tb.waitFor("the write", `document.getElementById('doc-json').textContent.includes('through peer-a while the page is open')`, 20*time.Second)
		tb.waitFor("the namespace's events", `document.querySelectorAll('#events li[data-seq]').length > 0`, 10*time.Second)
		// The hub sent that write on to peer-b, which acknowledged it: the page shows the
		// live updates sent and acknowledged on peer-b's connection.
		tb.waitFor("updates sent and acknowledged", `Array.from(document.querySelectorAll('#sessions tbody tr[data-key^="peer-b "]')).some(r =>
			Number(r.cells[3].textContent) >= 1 && r.cells[4].textContent === r.cells[3].textContent && r.cells[5].textContent === '0')`, 20*time.Second)
		var foreign int
		tb.eval(`Array.from(document.querySelectorAll('#events li[data-seq]')).filter(li => li.textContent.includes('ns-') && !li.textContent.includes(`+jsString(ns[:11])+`)).length`, &foreign)
		if foreign != 0 {
			t.Errorf("%d events of other namespaces on the namespace page", foreign)
		}
		// Choosing roots: only meta (the identity), on demand.
		tb.do("choose the meta root only", chromedp.Click(chromedp.CSS(`#roots input[value="notes"]`)),
			chromedp.Click(chromedp.CSS(`#roots input[value="meta"]`)), chromedp.Click(chromedp.CSS(`#doc-show`)))
		tb.waitFor("meta only", `(t => t.includes('replicationId') && !t.includes('greeting'))(document.getElementById('doc-json').textContent)`, 10*time.Second)
		tb.screenshot("namespace")
		tb.noConsoleErrors()
	})

	t.Run("EpochBumpNeedsConfirmation", func(t *testing.T) {
		// A namespace of its own, replicated by peer-b, so the bump leaves the others alone.
		ns2 := hub.api().createNamespace()
		b := c.peers["peer-b"]
		b.api().json("POST", "/v1/targets", []byte(`{"namespaceId":"`+ns2+`"}`), 201, nil)
		targetState(t, b, ns2, "live")
		epoch := func() float64 {
			var st map[string]any
			hub.api().json("GET", "/v1/namespaces/"+ns2, nil, 200, &st)
			return st["replicationEpoch"].(float64)
		}
		before := epoch()

		tb := browser.newTab(t, "epoch")
		tb.do("open the namespace page", chromedp.Navigate(hub.admin+"/#/ns/"+ns2))
		tb.waitFor("the epoch", `document.getElementById('ns-facts').textContent.includes('Epoch`+fmt.Sprint(before)+`')`, 20*time.Second)
		tb.do("ask for a bump", chromedp.Click(chromedp.CSS(`#bump-epoch`)))
		tb.waitFor("the dialog", `document.getElementById('confirm').open`, 5*time.Second)
		var text string
		tb.eval(`document.getElementById('confirm').textContent`, &text)
		if !strings.Contains(text, "goes conflicted") || !strings.Contains(text, "until it is reset") {
			t.Errorf("the dialog does not name the consequence: %q", text)
		}
		var disabled bool
		tb.eval(`document.getElementById('confirm-ok').disabled`, &disabled)
		if !disabled {
			t.Fatal("the bump can be confirmed without ticking the consequence")
		}
		tb.screenshot("epoch-dialog")
		// Cancel: nothing happens.
		tb.do("cancel", chromedp.Click(chromedp.CSS(`#confirm-cancel`)))
		tb.waitFor("the dialog closed", `!document.getElementById('confirm').open`, 5*time.Second)
		time.Sleep(300 * time.Millisecond)
		if got := epoch(); got != before {
			t.Fatalf("cancelled, yet the epoch went from %v to %v", before, got)
		}
		// Confirm: the bump names the epoch it replaces, and the peer goes conflicted.
		tb.do("ask again, tick and confirm", chromedp.Click(chromedp.CSS(`#bump-epoch`)),
			chromedp.Click(chromedp.CSS(`#confirm-ack`)), chromedp.Click(chromedp.CSS(`#confirm-ok`)))
		tb.waitFor("the dialog closed", `!document.getElementById('confirm').open`, 10*time.Second)
		if got := epoch(); got != before+1 {
			t.Fatalf("confirmed, the epoch is %v; want %v", got, before+1)
		}
		tb.waitFor("the message", `document.getElementById('ns-msg').textContent.includes('The epoch is now `+fmt.Sprint(before+1)+`')`, 5*time.Second)
		targetState(t, b, ns2, "conflicted")
		tb.noConsoleErrors()

		// peer-b's dashboard says so, and its reset (confirmed) brings the replica back.
		pb := browser.newTab(t, "peer-b")
		pb.do("open peer-b's dashboard", chromedp.Navigate(b.admin+"/"))
		pb.waitFor("the conflicted target with its reason", rowStateExpr("namespaces", ns2)+` === 'conflicted' && document.querySelector('#namespaces tbody tr[data-key=`+jsString(ns2)+`]').textContent.includes('reset')`, 20*time.Second)
		pb.do("reset it", chromedp.Click(chromedp.CSS(`#namespaces tbody tr[data-key="`+ns2+`"] button[data-action=reset]`)))
		pb.waitFor("the reset dialog", `document.getElementById('confirm').open && document.getElementById('confirm-ok').disabled`, 5*time.Second)
		pb.do("tick and confirm", chromedp.Click(chromedp.CSS(`#confirm-ack`)), chromedp.Click(chromedp.CSS(`#confirm-ok`)))
		pb.waitFor("live again", rowStateExpr("namespaces", ns2)+` === 'live'`, 30*time.Second)
		targetState(t, b, ns2, "live")
		pb.noConsoleErrors()
	})

	t.Run("PeerShowsBootstrapThenLive", func(t *testing.T) {
		p := c.startPeer("peer-c", c.tokenFile("peer-c", c.token("peer-c")))
		tb := browser.newTab(t, "peer-c")
		tb.do("open peer-c's dashboard", chromedp.Navigate(p.admin+"/"))
		tb.waitFor("the hub connection ready", `document.querySelector('#link-facts [data-state]') && document.querySelector('#link-facts [data-state]').dataset.state === 'ready'`, 20*time.Second)
		tb.waitFor("no target yet", `document.querySelector('#namespaces tbody tr.empty')`, 5*time.Second)
		// Add the target through the page; it bootstraps, then goes live.
		tb.do("add the target", chromedp.SendKeys(chromedp.CSS(`#add-ns`), ns), chromedp.Click(chromedp.CSS(`#add-target button[type=submit]`)))
		tb.waitFor("live", rowStateExpr("namespaces", ns)+` === 'live'`, 30*time.Second)
		// The page's events show the bootstrap before live: opening → bootstrapping, the
		// snapshot imported, bootstrapping → live.
		var seq []string
		tb.waitFor("the bootstrap events", `Array.from(document.querySelectorAll('#events li[data-seq]')).some(li => li.textContent.includes('reconciling → live'))`, 10*time.Second)
		tb.eval(`Array.from(document.querySelectorAll('#events li[data-seq]')).reverse().map(li => li.dataset.type + ' ' + li.textContent)`, &seq)
		order := []string{"opening → bootstrapping", "bootstrap-imported", "bootstrapping → reconciling", "reconciling → live"}
		i := 0
		for _, line := range seq {
			if i < len(order) && strings.Contains(line, order[i]) {
				i++
			}
		}
		if i != len(order) {
			t.Fatalf("the events do not show %v in order; they are:\n%s", order, strings.Join(seq, "\n"))
		}
		tb.waitFor("the replica's size", `document.querySelector('#namespaces tbody tr[data-key=`+jsString(ns)+`]').cells[4].textContent.endsWith('B')`, 10*time.Second)
		tb.screenshot("peer-overview", "dashboard-peer.png")
		// The peer's page of the namespace shows its local document.
		tb.do("open the namespace's page", chromedp.Click(chromedp.CSS(`#namespaces a[href="#/ns/`+ns+`"]`)))
		tb.waitFor("the local document", `document.getElementById('doc-json').textContent.includes('hello from the walkthrough') && document.getElementById('reset-ns')`, 20*time.Second)
		tb.do("back to the overview", chromedp.NavigateBack())
		tb.waitFor("the overview", rowStateExpr("namespaces", ns)+` === 'live'`, 20*time.Second)
		// Removing the target needs its confirmation too; the replica stays, closed.
		tb.do("remove it", chromedp.Click(chromedp.CSS(`#namespaces tbody tr[data-key="`+ns+`"] button[data-action=remove]`)))
		tb.waitFor("the remove dialog", `document.getElementById('confirm').open && document.getElementById('confirm-ok').disabled && document.getElementById('confirm-text').textContent.includes('stops replicating')`, 5*time.Second)
		tb.do("tick and confirm", chromedp.Click(chromedp.CSS(`#confirm-ack`)), chromedp.Click(chromedp.CSS(`#confirm-ok`)))
		tb.waitFor("the replica kept, closed", rowStateExpr("namespaces", ns)+` === 'closed'`, 20*time.Second)
		if tg := p.api().target(ns); tg != nil {
			t.Fatalf("the target is still there: %v", tg)
		}
		tb.noConsoleErrors()
	})

	t.Run("PeerShowsChunkedBootstrapProgress", func(t *testing.T) {
		// A document of 4 MiB, eight times what one frame may carry (512 KiB): a fresh peer
		// bootstraps it as a chunked snapshot. peer-e reaches the hub through a link capped at
		// 1 MiB/s, so the bootstrap takes about four seconds, and its dashboard shows it
		// advancing, then live. Later, while peer-e is cut off, the hub takes 3 MiB more: the
		// catch-up is a chunked difference, shown as such on peer-e's page of the namespace.
		// The dashboard's hub pings every 2 s with a 1.5 s pong timeout: the link stays up
		// because the hub counts what peer-e's TCP acknowledged while the snapshot drains.
		const snapshotBytes, catchUpBytes = 4 << 20, 3 << 20
		big := hub.api().createNamespace()
		writeText(t, hub, big, snapshotBytes, 4<<20, 's')
		link, err := faultproxy.New(c.hubRepl)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { link.Close() })
		link.SetBandwidth(1 << 20)
		p := c.startPeer("peer-e", c.tokenFile("peer-e", c.token("peer-e")), "--hub-url", "ws://"+link.Addr()+"/v1/replication")
		t.Cleanup(p.stop) // after the tab closes (cleanups run last first)

		tb := browser.newTab(t, "peer-e")
		tb.do("open peer-e's dashboard", chromedp.Navigate(p.admin+"/"))
		tb.waitFor("the hub connection ready", `document.querySelector('#link-facts [data-state]') && document.querySelector('#link-facts [data-state]').dataset.state === 'ready'`, 20*time.Second)
		p.api().json("POST", "/v1/targets", []byte(`{"namespaceId":"`+big+`"}`), 201, nil)

		row := `document.querySelector('#namespaces tbody tr[data-key=` + jsString(big) + `]')`
		boot := watchTransfer(t, tb, row, "live", 60*time.Second)
		var values []float64
		for _, s := range boot {
			if s.State != "bootstrapping" || !s.Bar {
				continue
			}
			s.check(t, "bootstrap", "snapshot", snapshotBytes)
			if len(values) > 0 && s.Value < values[len(values)-1] {
				t.Errorf("the bar went back from %v to %v bytes", values[len(values)-1], s.Value)
			}
			if len(values) == 0 || s.Value != values[len(values)-1] {
				values = append(values, s.Value)
			}
		}
		if len(values) < 2 {
			t.Fatalf("the page showed the bootstrap's bar at %d value(s) %v; want it growing. What it showed:\n%s", len(values), values, samplesText(boot))
		}
		t.Logf("the bootstrap's bar went through %d values: %v", len(values), values)
		if last := boot[len(boot)-1]; last.Bar {
			t.Errorf("live, the row still shows a transfer: %q", last.Text)
		}
		sameState(t, big, 30*time.Second, hub, p)
		tb.screenshot("peer-bootstrapped")

		// The catch-up, on the peer's page of the namespace.
		tb.do("open the namespace's page", chromedp.Click(chromedp.CSS(`#namespaces a[href="#/ns/`+big+`"]`)))
		tb.waitFor("the namespace page, live", `document.querySelector('#ns-facts [data-state]') && document.querySelector('#ns-facts [data-state]').dataset.state === 'live'`, 20*time.Second)
		link.SetDown(true)
		link.Cut()
		tb.waitFor("not live while cut off", `document.querySelector('#ns-facts [data-state]').dataset.state !== 'live'`, 20*time.Second)
		writeText(t, hub, big, catchUpBytes, 4<<20, 'c')
		link.SetDown(false)
		state := `document.querySelector('#ns-facts [data-state]')`
		catchUp := watchTransfer(t, tb, `(`+state+` && `+state+`.closest('dd'))`, "live", 60*time.Second)
		seen := 0
		for _, s := range catchUp {
			if s.Bar {
				s.check(t, "catch-up", "catch-up", catchUpBytes)
				seen++
			}
		}
		if seen == 0 {
			t.Fatalf("the page never showed the catch-up's bar; it showed:\n%s", samplesText(catchUp))
		}
		if last := catchUp[len(catchUp)-1]; last.Bar {
			t.Errorf("live, the page still shows a transfer: %q", last.Text)
		}
		sameState(t, big, 30*time.Second, hub, p)
		tb.noConsoleErrors()
	})

	t.Run("PeerSaysWhyItIsNotConnected", func(t *testing.T) {
		// A peer whose hub address answers nothing: the page shows the backoff and the problem.
		p := c.startPeer("peer-d", c.tokenFile("peer-d", c.token("peer-d")), "--hub-url", "ws://"+freeAddr(t)+"/v1/replication")
		tb := browser.newTab(t, "peer-d")
		tb.do("open peer-d's dashboard", chromedp.Navigate(p.admin+"/"))
		tb.waitFor("the problem and the backoff", `(t => t.includes('cannot reach the hub') && /attempt \d+ \(dial-failed\), next try in/.test(t))(document.getElementById('link-facts').textContent)`, 20*time.Second)
		tb.waitFor("not ready, with the reason", `document.querySelector('#node-facts [data-state="not ready"]') && document.getElementById('node-facts').textContent.includes('replication connection is')`, 10*time.Second)
		tb.screenshot("peer-not-connected")
		tb.noConsoleErrors()
	})

	t.Run("SchemaReplacementNeedsConfirmation", func(t *testing.T) {
		tb := browser.newTab(t, "schema")
		tb.do("open the namespace page", chromedp.Navigate(hub.admin+"/#/ns/"+ns))
		tb.waitFor("the page", `document.getElementById('replace-schema') && document.getElementById('ns-facts').textContent.includes('Schemanone')`, 20*time.Second)
		tb.do("ask to replace the schema", chromedp.Click(chromedp.CSS(`#replace-schema`)))
		tb.waitFor("the dialog with its editor", `document.getElementById('confirm').open && document.getElementById('schema-definition')`, 5*time.Second)
		var text string
		tb.eval(`document.getElementById('confirm').textContent`, &text)
		if !strings.Contains(text, "re-arms") || !strings.Contains(text, "until its replica is reset") {
			t.Errorf("the dialog does not name the consequence: %q", text)
		}
		tb.do("write a definition", chromedp.SetValue(chromedp.CSS(`#schema-definition`), `{"notes":{"type":"map"}}`),
			chromedp.Click(chromedp.CSS(`#confirm-ack`)), chromedp.Click(chromedp.CSS(`#confirm-ok`)))
		tb.waitFor("the dialog closed", `!document.getElementById('confirm').open`, 10*time.Second)
		var st struct {
			Schema *struct{ SemanticFingerprint string }
		}
		hub.api().json("GET", "/v1/namespaces/"+ns, nil, 200, &st)
		if st.Schema == nil || st.Schema.SemanticFingerprint == "" {
			t.Fatalf("no schema after the confirmed replacement: %+v", st)
		}
		tb.waitFor("the new fingerprint on the page", `document.getElementById('ns-facts').textContent.includes(`+jsString(st.Schema.SemanticFingerprint)+`)`, 10*time.Second)
		tb.noConsoleErrors()
	})

	t.Run("EditorsCounted", func(t *testing.T) {
		// A real editor (the editor page of peer-a's client listener) on the namespace: the
		// peer's dashboard counts it, and the count goes when the editor leaves.
		tok := c.clientToken("peer-a", "dashboard-viewer")
		ed := browser.newTab(t, "editor")
		ed.do("open the editor page", chromedp.Navigate(fmt.Sprintf("http://%s/edit/%s?token=%s", a.client, ns, tok)))
		tb := browser.newTab(t, "peer-a")
		tb.do("open peer-a's dashboard", chromedp.Navigate(a.admin+"/"))
		editors := `document.querySelector('#namespaces tbody tr[data-key=` + jsString(ns) + `]').cells[7].textContent`
		tb.waitFor("one editor", editors+` === '1'`, 20*time.Second)
		ed.do("leave the editor page", chromedp.Navigate("about:blank"))
		tb.waitFor("no editor", editors+` === '0'`, 20*time.Second)
		tb.noConsoleErrors()
	})

	t.Run("AsksForTheToken", func(t *testing.T) { asksForTheToken(t, browser) })

	t.Run("PhoneWidth", func(t *testing.T) {
		tb := browser.newTab(t, "phone")
		tb.do("a phone's viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulatePortrait, chromedp.EmulateMobile))
		tb.do("open the hub's dashboard", chromedp.Navigate(hub.admin+"/"))
		tb.waitFor("the connections", `document.querySelectorAll('#connections tbody tr[data-key]').length >= 2`, 20*time.Second)
		var overflow int
		tb.eval(`document.documentElement.scrollWidth - window.innerWidth`, &overflow)
		if overflow > 0 {
			t.Errorf("the page is %d px wider than a phone's screen", overflow)
		}
		var display string
		tb.eval(`getComputedStyle(document.querySelector('#namespaces tbody tr[data-key]')).display`, &display)
		if display != "block" {
			t.Errorf("at phone width a table row is displayed %q, not as a card", display)
		}
		tb.screenshot("phone")
		tb.noConsoleErrors()
	})

	t.Run("KeyboardOnly", func(t *testing.T) {
		tb := browser.newTab(t, "keyboard")
		tb.do("open the hub's dashboard", chromedp.Navigate(hub.admin+"/"))
		tb.waitFor("the namespace link", `document.querySelector('#namespaces a[href="#/ns/`+ns+`"]')`, 20*time.Second)
		// Tab until the namespace's link has the focus, then Enter opens its page.
		reached := false
		for range 60 {
			tb.do("tab", chromedp.KeyEvent("\t"))
			var focused string
			tb.eval(`document.activeElement && document.activeElement.getAttribute('href') || ''`, &focused)
			if focused == "#/ns/"+ns {
				reached = true
				break
			}
		}
		if !reached {
			t.Fatal("tabbing never reached the namespace's link")
		}
		var visible bool
		tb.eval(`getComputedStyle(document.activeElement).outlineStyle !== 'none'`, &visible)
		if !visible {
			t.Error("the focused link shows no outline")
		}
		tb.do("enter", chromedp.KeyEvent("\r"))
		tb.waitFor("the namespace page", `location.hash === '#/ns/`+ns+`' && document.getElementById('bump-epoch')`, 10*time.Second)
		tb.do("focus the bump button and press Enter", chromedp.Focus(chromedp.CSS(`#bump-epoch`)), chromedp.KeyEvent("\r"))
		tb.waitFor("the dialog with the focus on Cancel", `document.getElementById('confirm').open && document.activeElement.id === 'confirm-cancel'`, 5*time.Second)
		tb.do("escape", chromedp.KeyEvent("\u001b"))
		tb.waitFor("the dialog closed", `!document.getElementById('confirm').open`, 5*time.Second)
		tb.noConsoleErrors()
	})
}

// transferSample is what the page showed of a target at one moment: its state word and, while
// a transfer is received, its progress bar and the words beside it.
type transferSample struct {
	State      string
	Bar        bool
	Value, Max float64
	Text       string
}

// bytesOfTotal reads "1.5 MiB of 4.0 MiB" (sizes in B, KiB or MiB).
var bytesOfTotal = regexp.MustCompile(`(\d+(?:\.\d+)?) (B|KiB|MiB) of (\d+(?:\.\d+)?) (B|KiB|MiB)`)

// check fails unless the sample shows a transfer of about total bytes (the encoded update
// has a few bytes more than its text), named by word, whose text says the bar's bytes of
// the bar's total.
func (s transferSample) check(t *testing.T, what, word string, total int) {
	t.Helper()
	if s.Max < float64(total) || s.Max > float64(total+64<<10) || s.Value <= 0 || s.Value >= s.Max {
		t.Errorf("%s: a bar at %v of %v bytes; want part of about %d", what, s.Value, s.Max, total)
	}
	if !strings.Contains(strings.ToLower(s.Text), word) {
		t.Errorf("%s: the transfer is shown as %q, which does not say %q", what, s.Text, word)
	}
	m := bytesOfTotal.FindStringSubmatch(s.Text)
	if m == nil {
		t.Errorf("%s: %q does not name the bytes received of the total", what, s.Text)
		return
	}
	unit := map[string]float64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20}
	got, _ := strconv.ParseFloat(m[1], 64)
	of, _ := strconv.ParseFloat(m[3], 64)
	// The page rounds to one decimal (or to whole units from 10 up).
	if d := got*unit[m[2]] - s.Value; d > 0.51*unit[m[2]] || d < -0.51*unit[m[2]] {
		t.Errorf("%s: %q says %s %s received; the bar says %v bytes", what, s.Text, m[1], m[2], s.Value)
	}
	if d := of*unit[m[4]] - s.Max; d > 0.51*unit[m[4]] || d < -0.51*unit[m[4]] {
		t.Errorf("%s: %q says a total of %s %s; the bar says %v bytes", what, s.Text, m[3], m[4], s.Max)
	}
}

// watchTransfer samples, every 50 ms, the state word and the progress bar within the
// element el (a JavaScript expression) until the state is want, and returns the samples.
func watchTransfer(t *testing.T, tb *tab, el, want string, timeout time.Duration) []transferSample {
	t.Helper()
	expr := `(el => { if (!el) return null; const s = el.querySelector('[data-state]'); const bar = el.querySelector('progress');
		return {state: s ? s.dataset.state : '', bar: !!bar, value: bar ? bar.value : 0, max: bar ? bar.max : 0,
			text: bar ? bar.parentElement.textContent : ''}; })(` + el + `)`
	var samples []transferSample
	deadline := time.Now().Add(timeout)
	for {
		var s *transferSample
		if err := tb.eval(expr, &s); err == nil && s != nil {
			samples = append(samples, *s)
			if s.State == want {
				return samples
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not %s within %v; the page showed:\n%s", tb.name, want, timeout, samplesText(samples))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// samplesText lists the distinct samples, in order.
func samplesText(samples []transferSample) string {
	var b strings.Builder
	var last transferSample
	for i, s := range samples {
		if i == 0 || s != last {
			fmt.Fprintf(&b, "%s bar=%v %v/%v %q\n", s.State, s.Bar, s.Value, s.Max, s.Text)
		}
		last = s
	}
	return b.String()
}

// asksForTheToken: on an API with an admin token the page asks for it, keeps it in
// sessionStorage (never in the URL), and streams with it.
func asksForTheToken(t *testing.T, browser *dashBrowser) {
	c := newCluster(t)
	tokenFile := filepath.Join(c.dir, "admin.token")
	if err := os.WriteFile(tokenFile, []byte("admin-secret-for-the-dashboard\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hub := c.startHub("--admin-token-file", tokenFile)
	tb := browser.newTab(t, "token")
	tb.do("open the dashboard", chromedp.Navigate(hub.admin+"/"))
	tb.waitFor("the token form", `!document.getElementById('auth').hidden && document.activeElement.id === 'token'`, 10*time.Second)
	tb.do("give the token", chromedp.SendKeys(chromedp.CSS(`#token`), "admin-secret-for-the-dashboard"),
		chromedp.Click(chromedp.CSS(`#auth-form button[type=submit]`)))
	tb.waitFor("the dashboard", `document.getElementById('auth').hidden && document.getElementById('node-title').textContent === 'Hub'`, 10*time.Second)
	tb.waitFor("live", `document.getElementById('live').textContent.startsWith('Live')`, 10*time.Second)
	var where struct {
		Stored string
		URL    string
	}
	tb.eval(`({stored: sessionStorage.getItem('nomicore.adminToken'), url: location.href})`, &where)
	if where.Stored != "admin-secret-for-the-dashboard" || strings.Contains(where.URL, "secret") {
		t.Fatalf("token kept %q, URL %q", where.Stored, where.URL)
	}
	// A reload keeps the session; forgetting the token asks again.
	tb.do("reload", chromedp.Reload())
	tb.waitFor("the dashboard after a reload", `document.getElementById('auth').hidden && document.getElementById('node-title').textContent === 'Hub'`, 10*time.Second)
	tb.do("forget the token", chromedp.Click(chromedp.CSS(`#forget`)))
	tb.waitFor("the token form again", `!document.getElementById('auth').hidden && sessionStorage.getItem('nomicore.adminToken') === null`, 5*time.Second)
	tb.noConsoleErrors()
}

// A hub with more namespaces than one page: the overview's table shows a page of them with
// the count and buttons to the others, and a search box selects namespaces by id or owner —
// also those on no page yet. The page stays short (103 namespaces made it 4,457 pixels
// long). Its icon is served.
func TestE2E_DashboardNamespaceSearchAndPages(t *testing.T) {
	browser := startDashBrowser(t)
	c := newCluster(t)
	hub := c.startHub()
	var ids []string
	for range 102 {
		ids = append(ids, hub.api().createNamespace())
	}
	var alice struct{ NamespaceID string }
	hub.api().json("POST", "/v1/namespaces", []byte(`{"owner":"alice"}`), 201, &alice)
	ids = append(ids, alice.NamespaceID)
	slices.Sort(ids) // none loaded: the table's order is by id

	tb := browser.newTab(t, "pages")
	tb.do("open the hub's dashboard", chromedp.Navigate(hub.admin+"/"))
	rows := `Array.from(document.querySelectorAll('#namespaces tbody tr[data-key]')).map(r => r.dataset.key)`
	count := `document.getElementById('ns-count').textContent`
	tb.waitFor("the first page", count+` === '1–25 of 103 (the loaded ones first)' && `+rows+`.length === 25`, 20*time.Second)
	var shown []string
	tb.eval(rows, &shown)
	if !slices.Equal(shown, ids[:25]) {
		t.Fatalf("the first page shows %v, want %v", shown, ids[:25])
	}
	var height float64
	tb.eval(`document.documentElement.scrollHeight`, &height)
	if height > 2200 {
		t.Errorf("the overview is %v pixels high with 103 namespaces", height)
	}
	tb.screenshot("first-page")

	tb.do("next page", chromedp.Click(chromedp.CSS(`#ns-next`)))
	tb.waitFor("the second page", count+` === '26–50 of 103 (the loaded ones first)'`, 10*time.Second)
	tb.eval(rows, &shown)
	if !slices.Equal(shown, ids[25:50]) {
		t.Fatalf("the second page shows %v, want %v", shown, ids[25:50])
	}
	for range 3 {
		tb.do("next page", chromedp.Click(chromedp.CSS(`#ns-next`)))
	}
	tb.waitFor("the last page", count+` === '101–103 of 103 (the loaded ones first)' && document.getElementById('ns-next').disabled`, 10*time.Second)

	// A namespace of the first page, found from the last one by a piece of its id.
	tb.do("search an id", chromedp.SendKeys(chromedp.CSS(`#ns-search`), ids[7][3:15]))
	tb.waitFor("one namespace found", rows+`.join() === `+jsString(ids[7])+` && `+count+`.includes('of the 1 matching')`, 10*time.Second)
	tb.do("search an owner", chromedp.SetValue(chromedp.CSS(`#ns-search`), "ALICE"), chromedp.SendKeys(chromedp.CSS(`#ns-search`), " "))
	tb.waitFor("alice's namespace", rows+`.join() === `+jsString(alice.NamespaceID), 10*time.Second)
	tb.do("search nothing there", chromedp.SetValue(chromedp.CSS(`#ns-search`), "no-such-namespace"), chromedp.SendKeys(chromedp.CSS(`#ns-search`), "x"))
	tb.waitFor("none found, said so", rows+`.length === 0 && `+count+`.startsWith('None of the 103 namespaces matches')`, 10*time.Second)
	tb.screenshot("search")

	var icon string
	tb.eval(`document.querySelector('link[rel=icon]').href`, &icon)
	if resp, err := http.Get(icon); err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/svg+xml" {
		t.Errorf("the dashboard's icon %q: %v %v", icon, resp, err)
	} else {
		resp.Body.Close()
	}
	tb.noConsoleErrors()
}

// Deleting a namespace from its page on the hub's dashboard: the dialog says what follows,
// and its button stays disabled until the consequence is ticked and the namespace's name or
// id typed in full; cancelling deletes nothing; confirming sends the epoch the page showed,
// deletes the namespace (its peer drops it), leaves one audit line in the hub's log and
// shows that it was deleted.
func TestE2E_DashboardDeleteNeedsTheNameTyped(t *testing.T) {
	browser := startDashBrowser(t)
	c := newCluster(t)
	hub := c.startHub("--log-level", "info")
	var created struct{ NamespaceID string }
	hub.api().json("POST", "/v1/namespaces", []byte(`{"owner":"default","name":"minutes","labels":{"team":"red"}}`), 201, &created)
	ns := created.NamespaceID
	a := c.startPeer("peer-a", c.tokenFile("peer-a", c.token("peer-a")), "--target", ns)
	targetState(t, a, ns, "live")
	hub.api().set(ns, map[string]any{"agenda": "to be deleted"})

	tb := browser.newTab(t, "delete")
	tb.do("open the namespace page", chromedp.Navigate(hub.admin+"/#/ns/"+ns))
	tb.waitFor("its name and epoch", `(t => t.includes('Nameminutes') && t.includes('Labelsteam=red') && t.includes('Epoch1'))(document.getElementById('ns-facts').textContent)`, 20*time.Second)
	disabled := func() bool {
		var d bool
		if err := tb.eval(`document.getElementById('confirm-ok').disabled`, &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	tb.do("ask for the delete", chromedp.Click(chromedp.CSS(`#delete-ns`)))
	tb.waitFor("the dialog", `document.getElementById('confirm').open && document.getElementById('delete-confirm')`, 5*time.Second)
	var text string
	tb.eval(`document.getElementById('confirm').textContent`, &text)
	for _, want := range []string{"every peer", "never used again", "cannot be undone", "minutes"} {
		if !strings.Contains(text, want) {
			t.Errorf("the dialog does not say %q: %q", want, text)
		}
	}
	tb.do("tick the consequence only", chromedp.Click(chromedp.CSS(`#confirm-ack`)))
	if !disabled() {
		t.Fatal("the delete can be confirmed without typing the namespace's name or id")
	}
	tb.do("type a part of the name", chromedp.SendKeys(chromedp.CSS(`#delete-confirm`), "minute"))
	if !disabled() {
		t.Fatal("the delete can be confirmed with a part of the name typed")
	}
	tb.do("type the rest", chromedp.SendKeys(chromedp.CSS(`#delete-confirm`), "s"))
	if disabled() {
		t.Fatal("the name typed and the consequence ticked, the delete still cannot be confirmed")
	}
	tb.do("untick", chromedp.Click(chromedp.CSS(`#confirm-ack`)))
	if !disabled() {
		t.Fatal("the delete can be confirmed without the consequence ticked")
	}
	tb.screenshot("delete-dialog")
	tb.do("cancel", chromedp.Click(chromedp.CSS(`#confirm-cancel`)))
	tb.waitFor("the dialog closed", `!document.getElementById('confirm').open`, 5*time.Second)
	time.Sleep(300 * time.Millisecond)
	hub.api().json("GET", "/v1/namespaces/"+ns, nil, 200, nil)

	// Confirmed with the id typed this time.
	tb.do("ask again", chromedp.Click(chromedp.CSS(`#delete-ns`)))
	tb.waitFor("the dialog", `document.getElementById('confirm').open`, 5*time.Second)
	tb.do("type the id, tick and confirm", chromedp.SendKeys(chromedp.CSS(`#delete-confirm`), ns),
		chromedp.Click(chromedp.CSS(`#confirm-ack`)), chromedp.Click(chromedp.CSS(`#confirm-ok`)))
	tb.waitFor("the dialog closed", `!document.getElementById('confirm').open`, 10*time.Second)
	tb.waitFor("the page says it was deleted", `(e => e && e.textContent.includes('was deleted'))(document.getElementById('ns-deleted'))`, 10*time.Second)
	if status, body := hub.api().do("GET", "/v1/namespaces/"+ns, nil); status != 404 || !strings.Contains(string(body), "NAMESPACE_DELETED") {
		t.Fatalf("after the delete from the dashboard: %d %s", status, body)
	}
	eventually(t, 30*time.Second, "peer-a drops the target", func() error {
		if tg := a.api().target(ns); tg != nil {
			return fmt.Errorf("target %v", tg["state"])
		}
		return nil
	})
	var deletes []map[string]any
	for _, l := range logLines(t, hub) {
		if l["msg"] == "admin action" && l["action"] == "namespace-deleted" {
			deletes = append(deletes, l)
		}
	}
	if len(deletes) != 1 || deletes[0]["namespaceId"] != ns || deletes[0]["name"] != "minutes" || deletes[0]["replicationEpoch"] != 1.0 ||
		deletes[0]["level"] != "INFO" {
		t.Fatalf("audit lines of the delete: %v", deletes)
	}
	tb.noConsoleErrors()
}
