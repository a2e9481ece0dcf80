// Package webhook delivers the hub's change feed to HTTP endpoints: each change one POST
// of JSON {"deliveryId","cursor","namespaceId","kind","stateVector","at"}, signed with
// the header
//
//	Nomicore-Signature: t=UNIX,v1=HEX(HMAC-SHA256(secret, "UNIX." + body))
//
// (UNIX: the time of the attempt, in seconds; a receiver checks the HMAC and refuses old
// times). Each endpoint has one goroutine that delivers the changes in cursor order, one at
// a time, and retries a change — with an exponential backoff capped at Options.MaxBackoff —
// until the endpoint answers 2xx: at least once, never out of order. After each delivery it
// saves the endpoint's cursor in the catalog's configuration (a single hub's store, a
// cluster's configuration bucket), so that a restart — a crash in the middle of a delivery
// included — resumes after the last change delivered: a change may be delivered twice
// (the receiver recognises it by deliveryId), none is lost while the feed keeps it.
//
// Changes are delivered Options.Debounce after the first of a burst, coalesced: updates of
// one namespace made within the debounce, or while the endpoint was down, are one delivery
// (the latest: its state vector covers the others).
package webhook

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
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/nomicore/nomicore/changefeed"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/persistence"
)

// Defaults of Options.
const (
	DefaultDebounce       = 2 * time.Second
	DefaultMinBackoff     = time.Second
	DefaultMaxBackoff     = 5 * time.Minute
	DefaultRequestTimeout = 10 * time.Second
	// SignatureHeader is the header of the signature.
	SignatureHeader = "Nomicore-Signature"
	// maxQueued bounds the changes an endpoint holds in memory ahead of its delivery; the
	// rest wait in the feed (overflow policy: read no further until there is room).
	maxQueued = 10000
)

// Options configure a Deliverer.
type Options struct {
	// URLs are the endpoints.
	URLs []string
	// Secret signs every delivery.
	Secret []byte
	// Debounce is how long the first change of a burst waits for others (zero: the
	// default; negative: none).
	Debounce time.Duration
	// MinBackoff and MaxBackoff bound the wait between attempts at a failing change.
	MinBackoff, MaxBackoff time.Duration
	// RequestTimeout bounds one attempt.
	RequestTimeout time.Duration
	// Feed is the change feed; Config keeps each endpoint's cursor.
	Feed   changefeed.Source
	Config persistence.Catalog
	// Leader, when set, says whether this node delivers to endpoint now (one node of a hub
	// cluster does); nil: always.
	Leader func(endpoint string) bool
	// Client makes the requests (nil: a client with no redirects followed).
	Client *http.Client
	Clock  clock.Clock
	Logger *slog.Logger
	// Observe, when set, receives each delivery's outcome (for metrics): the time from
	// the change to its 2xx, and whether an attempt failed.
	Observe func(o Outcome)
}

// Outcome is one attempt at a delivery.
type Outcome struct {
	Delivered bool
	// Latency is the time from the change (its At) to the endpoint's 2xx.
	Latency time.Duration
}

// Body is the JSON of a delivery.
type Body struct {
	DeliveryID  string `json:"deliveryId"`
	Cursor      string `json:"cursor"`
	NamespaceID string `json:"namespaceId"`
	Kind        string `json:"kind"`
	StateVector string `json:"stateVector"`
	At          string `json:"at"`
}

// Sign returns the signature header's value for body at time t.
func Sign(secret, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts + "."))
	m.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a signature header against body (a receiver's check): the HMAC, and that
// its time is within tolerance of now.
func Verify(secret, body []byte, header string, now time.Time, tolerance time.Duration) error {
	var ts, sig string
	for _, part := range bytes.Split([]byte(header), []byte(",")) {
		k, v, _ := bytes.Cut(part, []byte("="))
		switch string(k) {
		case "t":
			ts = string(v)
		case "v1":
			sig = string(v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return errors.New("webhook: malformed signature header")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("webhook: signature time is %v away from now", d.Round(time.Second))
	}
	want := Sign(secret, body, time.Unix(sec, 0))
	if !hmac.Equal([]byte(want), []byte("t="+ts+",v1="+sig)) {
		return errors.New("webhook: signature mismatch")
	}
	return nil
}

// Deliverer delivers the feed to every endpoint.
type Deliverer struct {
	opts Options
	log  *slog.Logger
	eps  []*endpoint
}

// endpoint is one URL's delivery: its goroutine owns the queue; mu guards the status the
// dashboard and the metrics read.
type endpoint struct {
	d   *Deliverer
	url string
	key string // the configuration key of its cursor

	mu     sync.Mutex // guards status
	status Status
}

// Status is an endpoint's delivery state.
type Status struct {
	// URL is the endpoint without its query and user information (which may hold secrets).
	URL string `json:"url"`
	// State: starting, idle, delivering, retrying (the last attempt failed), standby (another
	// node of the cluster delivers), or stopped.
	State string `json:"state"`
	// Cursor is the last change delivered (or the cursor delivery started after).
	Cursor string `json:"cursor"`
	// Pending counts the changes read from the feed and not yet delivered.
	Pending int `json:"pending"`
	// Delivered and Failed count deliveries and failed attempts since the start.
	Delivered uint64 `json:"delivered"`
	Failed    uint64 `json:"failed"`
	// Failures counts the failed attempts in a row at the change being delivered;
	// LastError says why the last one failed; NextAttempt is when it is tried again.
	Failures      int    `json:"failures,omitempty"`
	LastError     string `json:"lastError,omitempty"`
	NextAttempt   string `json:"nextAttempt,omitempty"`
	LastDelivered string `json:"lastDelivered,omitempty"`
}

// New returns a Deliverer; Run delivers.
func New(opts Options) (*Deliverer, error) {
	if opts.Feed == nil || opts.Config == nil {
		return nil, errors.New("webhook: a feed and a configuration store are required")
	}
	if len(opts.Secret) == 0 {
		return nil, errors.New("webhook: a secret is required (--webhook-secret-file)")
	}
	switch {
	case opts.Debounce == 0:
		opts.Debounce = DefaultDebounce
	case opts.Debounce < 0:
		opts.Debounce = 0
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(DefaultMaxBackoff, opts.MinBackoff)
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.Client == nil {
		opts.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Deliverer{opts: opts, log: log}
	seen := map[string]bool{}
	for _, raw := range opts.URLs {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("webhook: --webhook-url %q is not an http:// or https:// URL", raw)
		}
		if seen[raw] {
			return nil, fmt.Errorf("webhook: --webhook-url %q is given twice", raw)
		}
		seen[raw] = true
		sum := sha256.Sum256([]byte(raw))
		ep := &endpoint{d: d, url: raw, key: "webhooks/" + hex.EncodeToString(sum[:12])}
		ep.status = Status{URL: redact(u), State: "starting"}
		d.eps = append(d.eps, ep)
	}
	return d, nil
}

// redact drops what a URL may hide secrets in.
func redact(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.Fragment = nil, "", ""
	return c.String()
}

// Run delivers until ctx ends.
func (d *Deliverer) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, ep := range d.eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ep.run(ctx)
		}()
	}
	wg.Wait()
}

// Status returns every endpoint's delivery state, in the order of the URLs.
func (d *Deliverer) Status() []Status {
	out := make([]Status, 0, len(d.eps))
	for _, ep := range d.eps {
		ep.mu.Lock()
		out = append(out, ep.status)
		ep.mu.Unlock()
	}
	return out
}

func (ep *endpoint) update(f func(s *Status)) {
	ep.mu.Lock()
	f(&ep.status)
	ep.mu.Unlock()
}

func (ep *endpoint) run(ctx context.Context) {
	defer ep.update(func(s *Status) { s.State = "stopped" })
	for ctx.Err() == nil {
		if l := ep.d.opts.Leader; l != nil && !l(ep.url) {
			ep.update(func(s *Status) { s.State = "standby" })
			if !ep.sleep(ctx, time.Second) {
				return
			}
			continue
		}
		if err := ep.deliver(ctx); err != nil && ctx.Err() == nil {
			ep.d.log.Warn("webhook: reading the change feed failed; trying again", slog.String("url", ep.status.URL), slog.String("error", err.Error()))
			if !ep.sleep(ctx, 5*time.Second) {
				return
			}
		}
	}
}

func (ep *endpoint) sleep(ctx context.Context, d time.Duration) bool {
	fired := make(chan struct{})
	t := ep.d.opts.Clock.AfterFunc(d, func() { close(fired) })
	defer t.Stop()
	select {
	case <-fired:
		return true
	case <-ctx.Done():
		return false
	}
}

// cursor reads the endpoint's saved cursor; without one (a new endpoint) it starts with
// the changes from now on, and saves that.
// A cursor saved by an earlier version reads as the feed reads it (on a hub cluster, a
// plain number is a position in NOMICORE_LOG: changefeed.Source.ParseCursor).
func (ep *endpoint) cursor(ctx context.Context) (changefeed.Cursor, error) {
	cfg, feed := ep.d.opts.Config, ep.d.opts.Feed
	b, err := cfg.Config(ctx, ep.key)
	if err == nil {
		if c, err := feed.ParseCursor(string(b)); err == nil {
			return c, nil
		}
		ep.d.log.Warn("webhook: the endpoint's saved cursor is not one of this hub's feed; it goes on with the changes from now on",
			slog.String("url", ep.status.URL), slog.String("cursor", string(b)))
	} else if !errors.Is(err, persistence.ErrNotFound) {
		return "", err
	}
	head, err := feed.Head(ctx)
	if err != nil {
		return "", err
	}
	return head, cfg.PutConfig(ctx, ep.key, []byte(head))
}

// deliver reads the feed from the saved cursor and delivers, until an error or ctx ends
// (or the node stops leading).
func (ep *endpoint) deliver(ctx context.Context) error {
	opts := &ep.d.opts
	cursor, err := ep.cursor(ctx)
	if err != nil {
		return err
	}
	r, err := opts.Feed.Open(ctx, cursor)
	if errors.Is(err, changefeed.ErrExpired) {
		head, herr := opts.Feed.Head(ctx)
		if herr != nil {
			return herr
		}
		ep.d.log.Error("webhook: the endpoint fell further behind than the change feed keeps; the changes after its cursor up to the feed's oldest were not delivered. "+
			"It goes on with the changes from now on: have the receiver start over from GET /v1/changes/latest",
			slog.String("url", ep.status.URL), slog.String("cursor", string(cursor)), slog.String("resumesAfter", string(head)))
		if err := opts.Config.PutConfig(ctx, ep.key, []byte(head)); err != nil {
			return err
		}
		cursor = head
		r, err = opts.Feed.Open(ctx, cursor)
	}
	if err != nil {
		return err
	}
	defer r.Close()
	ep.update(func(s *Status) { s.State, s.Cursor = "idle", string(cursor) })
	var queue []changefeed.Event
	backoff := opts.MinBackoff
	failures := 0
	for {
		if l := opts.Leader; l != nil && !l(ep.url) {
			return nil
		}
		// Read what the feed has (up to the bound), debouncing the first of a burst.
		wake := r.Wake()
		if len(queue) < maxQueued {
			events, err := r.Next(ctx, maxQueued-len(queue))
			if err != nil {
				return err
			}
			if len(events) > 0 && len(queue) == 0 && opts.Debounce > 0 {
				if !ep.sleep(ctx, opts.Debounce) {
					return nil
				}
				more, err := r.Next(ctx, maxQueued-len(events))
				if err != nil {
					return err
				}
				events = append(events, more...)
			}
			queue = changefeed.Coalesce(append(queue, events...))
		}
		n := len(queue)
		ep.update(func(s *Status) { s.Pending = n })
		if len(queue) == 0 {
			ep.update(func(s *Status) { s.State = "idle" })
			select {
			case <-wake:
			case <-ctx.Done():
				return nil
			}
			continue
		}
		e := queue[0]
		ep.update(func(s *Status) {
			if failures == 0 {
				s.State = "delivering"
			}
		})
		err := ep.post(ctx, e)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			queue = queue[1:]
			failures, backoff = 0, opts.MinBackoff
			c := string(e.Cursor)
			// Saved after the 2xx: a crash before this line delivers e again.
			if err := opts.Config.PutConfig(ctx, ep.key, []byte(c)); err != nil {
				ep.d.log.Warn("webhook: saving the endpoint's cursor failed; a restart delivers the change again",
					slog.String("url", ep.status.URL), slog.String("error", err.Error()))
			}
			latency := max(0, opts.Clock.Now().Sub(e.At))
			if opts.Observe != nil {
				opts.Observe(Outcome{Delivered: true, Latency: latency})
			}
			ep.update(func(s *Status) {
				s.State, s.Cursor, s.Delivered, s.Failures, s.LastError, s.NextAttempt = "delivering", c, s.Delivered+1, 0, "", ""
				s.LastDelivered = opts.Clock.Now().UTC().Format(time.RFC3339)
			})
			continue
		}
		failures++
		if opts.Observe != nil {
			opts.Observe(Outcome{})
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		backoff = min(2*backoff, opts.MaxBackoff)
		next := opts.Clock.Now().Add(wait)
		if failures == 1 || failures%20 == 0 {
			ep.d.log.Warn("webhook: a delivery failed; it is retried until the endpoint answers 2xx",
				slog.String("url", ep.status.URL), slog.String("cursor", string(e.Cursor)), slog.Int("failures", failures),
				slog.String("error", err.Error()), slog.Duration("retryIn", wait.Round(time.Millisecond)))
		}
		ep.update(func(s *Status) {
			s.State, s.Failed, s.Failures, s.LastError = "retrying", s.Failed+1, failures, err.Error()
			s.NextAttempt = next.UTC().Format(time.RFC3339)
		})
		if !ep.sleep(ctx, wait) {
			return nil
		}
	}
}

// post makes one attempt at delivering e.
func (ep *endpoint) post(ctx context.Context, e changefeed.Event) error {
	opts := &ep.d.opts
	body := Body{
		DeliveryID:  ep.key[len("webhooks/"):] + "-" + e.ID,
		Cursor:      string(e.Cursor),
		NamespaceID: e.NamespaceID,
		Kind:        e.Kind.String(),
		StateVector: hex.EncodeToString(e.StateVector),
		At:          e.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "nomicore-webhook")
	req.Header.Set(SignatureHeader, Sign(opts.Secret, b, opts.Clock.Now()))
	resp, err := opts.Client.Do(req)
	if err != nil {
		// Without the URL, which may hold a secret in its query or user information (the
		// status, the dashboard and the logs show the redacted one).
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("the endpoint could not be reached: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("the endpoint answered %s", resp.Status)
	}
	return nil
}
