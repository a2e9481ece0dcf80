package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nomicore/nomicore/clock"
)

// ConfigStore is the part of a node's store that keeps the revocation list: its
// configuration map (persistence.Store's; in a hub cluster the map all nodes share).
// Config's error for an absent key is the store's own.
type ConfigStore interface {
	PutConfig(ctx context.Context, key string, value []byte) error
	Config(ctx context.Context, key string) ([]byte, error)
	DeleteConfig(ctx context.Context, key string) error
	ConfigKeys(ctx context.Context, prefix string) ([]string, error)
}

// ConfigWatcher is a ConfigStore that tells of changes made by other processes (a hub
// cluster's shared map: cluster.Store). A revocation list over one learns of another node's
// revocation as it is stored, instead of at its next poll.
type ConfigWatcher interface {
	// WatchConfig calls changed after each change of a key starting with prefix, until ctx
	// ends; it returns once the watch is set up.
	WatchConfig(ctx context.Context, prefix string, changed func()) error
}

// watchedPoll is how often Run reads a watched store anyway (a missed notification).
const watchedPoll = 5 * time.Second

// revocationPrefix starts the configuration keys of revocations.
const revocationPrefix = "client-revocation/"

// Defaults of RevocationOptions.
const (
	DefaultMaxRevocations = 100_000
	// DefaultRevocationPoll paces Run over a store that does not tell of changes: a single
	// node's, whose list changes only through its own Revoke (the poll drops expired
	// entries). A hub cluster's store is watched.
	DefaultRevocationPoll = 10 * time.Second
)

// ErrInvalidRevocation refuses a revocation that names neither a user nor a token id, both,
// or one that is too long or not printable.
var ErrInvalidRevocation = errors.New("auth: not a revocation")

// ErrTooManyRevocations refuses a revocation beyond RevocationOptions.Max.
var ErrTooManyRevocations = errors.New("auth: the revocation list is full; entries leave it once the tokens they refuse have expired")

// Revocation is one entry of the list: a user (Sub) whose credentials issued before At are
// refused, or a signed token's id (JTI), refused whatever its user. Until is when the entry
// can be forgotten: every token it refuses has expired by then.
type Revocation struct {
	Sub   string    `json:"sub,omitempty"`
	JTI   string    `json:"jti,omitempty"`
	At    time.Time `json:"at"`
	Until time.Time `json:"until"`
}

// RevocationOptions configure a RevocationList.
type RevocationOptions struct {
	// Store keeps the list (persisted; shared by the nodes of a hub cluster).
	Store ConfigStore
	// Lifetime is the longest a credential it may refuse stays valid (the signed tokens'
	// --client-jwt-max-lifetime, plus their skew): an entry is kept that long.
	Lifetime time.Duration
	// Max bounds the entries (DefaultMaxRevocations).
	Max int
	// OnChange is called after the list changed — a revocation made here, or one another
	// node made, seen by Run (the client listener re-checks its editors then).
	OnChange func()
	// Deferred leaves the first read to Run (a hub cluster node whose store answers once the
	// cluster has quorum): NewRevocationList does not wait for the store.
	Deferred bool
	// Clock stamps revocations and paces Run; nil: the real clock.
	Clock clock.Clock
	// Logger receives load failures and the revocations (users and ids, never tokens).
	Logger *slog.Logger
}

// RevocationList holds the revoked users and token ids in memory, backed by the store. A
// revocation closes the editors it concerns (OnChange → the listener re-checks them) and
// refuses their credentials from then on: a signed token of the user issued before the
// revocation (its iat; without iat the earliest its exp allows) or with the revoked jti, and
// a webhook's answer for the user obtained before it. Entries leave the list after Lifetime.
// Its methods may be called concurrently; a nil list revokes nothing.
type RevocationList struct {
	opts RevocationOptions
	clk  clock.Clock
	log  *slog.Logger

	loaded atomic.Bool // the store was read once: until then a credential it might refuse cannot be checked

	mu      sync.RWMutex          // guards entries, bySub and byJTI
	entries map[string]Revocation // by configuration key
	bySub   map[string]time.Time  // the latest revocation of each user
	byJTI   map[string]bool
}

// NewRevocationList loads the list from the store. A store that cannot be read now (a hub
// cluster without quorum yet) is not an error: the list is read by Run, and until it was
// read once the credentials it may refuse cannot be checked (UnavailableError: editors
// retry).
func NewRevocationList(ctx context.Context, opts RevocationOptions) (*RevocationList, error) {
	if opts.Store == nil || opts.Lifetime <= 0 {
		return nil, errors.New("auth: a revocation list needs a store and a lifetime")
	}
	if opts.Max <= 0 {
		opts.Max = DefaultMaxRevocations
	}
	l := &RevocationList{opts: opts, clk: opts.Clock, log: opts.Logger, entries: map[string]Revocation{}}
	if l.clk == nil {
		l.clk = clock.Real()
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	l.index()
	if opts.Deferred {
		return l, nil
	}
	if _, err := l.Load(ctx); err != nil {
		l.log.Warn("the revocation list cannot be read yet; signed tokens and webhook answers are refused until it is",
			slog.String("error", err.Error()))
	}
	return l, nil
}

// revocationKey names an entry: its time first, so that a later revocation of the same user
// is a new key (another node sees a new key, never a changed value).
func revocationKey(r Revocation) string {
	kind, v := "sub", r.Sub
	if r.JTI != "" {
		kind, v = "jti", r.JTI
	}
	sum := sha256.Sum256([]byte(v))
	return fmt.Sprintf("%s%013d-%s-%s", revocationPrefix, r.At.UnixMilli(), kind, hex.EncodeToString(sum[:16]))
}

// Revoke adds a revocation of a user (sub) or of a token id (jti) — exactly one — stores it,
// and calls OnChange. It returns the entry.
func (l *RevocationList) Revoke(ctx context.Context, sub, jti string) (Revocation, error) {
	switch {
	case (sub == "") == (jti == ""):
		return Revocation{}, fmt.Errorf("%w: give the user (sub) or the token id (jti) to revoke, one of them", ErrInvalidRevocation)
	case len(sub) > maxSubBytes || !printable(sub):
		return Revocation{}, fmt.Errorf("%w: sub must be 1 to %d printable bytes", ErrInvalidRevocation, maxSubBytes)
	case len(jti) > maxJTIBytes || !printable(jti):
		return Revocation{}, fmt.Errorf("%w: jti must be 1 to %d printable bytes", ErrInvalidRevocation, maxJTIBytes)
	}
	now := l.clk.Now()
	r := Revocation{Sub: sub, JTI: jti, At: now.UTC().Truncate(time.Millisecond).Add(time.Millisecond), Until: now.Add(l.opts.Lifetime).UTC()}
	l.mu.RLock()
	n := len(l.entries)
	l.mu.RUnlock()
	if n >= l.opts.Max {
		return Revocation{}, ErrTooManyRevocations
	}
	v, _ := json.Marshal(r)
	key := revocationKey(r)
	if err := l.opts.Store.PutConfig(ctx, key, v); err != nil {
		return Revocation{}, fmt.Errorf("storing the revocation: %w", err)
	}
	l.mu.Lock()
	l.entries[key] = r
	l.indexLocked()
	l.mu.Unlock()
	attrs := []slog.Attr{slog.String("action", "client-revoked"), slog.Time("until", r.Until)}
	if sub != "" {
		attrs = append(attrs, slog.String("user", sub))
	} else {
		attrs = append(attrs, slog.String("jti", jti))
	}
	l.log.LogAttrs(ctx, slog.LevelInfo, "editor credentials revoked", attrs...)
	if l.opts.OnChange != nil {
		l.opts.OnChange()
	}
	return r, nil
}

// Load reads the list from the store: new entries are read, entries gone from the store are
// dropped, and entries past Until are deleted from it. It reports whether the list changed
// (it does not call OnChange; Run does).
func (l *RevocationList) Load(ctx context.Context) (bool, error) {
	keys, err := l.opts.Store.ConfigKeys(ctx, revocationPrefix)
	if err != nil {
		return false, err
	}
	now := l.clk.Now()
	l.mu.RLock()
	have := make(map[string]Revocation, len(l.entries))
	for k, r := range l.entries {
		have[k] = r
	}
	l.mu.RUnlock()
	next := make(map[string]Revocation, len(keys))
	changed := false
	for _, k := range keys {
		if !strings.HasPrefix(k, revocationPrefix) {
			continue
		}
		r, ok := have[k]
		if !ok {
			v, err := l.opts.Store.Config(ctx, k)
			if err != nil {
				continue // deleted meanwhile (expired), or unreadable now: the next load tries again
			}
			if err := json.Unmarshal(v, &r); err != nil || (r.Sub == "") == (r.JTI == "") {
				l.log.Warn("a revocation entry of the store does not decode; ignored", slog.String("key", k))
				continue
			}
			changed = true
		}
		if !now.Before(r.Until) {
			_ = l.opts.Store.DeleteConfig(ctx, k) // every token it refused has expired
			changed = changed || ok
			continue
		}
		next[k] = r
	}
	if len(next) != len(have) {
		changed = true
	}
	if changed {
		l.mu.Lock()
		l.entries = next
		l.indexLocked()
		l.mu.Unlock()
	}
	l.loaded.Store(true)
	return changed, nil
}

// Run loads the list every interval (at once when it was never read, then every second until
// it was) until ctx ends, calling
// OnChange when it changed: how a revocation made on another node of a hub cluster reaches
// this one (and how expired entries leave). Over a ConfigWatcher it loads when the store
// says the list changed, and every watchedPoll besides.
func (l *RevocationList) Run(ctx context.Context, interval time.Duration) {
	wake := make(chan struct{}, 1)
	var watching atomic.Bool
	watchDone := make(chan struct{})
	defer func() { <-watchDone }()
	if w, ok := l.opts.Store.(ConfigWatcher); !ok {
		close(watchDone)
	} else {
		go func() {
			defer close(watchDone)
			for ctx.Err() == nil {
				err := w.WatchConfig(ctx, revocationPrefix, func() {
					select {
					case wake <- struct{}{}:
					default:
					}
				})
				if err == nil {
					watching.Store(true)
					return
				}
				select { // the store is not reachable yet (a cluster without quorum)
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
		}()
	}
	// The ticker beats every second (at most interval): a list never read yet is tried again
	// at each beat; once read, it is read again after interval (watchedPoll when watched).
	tick := clock.NewTicker(l.clk, min(interval, time.Second))
	defer tick.Stop()
	failing := false
	var last time.Time
	for first := !l.loaded.Load(); ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-wake:
			case <-tick.C:
				due := interval
				if watching.Load() {
					due = watchedPoll
				}
				if l.loaded.Load() && l.clk.Now().Sub(last) < due {
					continue
				}
			}
		}
		last = l.clk.Now()
		changed, err := l.Load(ctx)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			failing = true
			l.log.Warn("the revocation list cannot be read now; the entries already known stay in force", slog.String("error", err.Error()))
		case err == nil:
			failing = false
		}
		if changed && l.opts.OnChange != nil {
			l.opts.OnChange()
		}
	}
}

// List returns the entries, oldest first.
func (l *RevocationList) List() []Revocation {
	l.mu.RLock()
	defer l.mu.RUnlock()
	keys := sortedKeys(l.entries)
	out := make([]Revocation, 0, len(keys))
	for _, k := range keys {
		out = append(out, l.entries[k])
	}
	return out
}

func (l *RevocationList) index() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.indexLocked()
}

func (l *RevocationList) indexLocked() {
	l.bySub, l.byJTI = map[string]time.Time{}, map[string]bool{}
	for _, r := range l.entries {
		if r.Sub != "" && r.At.After(l.bySub[r.Sub]) {
			l.bySub[r.Sub] = r.At
		}
		if r.JTI != "" {
			l.byJTI[r.JTI] = true
		}
	}
}

// check refuses a grant the list revokes: its user revoked after its credential was issued,
// or its jti revoked.
func (l *RevocationList) check(g ClientGrant) error {
	if l == nil {
		return nil
	}
	if !l.loaded.Load() {
		return &UnavailableError{What: "the revocation list has not been read yet", RetryAfter: 2 * time.Second}
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if at, ok := l.bySub[g.User]; ok && g.User != "" && g.issued.Before(at) {
		return refuse(CheckRevoked, "the credentials of this user issued before %s were revoked", at.UTC().Format(time.RFC3339))
	}
	if g.jti != "" && l.byJTI[g.jti] {
		return refuse(CheckRevoked, "this token (its jti) was revoked")
	}
	return nil
}
