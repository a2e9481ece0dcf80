package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nomicore/nomicore/yjs"
)

// feedResult is the change feed workload's: the hub binary with a webhook endpoint (this
// process), writers posting small updates to many namespaces through the admin API for a
// while, one reader following GET /v1/changes as server-sent events, then the whole feed
// read again with long polls from the start.
type feedResult struct {
	Namespaces int     `json:"namespaces"`
	Writers    int     `json:"writers"`
	Seconds    float64 `json:"seconds"`
	Writes     int     `json:"writes"` // acknowledged (204)
	WritesPerS float64 `json:"writesPerSecond"`
	// StreamEvents were received by the SSE reader while the writers wrote; StreamPerS is
	// their rate, LagP50/P99 the time from a change (its "at") to its arrival at the reader.
	StreamEvents int     `json:"streamEvents"`
	StreamPerS   float64 `json:"streamEventsPerSecond"`
	StreamLagP50 float64 `json:"streamLagP50Ms"`
	StreamLagP99 float64 `json:"streamLagP99Ms"`
	// BacklogEvents were read again after the writes, from cursor 0, in pages of 10,000.
	BacklogEvents int     `json:"backlogEvents"`
	BacklogPerS   float64 `json:"backlogEventsPerSecond"`
	// Deliveries reached the webhook endpoint (each change once: duplicates left out);
	// LatencyP50/P99 is from a change (its "at") to its arrival at the endpoint, with
	// DebounceMs of debounce.
	Deliveries        int     `json:"webhookDeliveries"`
	DebounceMs        float64 `json:"webhookDebounceMs"`
	WebhookLatencyP50 float64 `json:"webhookLatencyP50Ms"`
	WebhookLatencyP99 float64 `json:"webhookLatencyP99Ms"`
}

func (r feedResult) String() string {
	return fmt.Sprintf("change feed: %d writers × %d namespaces for %.0f s: %d writes acknowledged (%.0f/s)\n"+
		"  SSE reader: %d events, %.0f events/s, change-to-reader lag p50 %.1f ms, p99 %.1f ms\n"+
		"  backlog read with long polls from cursor 0: %d events, %.0f events/s\n"+
		"  webhook (debounce %.0f ms): %d deliveries, change-to-endpoint latency p50 %.1f ms, p99 %.1f ms",
		r.Writers, r.Namespaces, r.Seconds, r.Writes, r.WritesPerS,
		r.StreamEvents, r.StreamPerS, r.StreamLagP50, r.StreamLagP99,
		r.BacklogEvents, r.BacklogPerS,
		r.DebounceMs, r.Deliveries, r.WebhookLatencyP50, r.WebhookLatencyP99)
}

// percentileMs is the p-th percentile of ds, in milliseconds (0 without any).
func percentileMs(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := min(len(s)-1, int(p*float64(len(s))))
	return float64(s[i]) / float64(time.Millisecond)
}

// feedReceiver is the webhook endpoint: it answers 204 and notes each change's latency.
type feedReceiver struct {
	mu      sync.Mutex // guards seen and latency
	seen    map[string]bool
	latency []time.Duration
}

func (f *feedReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	var b struct{ DeliveryID, At string }
	err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&b)
	at, perr := time.Parse(time.RFC3339Nano, b.At)
	if err != nil || perr != nil {
		http.Error(w, "bad body", 400)
		return
	}
	f.mu.Lock()
	if !f.seen[b.DeliveryID] {
		f.seen[b.DeliveryID] = true
		f.latency = append(f.latency, arrived.Sub(at))
	}
	f.mu.Unlock()
	w.WriteHeader(204)
}

func runFeed(binDir string, namespaces, writers int, d, debounce time.Duration) (feedResult, error) {
	res := feedResult{Namespaces: namespaces, Writers: writers, DebounceMs: float64(debounce) / float64(time.Millisecond)}
	dir, err := os.MkdirTemp("", "benchrepl-feed-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	if binDir == "" {
		binDir = filepath.Join(dir, "bin")
		cmd := exec.Command("go", "build", "-o", binDir+string(filepath.Separator), "./cmd/hub")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return res, fmt.Errorf("building the hub (run from the repository root, or give -bin): %w", err)
		}
	}
	rcv := &feedReceiver{seen: map[string]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	srv := &http.Server{Handler: rcv, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	secret := filepath.Join(dir, "webhook.secret")
	if err := os.WriteFile(secret, []byte("benchrepl-feed-secret-0123456789\n"), 0o600); err != nil {
		return res, err
	}
	b := &binCluster{dir: dir, hubBin: filepath.Join(binDir, "hub")}
	defer b.stopAll()
	repl, err := freeAddr()
	if err != nil {
		return res, err
	}
	admin, err := freeAddr()
	if err != nil {
		return res, err
	}
	hub, err := b.start(b.hubBin, admin, "hub", "serve", "--listen", repl, "--admin-listen", admin, "--data", filepath.Join(dir, "hub"),
		"--client-listen", "off", "--webhook-url", "http://"+ln.Addr().String()+"/hook", "--webhook-secret-file", secret,
		"--webhook-debounce", debounce.String())
	if err != nil {
		return res, err
	}
	var nss []string
	for range namespaces {
		var c struct{ NamespaceID string }
		if err := call("POST", hub.admin+"/v1/namespaces", []byte(`{}`), 201, &c); err != nil {
			return res, err
		}
		nss = append(nss, c.NamespaceID)
	}

	// The SSE reader, from now on.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var streamMu sync.Mutex // guards the stream's figures
	var streamLag []time.Duration
	var firstAt, lastAt time.Time
	req, _ := http.NewRequestWithContext(ctx, "GET", hub.admin+"/v1/changes", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return res, err
	}
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "data: ") {
				continue
			}
			now := time.Now()
			var c struct{ At string }
			if json.Unmarshal([]byte(line[6:]), &c) != nil {
				continue
			}
			at, err := time.Parse(time.RFC3339Nano, c.At)
			if err != nil {
				continue
			}
			streamMu.Lock()
			if firstAt.IsZero() {
				firstAt = now
			}
			lastAt = now
			streamLag = append(streamLag, now.Sub(at))
			streamMu.Unlock()
		}
	}()

	// The writers: each keeps its own copy of every namespace and posts its next change.
	var writes atomic.Int64
	start := time.Now()
	wctx, stop := context.WithTimeout(ctx, d)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			docs := map[string]*yjs.Doc{}
			for i := 0; wctx.Err() == nil; i++ {
				ns := nss[(i*writers+w)%len(nss)]
				doc := docs[ns]
				if doc == nil {
					doc = yjs.NewDoc(yjs.WithClientID(uint32(100000 + w*10000 + len(docs))))
					docs[ns] = doc
				}
				var update []byte
				unsub := doc.OnUpdate(func(u []byte, _ any) { update = append([]byte(nil), u...) })
				doc.Transact(nil, func(*yjs.Transaction) { doc.GetMap("m").Set("k"+strconv.Itoa(i%16), float64(i)) })
				unsub()
				if call("POST", hub.admin+"/v1/namespaces/"+ns+"/update", update, 204, nil) == nil {
					writes.Add(1)
				}
			}
		})
	}
	wg.Wait()
	stop()
	elapsed := time.Since(start)
	res.Seconds, res.Writes = elapsed.Seconds(), int(writes.Load())
	res.WritesPerS = float64(res.Writes) / elapsed.Seconds()

	// Wait until the stream and the webhook are quiet.
	settle := func(count func() int) {
		last, since := -1, time.Now()
		for time.Since(since) < 2*time.Second {
			if n := count(); n != last {
				last, since = n, time.Now()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	settle(func() int { streamMu.Lock(); defer streamMu.Unlock(); return len(streamLag) })
	cancel()
	<-streamDone
	streamMu.Lock()
	res.StreamEvents = len(streamLag)
	if span := lastAt.Sub(firstAt); span > 0 {
		res.StreamPerS = float64(res.StreamEvents) / span.Seconds()
	}
	res.StreamLagP50, res.StreamLagP99 = percentileMs(streamLag, 0.50), percentileMs(streamLag, 0.99)
	streamMu.Unlock()

	settle(func() int { rcv.mu.Lock(); defer rcv.mu.Unlock(); return len(rcv.latency) })
	rcv.mu.Lock()
	res.Deliveries = len(rcv.latency)
	res.WebhookLatencyP50, res.WebhookLatencyP99 = percentileMs(rcv.latency, 0.50), percentileMs(rcv.latency, 0.99)
	rcv.mu.Unlock()

	// The backlog: the whole feed again, with long polls from cursor 0.
	t0 := time.Now()
	after := "0"
	for {
		var page struct {
			Changes []json.RawMessage
			Cursor  string
		}
		if err := call("GET", hub.admin+"/v1/changes?after="+after+"&limit=10000&wait=0s", nil, 200, &page); err != nil {
			return res, err
		}
		if len(page.Changes) == 0 {
			break
		}
		res.BacklogEvents += len(page.Changes)
		after = page.Cursor
	}
	if took := time.Since(t0); took > 0 {
		res.BacklogPerS = float64(res.BacklogEvents) / took.Seconds()
	}
	return res, nil
}
