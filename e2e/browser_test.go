package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The browser tests drive Debian's chromium (apt-get install chromium; .ci/run installs it),
// headless, through chromedp. One browser serves the whole test binary: the first test that
// asks for one starts it, TestMain stops it after the last test. Each test has a browser
// context of its own (its own cookies, storage and cache, as a separate profile would), and
// each page a tab in it; the test's end closes them.
const chromiumPath = "/usr/bin/chromium"

// theBrowser is the test binary's one Chromium.
var theBrowser struct {
	mu      sync.Mutex      // guards the fields below; held while the browser starts
	ctx     context.Context // the browser's first context, nil until it started
	stop    func()          // stops the browser and removes its profile
	err     error           // why it did not start: every test that asks fails with it
	started bool            // a start was tried
}

// browserFor returns a browser context of the test's own in the test binary's Chromium
// (starting it on first use), closed when the test ends; chromedp.NewContext on it opens a
// tab. Without chromium the test is skipped loudly (fails under NOMICORE_REQUIRE_ORACLE=1,
// as in CI).
func browserFor(t *testing.T) context.Context {
	t.Helper()
	if _, err := exec.LookPath(chromiumPath); err != nil {
		msg := "chromium is not installed (apt-get install -y chromium): " + err.Error()
		if os.Getenv("NOMICORE_REQUIRE_ORACLE") == "1" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPED LOUDLY: " + msg)
	}
	browser, err := sharedBrowser()
	if err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	// The first run creates the browser context and its first tab, which live as long as
	// this run's context: no timeout here.
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		t.Fatalf("opening a browser context: %v", err)
	}
	t.Cleanup(cancel)
	return ctx
}

// sharedBrowser starts the test binary's Chromium once and returns its first context.
func sharedBrowser() (context.Context, error) {
	b := &theBrowser
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started {
		return b.ctx, b.err
	}
	b.started = true
	profile, err := os.MkdirTemp("", "nomicore-e2e-chromium-")
	if err != nil {
		b.err = err
		return nil, err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.UserDataDir(profile), // a fresh profile
		chromedp.NoSandbox,            // as root there is no sandbox to use
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.WindowSize(1280, 800),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	stop := func() { cancel(); cancelAlloc(); os.RemoveAll(profile) }
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		stop()
		b.err = err
		return nil, err
	}
	b.ctx, b.stop = ctx, stop
	return ctx, nil
}

// stopBrowser stops the test binary's Chromium, if a test started it (TestMain, at the end).
func stopBrowser() {
	b := &theBrowser
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stop != nil {
		b.stop()
		b.ctx, b.stop = nil, nil
	}
}

// artifactDir is where a failing browser test leaves its screenshots: $NOMICORE_ARTIFACTS
// or e2e/artifacts (ignored by git).
func artifactDir(t *testing.T) string {
	dir := os.Getenv("NOMICORE_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(filepath.Dir(ywsDir()), "artifacts")
	}
	dir = filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("artifacts: %v", err)
	}
	return dir
}

// screenshotsOnFailure keeps a full-page screenshot of each tab when the test failed.
func screenshotsOnFailure(t *testing.T, tabs map[string]context.Context) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		dir := artifactDir(t)
		for name, ctx := range tabs {
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100)) // quality 100: PNG
			cancel()
			if err != nil {
				t.Logf("screenshot of %s: %v", name, err)
				continue
			}
			path := filepath.Join(dir, name+".png")
			if err := os.WriteFile(path, png, 0o644); err == nil {
				t.Logf("screenshot of %s: %s", name, path)
			}
		}
	})
}

// A real browser opens the editor page on two peers; what is typed in one appears in the
// other (through the hub), and in both peers' documents.
func TestE2E_Browser_EditorPageOnTwoPeers(t *testing.T) {
	browser := browserFor(t)
	_, ns, _, a, b, tok := editorCluster(t)
	tabA, cancelA := chromedp.NewContext(browser)
	t.Cleanup(cancelA)
	tabB, cancelB := chromedp.NewContext(browser)
	t.Cleanup(cancelB)
	for _, tab := range []context.Context{tabA, tabB} {
		// The first run on a tab context creates the tab, which lives as long as that
		// run's context: without a timeout here, the later runs may have one.
		if err := chromedp.Do(tab); err != nil {
			t.Fatalf("opening a tab: %v", err)
		}
	}
	screenshotsOnFailure(t, map[string]context.Context{"peer-a": tabA, "peer-b": tabB})

	open := func(tab context.Context, p *proc, token string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(tab, 30*time.Second)
		defer cancel()
		url := fmt.Sprintf("http://%s/edit/%s?token=%s", p.client, ns, token)
		if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitEnabled(chromedp.ID("body"))); err != nil {
			t.Fatalf("opening the editor page on %s: %v", p.name, err)
		}
	}
	// peer-b's tab first: the tab opened last is in front, and keys go to the front tab.
	open(tabB, b, tok["peer-b"])
	open(tabA, a, tok["peer-a"])

	typed := "typed in a real browser on peer-a"
	ctx, cancel := context.WithTimeout(tabA, 30*time.Second)
	err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("body")), chromedp.SendKeys(chromedp.ID("body"), typed))
	cancel()
	if err != nil {
		t.Fatalf("typing: %v", err)
	}
	var got string
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(tabB, 5*time.Second)
		var err error
		got, err = chromedp.Run(ctx, chromedp.Value(chromedp.ID("body")))
		cancel()
		if err == nil && got == typed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("peer-b's page shows %q (err %v), want %q", got, err, typed)
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitBody(t, ns, typed, a, b)
	// The page shows its status and the presence list (node-local awareness).
	ctx, cancel = context.WithTimeout(tabB, 10*time.Second)
	defer cancel()
	if status, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("status"))); err != nil || status != "synced" {
		t.Errorf("peer-b's page status %q (%v)", status, err)
	}
}

// The editor page of a read-only client token shows that it is read-only and cannot be
// typed into from the moment it loads — not "synced" and editable until the first
// keystroke is refused. The text the others write still shows.
func TestE2E_Browser_ReadOnlyEditorPage(t *testing.T) {
	browser := browserFor(t)
	c := newCluster(t)
	hub := c.startHub()
	ns := hub.api().createNamespace()
	reader := c.clientToken("hub", "reader", "--read-only")
	tab, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	screenshotsOnFailure(t, map[string]context.Context{"reader": tab})
	eval := func(expr string) (v any) {
		t.Helper()
		ctx, cancel := context.WithTimeout(tab, 10*time.Second)
		defer cancel()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[any](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("http://%s/edit/%s?token=%s", hub.client, ns, reader)))
	cancel()
	if err != nil {
		t.Fatalf("opening the editor page: %v", err)
	}
	// The page has an icon, served (browsers ask for one).
	if resp, err := http.Get(fmt.Sprint(eval(`document.querySelector('link[rel=icon]').href`))); err != nil ||
		resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/svg+xml" {
		t.Errorf("the editor page's icon: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// From the start, before the document arrived.
	if ro := eval(`document.getElementById('body').readOnly`); ro != true {
		t.Fatalf("the text area of a read-only token is not read-only when the page loads (readOnly %v)", ro)
	}
	written := strings.Repeat("w", 20)
	writeText(t, hub, ns, len(written), 8192, 'w') // by someone else, through the admin API
	deadline := time.Now().Add(30 * time.Second)
	for eval(`document.getElementById('body').value`) != written {
		if time.Now().After(deadline) {
			t.Fatalf("the read-only page shows %q", eval(`document.getElementById('body').value`))
		}
		time.Sleep(100 * time.Millisecond)
	}
	status := fmt.Sprint(eval(`document.getElementById('status').textContent`))
	notice := fmt.Sprint(eval(`(n => n.hidden ? '' : n.textContent)(document.getElementById('notice'))`))
	if !strings.Contains(status, "synced") || !strings.Contains(status, "read-only") || !strings.Contains(strings.ToLower(notice), "read-only") {
		t.Fatalf("the page says %q, notice %q; want both to say read-only", status, notice)
	}
	// Keys change nothing: not on the page, not in the document.
	ctx, cancel = context.WithTimeout(tab, 30*time.Second)
	err = chromedp.Do(ctx, chromedp.Click(chromedp.ID("body")), chromedp.SendKeys(chromedp.ID("body"), "typed anyway"))
	cancel()
	if err != nil {
		t.Fatalf("typing: %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	if v := eval(`document.getElementById('body').value`); v != written {
		t.Fatalf("the read-only page took keys: %q", v)
	}
	if got := bodyText(t, hub, ns); got != written {
		t.Fatalf("the document reads %q", got)
	}
	if v := hub.api().metric(`nomicore_client_refused_updates_total{reason="read-only",side="hub"}`); v != 0 {
		t.Fatalf("the page sent %v updates the hub refused: it should not have let them be typed", v)
	}
}
