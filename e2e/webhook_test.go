package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nomicore/nomicore/yjs"
)

// webhookReceiver is an application's webhook endpoint, written here from the documented
// format alone: it checks each request's Nomicore-Signature (HMAC-SHA256 of "UNIX." + body
// with the shared secret, and a time near now), reads the body's six fields and nothing
// else, and keeps the deliveries in the order they arrived. It can be taken down (its
// listener closed: connections are refused) and brought up again on the same address.
type webhookReceiver struct {
	t      *testing.T
	addr   string
	secret []byte

	mu        sync.Mutex // guards the fields below
	srv       *http.Server
	delay     time.Duration // how long each request takes to answer
	requests  int
	inflight  int // requests being answered
	dupes     int
	badSig    []string
	firstSeen []webhookBody              // each deliveryId once, in the order first received
	seen      map[string]bool            // deliveryIds received
	covered   map[string]yjs.StateVector // namespace → union of the delivered state vectors
	kinds     map[string]int
}

type webhookBody struct {
	DeliveryID  string `json:"deliveryId"`
	Cursor      string `json:"cursor"`
	NamespaceID string `json:"namespaceId"`
	Kind        string `json:"kind"`
	StateVector string `json:"stateVector"`
	At          string `json:"at"`
}

func newWebhookReceiver(t *testing.T, secret []byte) *webhookReceiver {
	r := &webhookReceiver{t: t, addr: freeAddr(t), secret: secret, seen: map[string]bool{}, covered: map[string]yjs.StateVector{}, kinds: map[string]int{}}
	r.up()
	t.Cleanup(r.down)
	return r
}

func (r *webhookReceiver) url() string { return "http://" + r.addr + "/hooks/nomicore?src=e2e" }

func (r *webhookReceiver) up() {
	r.t.Helper()
	var ln net.Listener
	var err error
	for range 100 { // the port a moment after it was closed
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		r.t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 5 * time.Second}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go srv.Serve(ln)
}

func (r *webhookReceiver) down() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// checkSignature is the receiver's check of the header t=UNIX,v1=HEX.
func (r *webhookReceiver) checkSignature(header string, body []byte) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("no time in %q", header)
	}
	if d := time.Since(time.Unix(sec, 0)); d > 5*time.Minute || d < -time.Minute {
		return fmt.Errorf("signed %v ago", d)
	}
	got, err := hex.DecodeString(sig)
	if err != nil {
		return fmt.Errorf("v1 is not hex in %q", header)
	}
	m := hmac.New(sha256.New, r.secret)
	m.Write([]byte(ts + "."))
	m.Write(body)
	if !hmac.Equal(got, m.Sum(nil)) {
		return errors.New("the HMAC does not match")
	}
	return nil
}

func (r *webhookReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	// What arrives is taken in the order it arrives; the answer may take a while (delay).
	r.mu.Lock()
	delay := r.delay
	r.inflight++
	r.mu.Unlock()
	defer func() {
		time.Sleep(delay)
		r.mu.Lock()
		r.inflight--
		r.mu.Unlock()
	}()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	if req.Method != "POST" || req.URL.Path != "/hooks/nomicore" || req.Header.Get("Content-Type") != "application/json" {
		r.badSig = append(r.badSig, fmt.Sprintf("%s %s %s", req.Method, req.URL, req.Header.Get("Content-Type")))
		http.Error(w, "unexpected request", 400)
		return
	}
	if err := r.checkSignature(req.Header.Get("Nomicore-Signature"), body); err != nil {
		r.badSig = append(r.badSig, err.Error())
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var b webhookBody
	if err := dec.Decode(&b); err != nil || b.DeliveryID == "" || b.Cursor == "" || b.NamespaceID == "" || b.Kind == "" || b.At == "" {
		r.badSig = append(r.badSig, fmt.Sprintf("body %s: %v", body, err))
		http.Error(w, "bad body", 400)
		return
	}
	if _, err := time.Parse(time.RFC3339Nano, b.At); err != nil {
		r.badSig = append(r.badSig, "at: "+err.Error())
	}
	if r.seen[b.DeliveryID] {
		r.dupes++
		w.WriteHeader(204)
		return
	}
	r.seen[b.DeliveryID] = true
	r.firstSeen = append(r.firstSeen, b)
	r.kinds[b.Kind]++
	if raw, err := hex.DecodeString(b.StateVector); err == nil && len(raw) > 0 {
		if sv, err := yjs.DecodeStateVector(raw); err == nil {
			cov := r.covered[b.NamespaceID]
			if cov == nil {
				cov = yjs.StateVector{}
				r.covered[b.NamespaceID] = cov
			}
			for c, k := range sv {
				cov[c] = max(cov[c], k)
			}
		}
	}
	w.WriteHeader(204)
}

// missing returns the acknowledged writes no delivery stands for.
func (r *webhookReceiver) missing(acks []ackedWrite) []ackedWrite {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ackedWrite
	for _, a := range acks {
		if r.covered[a.ns][a.client] < a.clock {
			out = append(out, a)
		}
	}
	return out
}

// check fails the test on a refused signature or body, or deliveries out of cursor order.
func (r *webhookReceiver) check() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.badSig) > 0 {
		r.t.Fatalf("%d requests refused by the receiver, first: %s", len(r.badSig), r.badSig[0])
	}
	// Each delivery is after the one before: ahead in some log stream (on a single hub, a
	// larger number). A hub cluster's node that takes over resumes after the saved cursor
	// and may merge the streams otherwise than the node before it, so its first delivery
	// need not be behind nothing the other delivered — but it is ahead somewhere.
	last := "0"
	for _, b := range r.firstSeen {
		ahead, _, err := cursorCompare(last, b.Cursor)
		if err != nil || !ahead {
			r.t.Fatalf("delivery %+v after cursor %s: out of order (%v)", b, last, err)
		}
		last = b.Cursor
	}
}

// writeFor writes with w to its namespaces until ctx ends, and returns the acknowledged
// writes.
func writeFor(ctx context.Context, w *feedWriter, every time.Duration) []ackedWrite {
	var acks []ackedWrite
	for i := 0; ctx.Err() == nil; i++ {
		if a, ok := w.write(ctx, w.nss[i%len(w.nss)], i); ok {
			acks = append(acks, a)
		}
		select {
		case <-ctx.Done():
		case <-time.After(every):
		}
	}
	return acks
}

// TestE2E_Webhooks_DownThenUpAndKill: a hub delivers its change feed to a receiver written
// here. The receiver is down for 30 s while namespaces are created and written; once it is
// up again it gets a change for every acknowledged write and every creation, in cursor
// order, each signed. Then, with the receiver answering slowly, the hub is killed (SIGKILL)
// in the middle of its deliveries and restarted: nothing is lost (a change may come twice,
// with the same deliveryId). The endpoint's state is in /v1/webhooks and /metrics.
func TestE2E_Webhooks_DownThenUpAndKill(t *testing.T) {
	t.Parallel()
	secret := []byte("e2e-webhook-secret-0123456789abcdef")
	c := newCluster(t)
	secretFile := filepath.Join(c.dir, "webhook.secret")
	if err := os.WriteFile(secretFile, append(secret, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	rcv := newWebhookReceiver(t, secret)
	flags := []string{"--webhook-url", rcv.url(), "--webhook-secret-file", secretFile, "--webhook-debounce", "200ms", "--webhook-max-backoff", "2s"}
	hub := c.startHub(flags...)
	api := hub.api()
	nss := []string{api.createNamespace(), api.createNamespace()}
	w := newFeedWriter(hub.admin, 5000, nss)

	// Up: a few writes arrive.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	acks := writeFor(ctx, w, 50*time.Millisecond)
	cancel()
	eventually(t, 20*time.Second, "the first writes delivered", func() error {
		if m := rcv.missing(acks); len(m) > 0 {
			return fmt.Errorf("%d of %d writes not delivered", len(m), len(acks))
		}
		return nil
	})

	// Down for 30 s, while the hub takes writes and a new namespace.
	rcv.down()
	downAt := time.Now()
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	third := api.createNamespace()
	w.nss = append(w.nss, third)
	w.docs[third] = yjs.NewDoc(yjs.WithClientID(5100))
	acks = append(acks, writeFor(ctx, w, 100*time.Millisecond)...)
	cancel()
	var st struct {
		Webhooks []struct {
			URL, State, LastError string
			Failed                uint64
		}
	}
	api.json("GET", "/v1/webhooks", nil, 200, &st)
	if len(st.Webhooks) != 1 || st.Webhooks[0].State != "retrying" || st.Webhooks[0].Failed == 0 || st.Webhooks[0].LastError == "" ||
		strings.Contains(st.Webhooks[0].URL, "src=e2e") || strings.Contains(st.Webhooks[0].LastError, "src=e2e") {
		t.Fatalf("the endpoint's state while its receiver is down: %+v", st.Webhooks)
	}
	if f := api.metric(`nomicore_webhook_endpoints_failing`); f != 1 {
		t.Fatalf("nomicore_webhook_endpoints_failing = %v while the receiver is down", f)
	}
	rcv.up()
	t.Logf("the receiver was down %v; %d writes acknowledged", time.Since(downAt).Round(time.Second), len(acks))
	eventually(t, 30*time.Second, "every write delivered after the receiver came back", func() error {
		if m := rcv.missing(acks); len(m) > 0 {
			return fmt.Errorf("%d of %d writes not delivered", len(m), len(acks))
		}
		return nil
	})
	rcv.check()

	// Killed in the middle of deliveries: the receiver takes 300 ms per request, and the
	// hub is killed while changes wait.
	rcv.mu.Lock()
	rcv.delay = 300 * time.Millisecond
	rcv.mu.Unlock()
	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
	w.nss = nss // fewer namespaces than deliveries pending: coalescing does not empty the queue
	acks = append(acks, writeFor(ctx, w, 20*time.Millisecond)...)
	cancel()
	for range 3 {
		api.createNamespace() // creations are never coalesced: deliveries wait
	}
	eventually(t, 10*time.Second, "a delivery in flight", func() error {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		if rcv.inflight == 0 {
			return errors.New("no request is being answered")
		}
		return nil
	})
	hub.kill()
	hub = c.startHub(flags...)
	w.base = hub.admin
	rcv.mu.Lock()
	rcv.delay = 0
	rcv.mu.Unlock()
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	acks = append(acks, writeFor(ctx, w, 50*time.Millisecond)...)
	cancel()
	eventually(t, 30*time.Second, "every write delivered across the kill", func() error {
		if m := rcv.missing(acks); len(m) > 0 {
			return fmt.Errorf("%d of %d writes not delivered", len(m), len(acks))
		}
		return nil
	})
	rcv.check()
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if rcv.kinds["created"] != 6 {
		t.Fatalf("%d creations delivered, want 6 (%v)", rcv.kinds["created"], rcv.kinds)
	}
	t.Logf("%d requests, %d deliveries (%v), %d delivered again after the kill", rcv.requests, len(rcv.firstSeen), rcv.kinds, rcv.dupes)
}

// TestE2E_Webhooks_Cluster: every node of a hub cluster is given the same webhook flags;
// one delivers (the others show standby), every write made on any node reaches the
// receiver in cursor order, signed; when the delivering node is killed (SIGKILL) another
// takes over from the endpoint's saved cursor, and nothing is lost.
func TestE2E_Webhooks_Cluster(t *testing.T) {
	t.Parallel()
	secret := []byte("e2e-cluster-webhook-secret-0123456789")
	secretFile := filepath.Join(t.TempDir(), "webhook.secret")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	rcv := newWebhookReceiver(t, secret)
	c := newHubCluster(t, 3, "--webhook-url", rcv.url(), "--webhook-secret-file", secretFile, "--webhook-debounce", "100ms",
		"--webhook-max-backoff", "2s")
	type hookState struct{ Webhooks []struct{ State string } }
	leader := func() (int, error) {
		lead, states := -1, []string{}
		for i, h := range c.hubs {
			var st hookState
			h.api().json("GET", "/v1/webhooks", nil, 200, &st)
			if len(st.Webhooks) != 1 {
				return -1, fmt.Errorf("node %d: %+v", i+1, st)
			}
			states = append(states, st.Webhooks[0].State)
			if st.Webhooks[0].State != "standby" {
				if lead >= 0 {
					return -1, fmt.Errorf("two nodes deliver: %v", states)
				}
				lead = i
			}
		}
		if lead < 0 {
			return -1, fmt.Errorf("no node delivers: %v", states)
		}
		return lead, nil
	}
	var lead int
	eventually(t, 30*time.Second, "one node delivering, two on standby", func() (err error) {
		lead, err = leader()
		return err
	})
	other := (lead + 1) % 3
	nss := []string{c.hubs[other].api().createNamespace(), c.hubs[lead].api().createNamespace()}
	w := newFeedWriter(c.hubs[other].admin, 7000, nss)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	acks := writeFor(ctx, w, 30*time.Millisecond)
	cancel()
	eventually(t, 30*time.Second, "every write delivered", func() error {
		if m := rcv.missing(acks); len(m) > 0 {
			return fmt.Errorf("%d of %d writes not delivered", len(m), len(acks))
		}
		return nil
	})
	rcv.check()
	c.hubs[lead].kill()
	before := len(acks)
	ctx, cancel = context.WithTimeout(context.Background(), 60*time.Second)
	for len(acks) < before+30 && ctx.Err() == nil {
		wctx, wcancel := context.WithTimeout(ctx, time.Second)
		acks = append(acks, writeFor(wctx, w, 30*time.Millisecond)...)
		wcancel()
	}
	cancel()
	if len(acks) < before+30 {
		t.Fatalf("only %d writes acknowledged after node %d was killed", len(acks)-before, lead+1)
	}
	t.Logf("node %d delivered and was killed; %d writes after", lead+1, len(acks)-before)
	eventually(t, 90*time.Second, "every write delivered by another node", func() error {
		if m := rcv.missing(acks); len(m) > 0 {
			return fmt.Errorf("%d of %d writes not delivered", len(m), len(acks))
		}
		return nil
	})
	rcv.check()
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if rcv.kinds["created"] != 2 {
		t.Fatalf("creations delivered: %v", rcv.kinds)
	}
	t.Logf("%d deliveries (%v), %d delivered twice", len(rcv.firstSeen), rcv.kinds, rcv.dupes)
}

// TestE2E_Webhooks_Dashboard: the hub's overview shows each webhook endpoint's delivery
// state — its URL without the query, and, with the receiver down, "retrying" with why.
func TestE2E_Webhooks_Dashboard(t *testing.T) {
	browser := startDashBrowser(t)
	secret := []byte("e2e-dashboard-webhook-secret-0123")
	c := newCluster(t)
	secretFile := filepath.Join(c.dir, "webhook.secret")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	rcv := newWebhookReceiver(t, secret)
	hub := c.startHub("--webhook-url", rcv.url(), "--webhook-secret-file", secretFile, "--webhook-debounce", "0s")
	tb := browser.newTab(t, "hub")
	tb.do("open the hub's dashboard", chromedp.Navigate(hub.admin+"/"))
	url := strings.TrimSuffix(rcv.url(), "?src=e2e")
	tb.waitFor("the endpoint, idle", `Array.from(document.querySelectorAll('ul.webhooks li')).some(li =>
		li.querySelector('code').textContent === `+jsString(url)+` && li.querySelector('[data-state=idle]'))`, 20*time.Second)
	rcv.down()
	hub.api().createNamespace()
	tb.waitFor("the endpoint retrying, with the error", `Array.from(document.querySelectorAll('ul.webhooks li')).some(li =>
		li.querySelector('[data-state=retrying]') && li.querySelector('.reason') && !li.textContent.includes('src=e2e'))`, 20*time.Second)
	tb.noConsoleErrors()
}
