package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nomicore/nomicore/changefeed"
	"github.com/nomicore/nomicore/persistence"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var secret = []byte("0123456789abcdef0123456789abcdef")

func TestSignVerify(t *testing.T) {
	body := []byte(`{"deliveryId":"x-1"}`)
	now := time.Unix(1_800_000_000, 0)
	h := Sign(secret, body, now)
	if err := Verify(secret, body, h, now.Add(10*time.Second), time.Minute); err != nil {
		t.Fatalf("a signature just made: %v", err)
	}
	for name, c := range map[string]struct {
		secret, body []byte
		header       string
		at           time.Time
	}{
		"another body":   {secret, []byte(`{"deliveryId":"x-2"}`), h, now},
		"another secret": {[]byte("another secret, as long as it is"), body, h, now},
		"too old":        {secret, body, h, now.Add(10 * time.Minute)},
		"no time":        {secret, body, "v1=00", now},
		"malformed":      {secret, body, "garbage", now},
	} {
		if err := Verify(c.secret, c.body, c.header, c.at, time.Minute); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	st := feedStore(t)
	feed := changefeed.StoreSource{Feed: st}
	for name, o := range map[string]Options{
		"no secret":    {URLs: []string{"http://127.0.0.1:1/"}, Feed: feed, Config: st},
		"not http":     {URLs: []string{"ftp://x/"}, Secret: secret, Feed: feed, Config: st},
		"twice":        {URLs: []string{"http://a/", "http://a/"}, Secret: secret, Feed: feed, Config: st},
		"no feed":      {URLs: []string{"http://a/"}, Secret: secret, Config: st},
		"no host":      {URLs: []string{"http:///x"}, Secret: secret, Feed: feed, Config: st},
		"not a URL at": {URLs: []string{"http://[::1"}, Secret: secret, Feed: feed, Config: st},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func feedStore(t *testing.T) *persistence.MemoryStore {
	t.Helper()
	st, err := persistence.NewMemoryStore(persistence.Options{CommitDelay: -1, ChangeFeed: &persistence.ChangeFeedOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	return st
}

func nsID(i int) string { return fmt.Sprintf("ns-%032x", i) }

// An endpoint that fails its first attempts gets every change, once it answers, in
// cursor order, signed; its cursor is saved after each 2xx, so a Deliverer started again
// goes on after it.
func TestDeliversInOrderWithRetries(t *testing.T) {
	st := feedStore(t)
	feed := changefeed.StoreSource{Feed: st}
	ctx := context.Background()
	var mu sync.Mutex // guards got and attempts
	var got []Body
	attempts := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		attempts++
		if attempts <= 3 {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if err := Verify(secret, b, r.Header.Get(SignatureHeader), time.Now(), time.Minute); err != nil {
			t.Errorf("signature: %v", err)
		}
		var body Body
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("body %s: %v", b, err)
		}
		got = append(got, body)
	}))
	defer srv.Close()
	var outcomes []Outcome
	var omu sync.Mutex // guards outcomes
	opts := Options{URLs: []string{srv.URL + "/hook"}, Secret: secret, Debounce: -1, MinBackoff: 5 * time.Millisecond,
		MaxBackoff: 20 * time.Millisecond, Feed: feed, Config: st,
		Observe: func(o Outcome) { omu.Lock(); outcomes = append(outcomes, o); omu.Unlock() }}
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { d.Run(runCtx); close(done) }()
	waitState(t, d, "idle")
	// Three namespaces created (never coalesced), in this order.
	for i := range 3 {
		if _, err := st.RecordChange(ctx, persistence.Change{Kind: persistence.ChangeCreated, Owner: "default", NamespaceID: nsID(i)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 3 })
	stop()
	<-done
	mu.Lock()
	for i, b := range got {
		if b.NamespaceID != nsID(i) || b.Kind != "created" || b.Cursor != strconv.Itoa(i+1) || b.DeliveryID == "" || b.At == "" {
			t.Fatalf("delivery %d: %+v", i, b)
		}
	}
	mu.Unlock()
	omu.Lock()
	failed := 0
	for _, o := range outcomes {
		if !o.Delivered {
			failed++
		}
	}
	omu.Unlock()
	if failed != 3 {
		t.Fatalf("%d failed attempts observed, want 3", failed)
	}
	if s := d.Status()[0]; s.Cursor != "3" || s.Delivered != 3 || s.Failed != 3 || s.State != "stopped" {
		t.Fatalf("status %+v", s)
	}
	// Started again: it goes on after the saved cursor (nothing delivered twice).
	if _, err := st.RecordChange(ctx, persistence.Change{Kind: persistence.ChangeDeleted, Owner: "default", NamespaceID: nsID(0)}); err != nil {
		t.Fatal(err)
	}
	d2, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop = context.WithCancel(ctx)
	done = make(chan struct{})
	go func() { d2.Run(runCtx); close(done) }()
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 4 })
	time.Sleep(50 * time.Millisecond)
	stop()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 4 || got[3].Kind != "deleted" || got[3].Cursor != "4" {
		t.Fatalf("after a restart: %+v", got)
	}
}

// Updates of one namespace waiting together are delivered once: the latest.
func TestCoalescesWaitingUpdates(t *testing.T) {
	st := feedStore(t)
	feed := changefeed.StoreSource{Feed: st}
	ctx := context.Background()
	var mu sync.Mutex // guards got
	var got []Body
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b Body
		json.NewDecoder(r.Body).Decode(&b)
		mu.Lock()
		got = append(got, b)
		mu.Unlock()
	}))
	defer srv.Close()
	d, err := New(Options{URLs: []string{srv.URL}, Secret: secret, Debounce: 100 * time.Millisecond, Feed: feed, Config: st})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { d.Run(runCtx); close(done) }()
	defer func() { stop(); <-done }()
	waitState(t, d, "idle")
	for i := range 5 {
		if _, err := st.RecordChange(ctx, persistence.Change{Kind: persistence.ChangeUpdated, Owner: "default", NamespaceID: nsID(i % 2)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 2 })
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0].Cursor != "4" || got[1].Cursor != "5" {
		t.Fatalf("deliveries %+v; want cursors 4 (%s) and 5 (%s)", got, nsID(1), nsID(0))
	}
}

func waitState(t *testing.T, d *Deliverer, state string) {
	t.Helper()
	waitFor(t, func() bool { return d.Status()[0].State == state })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
