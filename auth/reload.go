package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/replication/protocol"
)

// Reload outcomes, as ReloaderOptions.OnReload reports them (and the hub counts them).
const (
	ReloadChanged = "changed" // a new table was installed
	ReloadFailed  = "failed"  // the file could not be read or parsed; the old table stays
)

// ReloaderOptions configure a Reloader.
type ReloaderOptions struct {
	// Path is the tokens file.
	Path string
	// Namespaces lists the hub's namespace ids. A grant of "*" that is narrowed is revoked
	// namespace by namespace over this list; nil means no namespace is known.
	Namespaces func(ctx context.Context) ([]string, error)
	// OnReload, when set, is told each reload's outcome (ReloadChanged, ReloadFailed).
	OnReload func(outcome string)
	// OnChange, when set, is called after a reload installed a changed file (the client
	// listener re-checks its editors' tokens then: yws.Server.Revalidate).
	OnChange func()
	// Logger receives reload results: peer ids and counts, never tokens or their hashes.
	Logger *slog.Logger
	// Clock judges client tokens' expiry; nil: the real clock.
	Clock clock.Reader
	// Missing finishes the warning logged when the file does not exist yet: who is refused
	// until it does and the command that creates it ("every editor is refused until `peer
	// token add --data DIR --client NAME` creates one"). Empty: a hub's words.
	Missing string
}

// Reloader keeps a node's authentication in step with its tokens file: a PeerTable for the
// replication listener and a ClientTable for the client listener, and it is the
// authenticator of both (ws.Authenticator and ws.RevocationSource; ClientAuthenticator).
// Reload re-reads the file, and when its content changed installs the new entries and then
// revokes what the change took away: every live connection of a peer one of whose
// tokens disappeared (the hub drains it with GOAWAY REAUTH_REQUIRED and the peer must
// authenticate again), and, for a peer whose tokens all remain, every namespace whose grant
// was withdrawn or narrowed (lost read or submit, or another owner) — those namespaces end
// with NAMESPACE_UNAUTHORIZED. A widened grant takes effect at the next OPEN. A file that
// cannot be read or parsed leaves the tables as they were.
//
// A token the tables do not know makes the Reloader check the tokens file (one stat) and
// reload it if it changed since it was last read, so a peer or an editor started right
// after `token add` is not refused during the second the poll would take.
type Reloader struct {
	opts    ReloaderOptions
	table   *PeerTable
	clients *ClientTable
	log     *slog.Logger

	mu      sync.Mutex // serialises reloads
	entries []PeerEntry
	sum     [sha256.Size]byte
	exists  bool
	failed  [sha256.Size]byte // the content of the last failed reload, to log it once
	stat    os.FileInfo       // of the file as last read (nil: absent)
}

// AuthenticateClient is the client table's, reloading the file first when the token is
// unknown and the file changed.
func (r *Reloader) AuthenticateClient(ctx context.Context, c ClientCredential) (ClientGrant, error) {
	return r.lookupClient(func() (ClientGrant, error) { return r.clients.AuthenticateClient(ctx, c) })
}

// RecheckClient is the client table's, reloading the file first when the token is unknown
// and the file changed.
func (r *Reloader) RecheckClient(g ClientGrant) (ClientGrant, error) {
	return r.lookupClient(func() (ClientGrant, error) { return r.clients.RecheckClient(g) })
}

// lookupClient answers with lookup, and when it does not know the token and the file
// changed, reloads it and answers with lookup again. The reload is not the editor's: it
// runs to its end even when the editor goes away.
func (r *Reloader) lookupClient(lookup func() (ClientGrant, error)) (ClientGrant, error) {
	if g, err := lookup(); err == nil {
		return g, nil
	}
	// As for peers (Authenticate): look again after a reload this call made or waited for.
	if r.statChanged() {
		_, _ = r.reload(context.Background(), ByUnknownToken)
	}
	return lookup()
}

// ClientCount returns how many client tokens the table holds.
func (r *Reloader) ClientCount() int { return r.clients.Len() }

// NewReloader reads the tokens file and returns a Reloader whose table holds it. A missing
// file is an empty table (every upgrade gets 401 until `hub token add`); an unreadable or
// malformed one is an error, so the hub refuses to start.
func NewReloader(opts ReloaderOptions) (*Reloader, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	data, exists, err := readRaw(opts.Path)
	if err != nil {
		return nil, err
	}
	f, err := parseFile(opts.Path, data)
	if err != nil {
		return nil, err
	}
	table, err := NewPeerTable(f.Peers)
	if err != nil {
		return nil, err
	}
	if !exists {
		missing := opts.Missing
		if missing == "" {
			missing = "every peer and editor is refused until `hub token add` creates one"
		}
		log.Warn("no tokens file yet: "+missing, slog.String("path", opts.Path))
	}
	st, _ := os.Stat(opts.Path)
	clients := &ClientTable{clock: opts.Clock}
	clients.Replace(f.Clients)
	return &Reloader{opts: opts, table: table, clients: clients, log: log, entries: f.Peers,
		sum: sha256.Sum256(data), exists: exists, stat: st}, nil
}

// Authenticate is the peer table's, reloading the file first when the token is unknown
// and the file changed. Revocations are the table's.
func (r *Reloader) Authenticate(ctx context.Context, token string) (PeerIdentity, error) {
	id, err := r.table.Authenticate(ctx, token)
	if !errors.Is(err, ErrUnauthenticated) || token == "" {
		return id, err
	}
	// statChanged waits for a reload already under way (another peer's unknown token, or the
	// poll) and then reports no change, so the table is asked again either way: the token
	// may be in what that reload installed.
	if r.statChanged() {
		_, _ = r.reload(ctx, ByUnknownToken)
	}
	return r.table.Authenticate(ctx, token)
}

// AuthorizeNamespace is the peer table's.
func (r *Reloader) AuthorizeNamespace(peer string, ns protocol.NamespaceID) (NamespaceGrant, bool) {
	return r.table.AuthorizeNamespace(peer, ns)
}

// SubscribeRevocations is the peer table's: the revocations each reload issues.
func (r *Reloader) SubscribeRevocations(f func(PeerRevocation)) func() {
	return r.table.SubscribeRevocations(f)
}

// PeerTable is the table of the peers' tokens as last installed.
func (r *Reloader) PeerTable() *PeerTable { return r.table }

// Peers returns how many token entries the table holds.
func (r *Reloader) Peers() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.entries)
}

// statChanged reports whether the tokens file's metadata differs from when it was last read
// (another file renamed over it, another size or modification time, or it appeared or went).
func (r *Reloader) statChanged() bool {
	st, err := os.Stat(r.opts.Path)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil || r.stat == nil {
		return (err == nil) != (r.stat != nil)
	}
	return !os.SameFile(st, r.stat) || st.Size() != r.stat.Size() || !st.ModTime().Equal(r.stat.ModTime())
}

// What made the Reloader read the tokens file, as its audit line names it.
const (
	ByCall         = "call"          // Reload
	ByPoll         = "file-change"   // Run's poll saw the file change
	ByHangup       = "sighup"        // Run's hangup channel
	ByUnknownToken = "unknown-token" // an unknown token arrived and the file had changed
)

// Reload re-reads the tokens file; when its content changed it installs it and issues the
// revocations, then calls OnChange (outside the reloader's lock: the hook may look tokens
// up). It reports whether the table changed.
func (r *Reloader) Reload(ctx context.Context) (bool, error) { return r.reload(ctx, ByCall) }

// reload is Reload, naming what triggered it in the audit line.
func (r *Reloader) reload(ctx context.Context, by string) (bool, error) {
	changed, err := r.install(ctx, by)
	if changed && r.opts.OnChange != nil {
		r.opts.OnChange()
	}
	return changed, err
}

// install reads the file and installs a changed one. A change is one INFO line, "tokens
// file reloaded", saying which peers gained a token, had one replaced, lost all, or lost
// namespaces, and how many client tokens there are (peer ids and counts, never tokens or
// their hashes).
func (r *Reloader) install(ctx context.Context, by string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, _ := os.Stat(r.opts.Path)
	data, exists, err := readRaw(r.opts.Path)
	if err != nil {
		r.fail(data, err)
		return false, err
	}
	r.stat = st
	sum := sha256.Sum256(data)
	if sum == r.sum && exists == r.exists {
		return false, nil
	}
	f, err := parseFile(r.opts.Path, data)
	if err != nil {
		r.fail(data, err)
		return false, err
	}
	entries := f.Peers
	if err := r.table.Replace(entries); err != nil {
		r.fail(data, err)
		return false, err
	}
	var known []string
	if r.opts.Namespaces != nil {
		if known, err = r.opts.Namespaces(ctx); err != nil {
			r.log.Error("listing namespaces for token revocation; only explicitly listed namespaces are revoked", slog.String("error", err.Error()))
		}
	}
	revs := Revocations(r.entries, entries, known)
	change := describeChange(r.entries, entries, revs)
	r.entries, r.sum, r.exists, r.failed = entries, sum, exists, [sha256.Size]byte{}
	for _, rv := range revs {
		// After Replace: a reconnect does not regain what was withdrawn.
		r.table.Revoke(rv)
	}
	attrs := []slog.Attr{slog.String("action", "tokens-reloaded"), slog.String("by", by), slog.String("path", r.opts.Path),
		slog.Int("entries", len(entries))}
	for _, c := range []struct {
		key   string
		peers []string
	}{
		{"peersAdded", change.added}, {"peersRotated", change.rotated}, {"peersRemoved", change.removed},
		{"peersNarrowed", change.narrowed}, {"peersOtherwiseChanged", change.other},
	} {
		if len(c.peers) > 0 {
			attrs = append(attrs, slog.Any(c.key, c.peers))
		}
	}
	r.clients.Replace(f.Clients)
	attrs = append(attrs, slog.Int("clients", len(f.Clients)))
	r.log.LogAttrs(ctx, slog.LevelInfo, "tokens file reloaded", attrs...)
	if r.opts.OnReload != nil {
		r.opts.OnReload(ReloadChanged)
	}
	return true, nil
}

// change is what a tokens file change did, by peer: a new peer (added); a peer whose
// token hashes changed and that still has one (rotated: its connections re-authenticate);
// a peer with no token left (removed: its connections end); a peer whose tokens stayed but
// lost namespaces (narrowed); anything else (other: a widened grant, a second token).
type change struct{ added, rotated, removed, narrowed, other []string }

func describeChange(old, new []PeerEntry, revs []PeerRevocation) change {
	peers := func(es []PeerEntry) map[string][]PeerEntry {
		m := map[string][]PeerEntry{}
		for _, e := range es {
			m[e.PeerInstanceID] = append(m[e.PeerInstanceID], e)
		}
		return m
	}
	before, after := peers(old), peers(new)
	revoked := map[string]PeerRevocation{}
	for _, rv := range revs {
		revoked[rv.PeerInstanceID] = rv
	}
	var c change
	for _, id := range sortedKeys(after) {
		if _, had := before[id]; !had {
			c.added = append(c.added, id)
		}
	}
	for _, id := range sortedKeys(before) {
		rv, isRevoked := revoked[id]
		switch {
		case len(after[id]) == 0:
			c.removed = append(c.removed, id)
		case isRevoked && len(rv.Namespaces) == 0:
			c.rotated = append(c.rotated, id)
		case isRevoked:
			c.narrowed = append(c.narrowed, id)
		case !slices.EqualFunc(before[id], after[id], func(a, b PeerEntry) bool { return a.TokenSHA256 == b.TokenSHA256 && sameGrant(a, b) }):
			c.other = append(c.other, id)
		}
	}
	return c
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (r *Reloader) fail(data []byte, err error) {
	if r.opts.OnReload != nil {
		r.opts.OnReload(ReloadFailed)
	}
	if sum := sha256.Sum256(data); sum != r.failed {
		r.failed = sum
		r.log.Error("tokens file not reloaded; the previous table stays in force", slog.String("error", err.Error()))
	}
}

// Run polls the tokens file every interval (measured by clk) and reloads it when it changed,
// and at once whenever hup receives (SIGHUP), until ctx ends.
func (r *Reloader) Run(ctx context.Context, clk clock.Clock, interval time.Duration, hup <-chan struct{}) {
	tick := clock.NewTicker(clk, interval)
	defer tick.Stop()
	for {
		by := ByPoll
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-hup:
			by = ByHangup
		}
		_, _ = r.reload(ctx, by)
	}
}

// Revocations computes what a change of the tokens file from old to new withdraws (see
// “Authorization” in docs/protocol.md): a whole-peer revocation for every peer one of whose
// token hashes is gone, and otherwise, per peer, the namespaces (among known and the ids old
// lists) that old granted and new denies or grants with less (no read, no submit, or another
// owner).
func Revocations(old, new []PeerEntry, known []string) []PeerRevocation {
	oldT, _ := NewPeerTable(old)
	newT, _ := NewPeerTable(new)
	hashes := map[[sha256.Size]byte]string{}
	for _, e := range new {
		hashes[e.TokenSHA256] = e.PeerInstanceID
	}
	var peers []string
	whole := map[string]bool{}
	for _, e := range old {
		if !slices.Contains(peers, e.PeerInstanceID) {
			peers = append(peers, e.PeerInstanceID)
		}
		if p, ok := hashes[e.TokenSHA256]; !ok || p != e.PeerInstanceID {
			whole[e.PeerInstanceID] = true
		}
	}
	var out []PeerRevocation
	for _, peer := range peers {
		if whole[peer] {
			out = append(out, PeerRevocation{PeerInstanceID: peer})
			continue
		}
		candidates := slices.Clone(known)
		for _, e := range old {
			if e.PeerInstanceID == peer {
				candidates = append(candidates, e.Namespaces...)
			}
		}
		slices.Sort(candidates)
		candidates = slices.Compact(candidates)
		var lost []protocol.NamespaceID
		for _, s := range candidates {
			ns, err := protocol.ParseNamespaceID(s)
			if err != nil {
				continue // "*"
			}
			was, ok := oldT.AuthorizeNamespace(peer, ns)
			if !ok {
				continue
			}
			now, ok := newT.AuthorizeNamespace(peer, ns)
			if !ok || now.Owner != was.Owner || (was.Read && !now.Read) || (was.Submit && !now.Submit) {
				lost = append(lost, ns)
			}
		}
		if len(lost) > 0 {
			out = append(out, PeerRevocation{PeerInstanceID: peer, Namespaces: lost})
		}
	}
	return out
}
