package auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nomicore/nomicore/clock"
)

// Defaults of WebhookOptions.
const (
	DefaultWebhookTimeout     = 3 * time.Second
	DefaultWebhookMaxCached   = 10_000
	DefaultWebhookMaxInFlight = 64
	DefaultWebhookMaxTTL      = time.Hour
	webhookRetryAfter         = 5 * time.Second
	maxWebhookAnswerBytes     = 64 << 10
)

// WebhookOptions configure a Webhook.
type WebhookOptions struct {
	// URL is where the node POSTs each editor's credential (--client-auth-webhook).
	URL string
	// Node names this node in the requests (its instance id).
	Node string
	// Timeout bounds one request (DefaultWebhookTimeout); a request that runs out refuses
	// the editor with 503 and Retry-After.
	Timeout time.Duration
	// MaxCached bounds the answers kept (DefaultWebhookMaxCached); MaxTTL bounds how long
	// one is kept whatever its ttlSeconds (DefaultWebhookMaxTTL).
	MaxCached int
	MaxTTL    time.Duration
	// MaxInFlight bounds the requests under way at once (DefaultWebhookMaxInFlight); an
	// upgrade beyond it is refused at once (503, Retry-After) instead of waiting.
	MaxInFlight int
	// HTTPClient sends the requests (nil: a plain client; the timeout is the request's).
	HTTPClient *http.Client
	// Revocations, when set, refuses answers for a user obtained before the user was
	// revoked (the webhook is asked again).
	Revocations *RevocationList
	// Clock times the cache; nil: the real clock.
	Clock clock.Reader
	// Logger receives the webhook's failures (never tokens).
	Logger *slog.Logger
}

// WebhookRequest is the body the node POSTs: the token as presented, the namespace the
// editor asks for, this node's name and the editor's address.
type WebhookRequest struct {
	Token       string `json:"token"`
	NamespaceID string `json:"namespaceId"`
	Node        string `json:"node"`
	RemoteAddr  string `json:"remoteAddr"`
}

// WebhookAnswer is the application's answer: whether the editor may open the namespace,
// read-only or not, the user it is (for logs and the dashboard), and how long the node may
// reuse the answer for the same token and namespace (0: ask every time).
type WebhookAnswer struct {
	Allow      bool   `json:"allow"`
	ReadOnly   bool   `json:"readOnly"`
	User       string `json:"user"`
	TTLSeconds int    `json:"ttlSeconds"`
}

// Webhook is the ClientAuthenticator that asks the application: each credential is POSTed
// to the webhook (a WebhookRequest) and its WebhookAnswer decides for that namespace. An
// answer is cached for its TTL (bounded in count and time) by the token's hash and the
// namespace. It fails closed: a webhook that does not answer in time, answers another
// status than 200 or an answer that does not decode refuses the editor (an
// *UnavailableError: 503 with Retry-After), and so does an upgrade beyond MaxInFlight
// requests under way — no upgrade waits for another's request.
type Webhook struct {
	opts     WebhookOptions
	clk      clock.Reader
	log      *slog.Logger
	inFlight chan struct{} // a slot per request under way

	mu    sync.Mutex // guards cache
	cache map[webhookKey]webhookEntry
}

type webhookKey struct {
	token [sha256.Size]byte
	ns    string
}

type webhookEntry struct {
	answer  WebhookAnswer
	asked   time.Time // when the answer was obtained (for revocations)
	expires time.Time
}

// NewWebhook returns a Webhook for opts.URL.
func NewWebhook(opts WebhookOptions) (*Webhook, error) {
	if opts.URL == "" {
		return nil, errors.New("auth: the webhook needs a URL")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultWebhookTimeout
	}
	if opts.MaxCached <= 0 {
		opts.MaxCached = DefaultWebhookMaxCached
	}
	if opts.MaxTTL <= 0 {
		opts.MaxTTL = DefaultWebhookMaxTTL
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultWebhookMaxInFlight
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	w := &Webhook{opts: opts, clk: opts.Clock, log: opts.Logger, inFlight: make(chan struct{}, opts.MaxInFlight),
		cache: map[webhookKey]webhookEntry{}}
	if w.clk == nil {
		w.clk = clock.Real()
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	return w, nil
}

// AuthenticateClient asks the webhook (or its cached answer) about c.
func (w *Webhook) AuthenticateClient(ctx context.Context, c ClientCredential) (ClientGrant, error) {
	if c.Token == "" {
		return ClientGrant{}, ErrUnauthenticated
	}
	if len(c.Token) > maxTokenBytes {
		return ClientGrant{}, refuse(CheckMalformed, "the token is longer than %d bytes", maxTokenBytes)
	}
	key := webhookKey{HashToken(c.Token), c.NamespaceID}
	now := w.clk.Now()
	w.mu.Lock()
	e, ok := w.cache[key]
	if ok && !now.Before(e.expires) {
		delete(w.cache, key)
		ok = false
	}
	w.mu.Unlock()
	if ok {
		if g, err := w.grant(c, e); err == nil || !errors.Is(err, ErrUnauthenticated) {
			return g, err
		}
		// Revoked since it was cached: ask again.
	}
	select {
	case w.inFlight <- struct{}{}:
	default:
		return ClientGrant{}, &UnavailableError{What: fmt.Sprintf("%d editor checks are already waiting for the auth webhook", w.opts.MaxInFlight),
			RetryAfter: time.Second}
	}
	defer func() { <-w.inFlight }()
	e, err := w.ask(ctx, c)
	if err != nil {
		w.log.Warn("the auth webhook did not answer; the editor is refused", slog.String("namespaceId", c.NamespaceID),
			slog.String("error", err.Error()))
		return ClientGrant{}, &UnavailableError{What: "the auth webhook did not answer", RetryAfter: webhookRetryAfter, Err: err}
	}
	if ttl := time.Duration(e.answer.TTLSeconds) * time.Second; ttl > 0 {
		e.expires = e.asked.Add(min(ttl, w.opts.MaxTTL))
		w.put(key, e)
	}
	return w.grant(c, e)
}

// grant is the grant of an answer for c: the namespace asked for, or a refusal.
func (w *Webhook) grant(c ClientCredential, e webhookEntry) (ClientGrant, error) {
	if !e.answer.Allow {
		return ClientGrant{}, refuse(CheckDenied, "the application refused this editor the namespace")
	}
	name := e.answer.User
	if name == "" {
		name = "webhook"
	}
	g := ClientGrant{Name: name, User: e.answer.User, Namespaces: []string{c.NamespaceID}, ReadOnly: e.answer.ReadOnly,
		Kind: CredentialWebhook, issued: e.asked}
	if err := w.opts.Revocations.check(g); err != nil {
		return ClientGrant{}, err
	}
	return g, nil
}

// put caches an answer; when the cache is full, the entries that expired go first, then
// those that expire soonest.
func (w *Webhook) put(key webhookKey, e webhookEntry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.cache) >= w.opts.MaxCached {
		now := w.clk.Now()
		for k, old := range w.cache {
			if !now.Before(old.expires) {
				delete(w.cache, k)
			}
		}
		for len(w.cache) >= w.opts.MaxCached {
			var soonest webhookKey
			first := true
			var at time.Time
			for k, old := range w.cache {
				if first || old.expires.Before(at) {
					soonest, at, first = k, old.expires, false
				}
			}
			delete(w.cache, soonest)
		}
	}
	w.cache[key] = e
}

// Cached returns how many answers the cache holds.
func (w *Webhook) Cached() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.cache)
}

// ask POSTs the request and decodes the answer, within the timeout.
func (w *Webhook) ask(ctx context.Context, c ClientCredential) (webhookEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
	defer cancel()
	body, _ := json.Marshal(WebhookRequest{Token: c.Token, NamespaceID: c.NamespaceID, Node: w.opts.Node, RemoteAddr: c.RemoteAddr})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.opts.URL, bytes.NewReader(body))
	if err != nil {
		return webhookEntry{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	asked := w.clk.Now()
	resp, err := w.opts.HTTPClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return webhookEntry{}, fmt.Errorf("no answer within %v", w.opts.Timeout)
		}
		return webhookEntry{}, errors.New(stripURL(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxWebhookAnswerBytes+1))
	switch {
	case err != nil:
		return webhookEntry{}, fmt.Errorf("reading the answer: %v", err)
	case resp.StatusCode != http.StatusOK:
		return webhookEntry{}, fmt.Errorf("HTTP %d (want 200 with {\"allow\":…})", resp.StatusCode)
	case len(data) > maxWebhookAnswerBytes:
		return webhookEntry{}, fmt.Errorf("an answer over %d bytes", maxWebhookAnswerBytes)
	}
	var a WebhookAnswer
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&a); err != nil {
		return webhookEntry{}, fmt.Errorf("the answer is not the JSON {\"allow\",\"readOnly\",\"user\",\"ttlSeconds\"}: %v", claimError(err))
	}
	if len(a.User) > maxSubBytes || !printable(a.User) {
		return webhookEntry{}, fmt.Errorf("the answer's user must be at most %d printable bytes", maxSubBytes)
	}
	return webhookEntry{answer: a, asked: asked}, nil
}

// stripURL is an HTTP client error without the request's URL and method (the URL is in the
// node's configuration already; the error's cause is what the log needs).
func stripURL(err error) string {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) && ue.Unwrap() != nil {
		return ue.Unwrap().Error()
	}
	return err.Error()
}

// RecheckClient says what a webhook's grant allows now: the same, unless its user was
// revoked since the answer (the webhook is not asked again for an open connection).
func (w *Webhook) RecheckClient(g ClientGrant) (ClientGrant, error) {
	if g.Kind != CredentialWebhook {
		return ClientGrant{}, ErrUnauthenticated
	}
	if err := w.opts.Revocations.check(g); err != nil {
		return ClientGrant{}, err
	}
	return g, nil
}
