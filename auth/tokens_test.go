package auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/replication/protocol"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	nsA = "ns-0123456789abcdef0123456789abcdef"
	nsB = "ns-fedcba9876543210fedcba9876543210"
)

func TestAddStoresOnlyTheHashAndPrintsTokenOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hub", FileName)
	token, err := Add(path, PeerGrant{PeerInstanceID: "peer-a", Owner: "default", Namespaces: []string{"*"}, Read: true, Submit: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) != TokenBytes {
		t.Fatalf("token %q is not %d base64url bytes (%v)", token, TokenBytes, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(token)) {
		t.Fatal("the tokens file contains the token itself")
	}
	sum := sha256.Sum256([]byte(token))
	if !bytes.Contains(data, []byte(hex.EncodeToString(sum[:]))) {
		t.Fatalf("the tokens file lacks the token's SHA-256:\n%s", data)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("tokens file mode %v, want 0600", st.Mode().Perm())
	}
	// The hub's own parser reads it, and the table authenticates the token.
	f, err := ParseFile(data)
	if err != nil {
		t.Fatal(err)
	}
	table, err := NewPeerTable(f.Peers)
	if err != nil {
		t.Fatal(err)
	}
	id, err := table.Authenticate(context.Background(), token)
	if err != nil || id.PeerInstanceID != "peer-a" {
		t.Fatalf("Authenticate = %v, %v", id, err)
	}
	if _, err := table.Authenticate(context.Background(), token+"x"); err != ErrUnauthenticated {
		t.Fatalf("a wrong token: %v, want ErrUnauthenticated", err)
	}
}

func TestAddRefusesBadGrants(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	for _, g := range []PeerGrant{
		{PeerInstanceID: "Peer-A", Owner: "default", Namespaces: []string{"*"}, Read: true},
		{PeerInstanceID: "peer-a", Owner: "", Namespaces: []string{"*"}, Read: true},
		{PeerInstanceID: "peer-a", Owner: "default", Read: true},
		{PeerInstanceID: "peer-a", Owner: "default", Namespaces: []string{"ns-123"}, Read: true},
		{PeerInstanceID: "peer-a", Owner: "default", Namespaces: []string{"*"}},
	} {
		if _, err := Add(path, g, nil); err == nil {
			t.Errorf("Add(%+v) succeeded", g)
		}
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("a refused grant created the file")
	}
}

func TestConcurrentAddsLoseNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	var wg sync.WaitGroup
	tokensCh := make(chan string, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, err := Add(path, PeerGrant{PeerInstanceID: "peer-" + string(rune('a'+i)), Owner: "default", Namespaces: []string{nsA}, Read: true}, nil)
			if err != nil {
				t.Error(err)
				return
			}
			tokensCh <- tok
		}()
	}
	wg.Wait()
	close(tokensCh)
	entries, _, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 16 {
		t.Fatalf("%d entries after 16 concurrent adds", len(entries))
	}
	table, _ := NewPeerTable(entries)
	for tok := range tokensCh {
		if _, err := table.Authenticate(context.Background(), tok); err != nil {
			t.Fatalf("a token added concurrently does not authenticate: %v", err)
		}
	}
}

func TestRemoveByPeerAndHashPrefix(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	g := PeerGrant{PeerInstanceID: "peer-a", Owner: "default", Namespaces: []string{"*"}, Read: true, Submit: true}
	old, _ := Add(path, g, nil)
	fresh, _ := AddAnother(path, g, nil)
	if _, err := Add(path, PeerGrant{PeerInstanceID: "peer-b", Owner: "default", Namespaces: []string{"*"}, Read: true}, nil); err != nil {
		t.Fatal(err)
	}
	oldSum := sha256.Sum256([]byte(old))
	n, err := Remove(path, "peer-a", hex.EncodeToString(oldSum[:])[:12])
	if err != nil || n != 1 {
		t.Fatalf("Remove by prefix = %d, %v; want 1", n, err)
	}
	entries, _, _ := Read(path)
	table, _ := NewPeerTable(entries)
	if _, err := table.Authenticate(context.Background(), old); err == nil {
		t.Fatal("the retired token still authenticates")
	}
	if _, err := table.Authenticate(context.Background(), fresh); err != nil {
		t.Fatalf("the kept token: %v", err)
	}
	if n, err := Remove(path, "peer-a", ""); err != nil || n != 1 {
		t.Fatalf("Remove all of peer-a = %d, %v", n, err)
	}
	entries, _, _ = Read(path)
	if len(entries) != 1 || entries[0].PeerInstanceID != "peer-b" {
		t.Fatalf("left %+v", entries)
	}
}

// A second Add for the same peer writes nothing and says which token the peer has; AddAnother
// keeps both valid.
func TestAddRefusesAPeerThatHasAToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	g := PeerGrant{PeerInstanceID: "peer-a", Owner: "default", Namespaces: []string{"*"}, Read: true, Submit: true}
	first, err := Add(path, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	_, err = Add(path, g, nil)
	var ex *ExistingTokenError
	sum := sha256.Sum256([]byte(first))
	if !errors.As(err, &ex) || ex.PeerInstanceID != "peer-a" || !slices.Equal(ex.HashPrefixes, []string{hex.EncodeToString(sum[:])[:HashPrefixLen]}) {
		t.Fatalf("second Add: %v (%+v)", err, ex)
	}
	if !strings.Contains(err.Error(), "peer-a already has a token (sha256:"+hex.EncodeToString(sum[:6])) {
		t.Fatalf("message %q", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("the refused Add changed the file")
	}
	second, err := AddAnother(path, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	entries, _, _ := Read(path)
	table, _ := NewPeerTable(entries)
	for _, tok := range []string{first, second} {
		if _, err := table.Authenticate(context.Background(), tok); err != nil {
			t.Fatalf("after AddAnother a token does not authenticate: %v", err)
		}
	}
}

// Rotate replaces a peer's token in one write: the old one stops authenticating, the new one
// carries the same grant, other peers are untouched.
func TestRotateReplacesTheTokenKeepingTheGrant(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	g := PeerGrant{PeerInstanceID: "peer-a", Owner: "team", Namespaces: []string{nsA, nsB}, Read: true}
	old, _ := Add(path, g, nil)
	other, _ := Add(path, PeerGrant{PeerInstanceID: "peer-b", Owner: "default", Namespaces: []string{"*"}, Read: true, Submit: true}, nil)
	fresh, err := Rotate(path, "peer-a", "", nil)
	if err != nil || fresh == old || len(fresh) != 43 {
		t.Fatalf("Rotate = %q, %v", fresh, err)
	}
	entries, _, _ := Read(path)
	if len(entries) != 2 {
		t.Fatalf("%d entries after a rotation, want 2: %+v", len(entries), entries)
	}
	table, _ := NewPeerTable(entries)
	if _, err := table.Authenticate(context.Background(), old); err == nil {
		t.Fatal("the rotated-out token still authenticates")
	}
	if _, err := table.Authenticate(context.Background(), other); err != nil {
		t.Fatalf("another peer's token: %v", err)
	}
	id, err := table.Authenticate(context.Background(), fresh)
	if err != nil || id.PeerInstanceID != "peer-a" {
		t.Fatalf("the new token: %v %v", id, err)
	}
	for _, e := range entries {
		if e.PeerInstanceID == "peer-a" && (e.Owner != "team" || !slices.Equal(e.Namespaces, []string{nsA, nsB}) || !e.Read || e.Submit) {
			t.Fatalf("the grant changed: %+v", e)
		}
	}
	// The reloader sees one revocation of peer-a (its old hash is gone), none of peer-b.
	if revs := Revocations([]PeerEntry{entry("peer-a", old, "team", true, false, nsA, nsB)}, entries, nil); len(revs) != 1 || revs[0].PeerInstanceID != "peer-a" || len(revs[0].Namespaces) != 0 {
		t.Fatalf("revocations %+v", revs)
	}
	if _, err := Rotate(path, "peer-z", "", nil); !errors.Is(err, ErrNoToken) {
		t.Fatalf("rotating a peer without a token: %v", err)
	}
	if _, err := Rotate(path, "peer-a", "ffffffffffff", nil); !errors.Is(err, ErrNoToken) || !strings.Contains(err.Error(), "ffffffffffff") {
		t.Fatalf("rotating with a prefix that matches nothing: %v", err)
	}
}

// With several tokens of different grants Rotate needs a prefix; with one it replaces only
// that token.
func TestRotateOneOfSeveralTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	first, _ := Add(path, PeerGrant{PeerInstanceID: "peer-a", Owner: "default", Namespaces: []string{nsA}, Read: true}, nil)
	second, _ := AddAnother(path, PeerGrant{PeerInstanceID: "peer-a", Owner: "default", Namespaces: []string{nsB}, Read: true}, nil)
	before, _ := os.ReadFile(path)
	if _, err := Rotate(path, "peer-a", "", nil); err == nil || !strings.Contains(err.Error(), "different grants") {
		t.Fatalf("ambiguous rotation: %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("a refused rotation changed the file")
	}
	sum := sha256.Sum256([]byte(second))
	fresh, err := Rotate(path, "peer-a", strings.ToUpper(hex.EncodeToString(sum[:4])), nil)
	if err != nil {
		t.Fatal(err)
	}
	entries, _, _ := Read(path)
	table, _ := NewPeerTable(entries)
	for tok, want := range map[string]bool{first: true, second: false, fresh: true} {
		if _, err := table.Authenticate(context.Background(), tok); (err == nil) != want {
			t.Errorf("token valid=%v, want %v", err == nil, want)
		}
	}
	g, ok := table.AuthorizeNamespace("peer-a", protocol.MustNamespaceID(nsB))
	if !ok || !g.Read {
		t.Fatal("the rotated token lost its grant of nsB")
	}
}

func TestReadMissingIsEmptyAndBadIsError(t *testing.T) {
	dir := t.TempDir()
	entries, exists, err := Read(filepath.Join(dir, "none.json"))
	if err != nil || exists || entries != nil {
		t.Fatalf("missing file: %v %v %v", entries, exists, err)
	}
	for name, body := range map[string]string{
		"syntax":   `{"peers":[`,
		"unknown":  `{"peers":[{"instanceId":"peer-a","tokenSha256":"` + strings.Repeat("0", 64) + `","owner":"default","namespaces":["*"],"read":true,"submit":true,"admin":true}]}`,
		"hash":     `{"peers":[{"instanceId":"peer-a","tokenSha256":"abc","owner":"default","namespaces":["*"],"read":true}]}`,
		"instance": `{"peers":[{"instanceId":"Peer A","tokenSha256":"` + strings.Repeat("0", 64) + `","owner":"default","namespaces":["*"],"read":true}]}`,
		"ns":       `{"peers":[{"instanceId":"peer-a","tokenSha256":"` + strings.Repeat("0", 64) + `","owner":"default","namespaces":["ns-x"],"read":true}]}`,
	} {
		p := filepath.Join(dir, name+".json")
		os.WriteFile(p, []byte(body), 0o600)
		if _, _, err := Read(p); err == nil {
			t.Errorf("%s: a bad tokens file was accepted", name)
		} else if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: the error does not name the file: %v", name, err)
		}
	}
}

func TestEncodeParseRoundTrip(t *testing.T) {
	in := []PeerEntry{
		{PeerInstanceID: "peer-a", TokenSHA256: sha256.Sum256([]byte("x")), Owner: "default", Namespaces: []string{"*"}, Read: true, Submit: true},
		{PeerInstanceID: "peer-b", TokenSHA256: sha256.Sum256([]byte("y")), Owner: "team", Namespaces: []string{nsA, nsB}, Read: true},
	}
	out, err := Parse(EncodeFile(File{Peers: in}))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[1].Owner != "team" || !slices.Equal(out[1].Namespaces, []string{nsA, nsB}) || out[1].Submit || out[0].TokenSHA256 != in[0].TokenSHA256 {
		t.Fatalf("round trip: %+v", out)
	}
	if got, err := Parse(EncodeFile(File{})); err != nil || len(got) != 0 {
		t.Fatalf("empty table: %v %v", got, err)
	}
}

func entry(peer, token, owner string, read, submit bool, namespaces ...string) PeerEntry {
	return PeerEntry{PeerInstanceID: peer, TokenSHA256: HashToken(token), Owner: owner, Namespaces: namespaces, Read: read, Submit: submit}
}

func nsList(ids ...string) []protocol.NamespaceID {
	out := make([]protocol.NamespaceID, len(ids))
	for i, s := range ids {
		out[i], _ = protocol.ParseNamespaceID(s)
	}
	return out
}

// docs/protocol.md#authorization: a removed token revokes the peer's live access; a narrowed
// grant revokes the namespaces it lost; an unchanged or widened grant revokes nothing.
func TestS19_Revocations(t *testing.T) {
	a1 := entry("peer-a", "t1", "default", true, true, "*")
	b1 := entry("peer-b", "t2", "default", true, true, nsA, nsB)
	known := []string{nsA, nsB}
	cases := []struct {
		name     string
		old, new []PeerEntry
		want     []PeerRevocation
	}{
		{"unchanged", []PeerEntry{a1, b1}, []PeerEntry{a1, b1}, nil},
		{"token removed", []PeerEntry{a1, b1}, []PeerEntry{b1}, []PeerRevocation{{PeerInstanceID: "peer-a"}}},
		{"token rotated", []PeerEntry{a1}, []PeerEntry{entry("peer-a", "t9", "default", true, true, "*")}, []PeerRevocation{{PeerInstanceID: "peer-a"}}},
		{"second token added", []PeerEntry{a1}, []PeerEntry{a1, entry("peer-a", "t9", "default", true, true, "*")}, nil},
		{"star narrowed to a list", []PeerEntry{a1}, []PeerEntry{entry("peer-a", "t1", "default", true, true, nsB)},
			[]PeerRevocation{{PeerInstanceID: "peer-a", Namespaces: nsList(nsA)}}},
		{"list narrowed", []PeerEntry{b1}, []PeerEntry{entry("peer-b", "t2", "default", true, true, nsA)},
			[]PeerRevocation{{PeerInstanceID: "peer-b", Namespaces: nsList(nsB)}}},
		{"submit withdrawn", []PeerEntry{b1}, []PeerEntry{entry("peer-b", "t2", "default", true, false, nsA, nsB)},
			[]PeerRevocation{{PeerInstanceID: "peer-b", Namespaces: nsList(nsA, nsB)}}},
		{"owner changed", []PeerEntry{b1}, []PeerEntry{entry("peer-b", "t2", "other", true, true, nsA, nsB)},
			[]PeerRevocation{{PeerInstanceID: "peer-b", Namespaces: nsList(nsA, nsB)}}},
		{"widened", []PeerEntry{entry("peer-b", "t2", "default", true, false, nsA)}, []PeerEntry{entry("peer-b", "t2", "default", true, true, "*")}, nil},
		{"explicit namespace unknown to the hub list", []PeerEntry{b1}, []PeerEntry{entry("peer-b", "t2", "default", true, true, nsA)},
			[]PeerRevocation{{PeerInstanceID: "peer-b", Namespaces: nsList(nsB)}}},
	}
	for _, c := range cases {
		k := known
		if strings.HasPrefix(c.name, "explicit") {
			k = nil
		}
		got := Revocations(c.old, c.new, k)
		if !revsEqual(got, c.want) {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

func revsEqual(a, b []PeerRevocation) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].PeerInstanceID != b[i].PeerInstanceID || !slices.Equal(a[i].Namespaces, b[i].Namespaces) {
			return false
		}
	}
	return true
}

func TestReloaderInstallsAndRevokes(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	tokA, err := Add(path, PeerGrant{PeerInstanceID: "peer-a", Owner: "default", Namespaces: []string{"*"}, Read: true, Submit: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	r, err := NewReloader(ReloaderOptions{Path: path, Namespaces: func(context.Context) ([]string, error) { return []string{nsA}, nil },
		OnReload: func(o string) { outcomes = append(outcomes, o) }})
	if err != nil {
		t.Fatal(err)
	}
	var revs []PeerRevocation
	unsub := r.PeerTable().SubscribeRevocations(func(rv PeerRevocation) { revs = append(revs, rv) })
	defer unsub()
	ctx := context.Background()
	if _, err := r.PeerTable().Authenticate(ctx, tokA); err != nil {
		t.Fatal(err)
	}
	if changed, err := r.Reload(ctx); changed || err != nil {
		t.Fatalf("reload of an unchanged file: %v %v", changed, err)
	}
	// A new token is live without a restart.
	tokB, _ := Add(path, PeerGrant{PeerInstanceID: "peer-b", Owner: "default", Namespaces: []string{nsA}, Read: true}, nil)
	if _, err := r.PeerTable().Authenticate(ctx, tokB); err == nil {
		t.Fatal("authenticated before the reload")
	}
	if changed, err := r.Reload(ctx); !changed || err != nil {
		t.Fatalf("reload after add: %v %v", changed, err)
	}
	if _, err := r.PeerTable().Authenticate(ctx, tokB); err != nil {
		t.Fatalf("new token after reload: %v", err)
	}
	if len(revs) != 0 {
		t.Fatalf("adding a token revoked %+v", revs)
	}
	// A malformed file keeps the table.
	good, _ := os.ReadFile(path)
	os.WriteFile(path, []byte("{not json"), 0o600)
	if _, err := r.Reload(ctx); err == nil {
		t.Fatal("a malformed file reloaded")
	}
	if _, err := r.PeerTable().Authenticate(ctx, tokA); err != nil {
		t.Fatalf("a malformed file changed the table: %v", err)
	}
	WriteAtomic(path, good, 0o600)
	// Removing peer-a's token revokes peer-a as a whole, after the table stopped accepting it.
	if _, err := Remove(path, "peer-a", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if !revsEqual(revs, []PeerRevocation{{PeerInstanceID: "peer-a"}}) {
		t.Fatalf("revocations %+v", revs)
	}
	if _, err := r.PeerTable().Authenticate(ctx, tokA); err != ErrUnauthenticated {
		t.Fatalf("removed token: %v", err)
	}
	if !slices.Equal(outcomes, []string{ReloadChanged, ReloadFailed, ReloadChanged}) {
		t.Fatalf("outcomes %v", outcomes)
	}
}

func TestNewReloaderMissingAndMalformed(t *testing.T) {
	dir := t.TempDir()
	r, err := NewReloader(ReloaderOptions{Path: filepath.Join(dir, FileName)})
	if err != nil {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := r.PeerTable().Authenticate(context.Background(), "anything"); err != ErrUnauthenticated {
		t.Fatalf("empty table: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"peers":[{}]}`), 0o600)
	if _, err := NewReloader(ReloaderOptions{Path: bad}); err == nil {
		t.Fatal("a malformed tokens file was accepted at start")
	}
	unreadable := filepath.Join(dir, "dir.json")
	os.Mkdir(unreadable, 0o700)
	if _, err := NewReloader(ReloaderOptions{Path: unreadable}); err == nil {
		t.Fatal("an unreadable tokens file was accepted at start")
	}
}

func TestReloaderRunPollsAndHonoursHangup(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	r, err := NewReloader(ReloaderOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	fake := clock.NewFake(time.Unix(0, 0))
	hup := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx, fake, time.Second, hup) }()

	tok, _ := Add(path, PeerGrant{PeerInstanceID: "peer-a", Owner: "default", Namespaces: []string{"*"}, Read: true}, nil)
	hup <- struct{}{} // SIGHUP: reload at once
	waitFor(t, func() bool { _, err := r.PeerTable().Authenticate(ctx, tok); return err == nil })

	Remove(path, "peer-a", "")
	if !fake.WaitForTimers(1, 5*time.Second) {
		t.Fatal("the poll timer was not armed")
	}
	fake.Advance(time.Second) // the poll
	waitFor(t, func() bool { _, err := r.PeerTable().Authenticate(ctx, tok); return err != nil })
	cancel()
	<-done
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A token added while the hub runs authenticates at once: the unknown token makes the
// authenticator check the file and reload it, before the poll would.
func TestAuthenticatorReloadsOnUnknownToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	r, err := NewReloader(ReloaderOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	auth := r // the hub's authenticator; that it offers the table's revocations is TestReloaderIsTheListenersAuthenticator's
	ctx := context.Background()
	if _, err := auth.Authenticate(ctx, "nope"); err != ErrUnauthenticated {
		t.Fatalf("unknown token: %v", err)
	}
	for _, peer := range []string{"peer-a", "peer-b"} { // the file appears, then changes
		tok, _ := Add(path, PeerGrant{PeerInstanceID: peer, Owner: "default", Namespaces: []string{"*"}, Read: true}, nil)
		id, err := auth.Authenticate(ctx, tok)
		if err != nil || id.PeerInstanceID != peer {
			t.Fatalf("a token added to the file: %v %v", id, err)
		}
		if _, ok := auth.AuthorizeNamespace(peer, nsList(nsA)[0]); !ok {
			t.Fatal("AuthorizeNamespace does not use the reloaded table")
		}
	}
	if _, err := auth.Authenticate(ctx, "still-nope"); err != ErrUnauthenticated {
		t.Fatalf("unknown token after reloads: %v", err)
	}
}

// Peers and editors whose tokens were added together, connecting at once, are all accepted: the first
// unknown token reloads the file while the others wait for it, and each of those must then
// look its token up in the reloaded table rather than give up because the file no longer
// differs from what was last read.
func TestAuthenticatorConcurrentNewTokens(t *testing.T) {
	const peers = 8
	for round := range 20 {
		path := filepath.Join(t.TempDir(), FileName)
		r, err := NewReloader(ReloaderOptions{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		auth := r
		toks := make([]string, peers)
		for i := range toks {
			toks[i], err = Add(path, PeerGrant{PeerInstanceID: fmt.Sprintf("peer-%d", i), Owner: "default", Namespaces: []string{"*"}, Read: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
		}
		editors := make([]string, peers)
		for i := range editors {
			editors[i], err = AddClient(path, ClientGrant{Name: fmt.Sprintf("editor-%d", i), Namespaces: []string{"*"}}, nil)
			if err != nil {
				t.Fatal(err)
			}
		}
		errs := make(chan error, 2*peers)
		start := make(chan struct{})
		for i := range peers {
			go func() {
				<-start
				id, err := auth.Authenticate(context.Background(), toks[i])
				if err == nil && id.PeerInstanceID != fmt.Sprintf("peer-%d", i) {
					err = fmt.Errorf("authenticated as %q", id.PeerInstanceID)
				}
				errs <- err
			}()
			go func() {
				<-start
				g, err := r.AuthenticateClient(context.Background(), ClientCredential{Token: editors[i]})
				switch {
				case err != nil:
					errs <- fmt.Errorf("editor-%d's token is unknown", i)
				case g.Name != fmt.Sprintf("editor-%d", i):
					errs <- fmt.Errorf("editor-%d's token names %q", i, g.Name)
				default:
					errs <- nil
				}
			}()
		}
		close(start)
		for range 2 * peers {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: a token added before its peer or editor connected was refused: %v", round, err)
			}
		}
	}
}

func TestParseFile(t *testing.T) {
	h := "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	f, err := ParseFile([]byte(`{"peers":[{"instanceId":"peer-a","tokenSha256":"` + h + `","owner":"default","namespaces":["*"],"read":true,"submit":false}]}`))
	es := f.Peers
	if err != nil || len(es) != 1 || es[0].TokenSHA256 != HashToken("test") || es[0].Owner != "default" || !es[0].Read || es[0].Submit {
		t.Fatalf("%+v %v", es, err)
	}
	for _, bad := range []string{`{"peers":[{"instanceId":"a","tokenSha256":"00"}]}`, `{"peers":[{"instanceID":"a"}]}`, `[`} {
		if _, err := ParseFile([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// Client tokens: AddClient stores only the hash with the grant; the peers' part of the file
// is untouched; ParseAll checks names and namespaces; RemoveClient removes by name (and
// hash prefix); the Reloader's Clients lookup finds a token added after it started (one
// stat and a reload), and OnChange runs after a changed reload.
func TestClientTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node", FileName)
	peerTok, err := Add(path, PeerGrant{PeerInstanceID: "peer-a", Owner: "default", Namespaces: []string{"*"}, Read: true, Submit: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	changed := make(chan struct{}, 8)
	var r *Reloader
	r, err = NewReloader(ReloaderOptions{Path: path, OnChange: func() {
		// The hook may look tokens up (the client listener re-checks its editors).
		r.AuthenticateClient(context.Background(), ClientCredential{Token: "unknown"})
		changed <- struct{}{}
	}})
	if err != nil {
		t.Fatal(err)
	}
	alice, err := AddClient(path, ClientGrant{Name: "alice", Namespaces: []string{"*"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	bob, err := AddClient(path, ClientGrant{Name: "bob", Namespaces: []string{nsA}, ReadOnly: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AddClient(path, ClientGrant{Name: "bob", Namespaces: []string{"*"}}, nil); err == nil || !strings.Contains(err.Error(), "already has a token") {
		t.Fatalf("a second token for bob: %v", err)
	}
	data, _ := os.ReadFile(path)
	if bytes.Contains(data, []byte(alice)) || bytes.Contains(data, []byte(bob)) {
		t.Fatal("the tokens file holds a client token itself")
	}
	f, _, err := ReadFile(path)
	if err != nil || len(f.Peers) != 1 || len(f.Clients) != 2 || f.Clients[1].Name != "bob" || !f.Clients[1].ReadOnly {
		t.Fatalf("file: %+v %v", f, err)
	}
	g, err := r.AuthenticateClient(context.Background(), ClientCredential{Token: bob})
	ok := err == nil
	if !ok || g.Name != "bob" || !g.ReadOnly || !g.Allows(nsA) || g.Allows(nsB) {
		t.Fatalf("bob: %+v %v", g, ok)
	}
	select {
	case <-changed:
	default:
		t.Fatal("OnChange did not run after the reload")
	}
	if _, err := r.AuthenticateClient(context.Background(), ClientCredential{Token: peerTok}); err == nil {
		t.Fatal("a peer token authenticates an editor")
	}
	if n, err := RemoveClient(path, "alice", ""); n != 1 || err != nil {
		t.Fatalf("remove: %d %v", n, err)
	}
	if _, err := r.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.AuthenticateClient(context.Background(), ClientCredential{Token: alice}); err == nil {
		t.Fatal("a removed client token still authenticates")
	}
	if peers, _, _ := Read(path); len(peers) != 1 {
		t.Fatal("removing a client touched the peers")
	}
	for _, bad := range []ClientGrant{{Name: "Bad Name", Namespaces: []string{"*"}}, {Name: "ok"}, {Name: "ok", Namespaces: []string{"nope"}}} {
		if _, err := AddClient(path, bad, nil); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
	if _, err := ParseAll([]byte(`{"clients":[{"name":"x","tokenSha256":"00"}]}`)); err == nil {
		t.Error("a short hash was accepted")
	}
	if _, err := ParseAll([]byte(`{"clients":[{"name":"x","tokenSha256":"` + strings.Repeat("0", 64) + `","namespaces":["*"],"write":true}]}`)); err == nil {
		t.Error("an unknown client key was accepted")
	}
}

// Every change of the tokens file is one INFO audit line that says what changed, by peer,
// and what triggered the reload — never a token or its hash.
func TestReloaderAuditLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	tokA, _ := Add(path, PeerGrant{PeerInstanceID: "peer-a", Owner: "default", Namespaces: []string{"*"}, Read: true, Submit: true}, nil)
	Add(path, PeerGrant{PeerInstanceID: "peer-c", Owner: "default", Namespaces: []string{nsA, nsB}, Read: true}, nil)
	var logs bytes.Buffer
	r, err := NewReloader(ReloaderOptions{Path: path, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var all strings.Builder // every line, for the secrets check at the end
	lastLine := func() map[string]any {
		t.Helper()
		all.WriteString(logs.String())
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		var m map[string]any
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
			t.Fatal(err)
		}
		logs.Reset()
		if len(lines) != 1 {
			t.Fatalf("%d lines for one reload: %q", len(lines), lines)
		}
		return m
	}
	fresh, _ := Rotate(path, "peer-a", "", nil)
	tokB, _ := Add(path, PeerGrant{PeerInstanceID: "peer-b", Owner: "default", Namespaces: []string{"*"}, Read: true}, nil)
	if err := Update(path, func(es []PeerEntry) ([]PeerEntry, error) {
		for i := range es {
			if es[i].PeerInstanceID == "peer-c" {
				es[i].Namespaces = []string{nsA}
			}
		}
		return es, nil
	}); err != nil {
		t.Fatal(err)
	}
	if changed, err := r.Reload(ctx); !changed || err != nil {
		t.Fatal(changed, err)
	}
	line := lastLine()
	want := map[string]any{"level": "INFO", "msg": "tokens file reloaded", "action": "tokens-reloaded", "by": ByCall,
		"entries": 3.0, "peersAdded": []any{"peer-b"}, "peersRotated": []any{"peer-a"}, "peersNarrowed": []any{"peer-c"}}
	for k, v := range want {
		if fmt.Sprint(line[k]) != fmt.Sprint(v) {
			t.Errorf("%s = %v, want %v (line %v)", k, line[k], v, line)
		}
	}
	if _, ok := line["peersRemoved"]; ok {
		t.Errorf("nothing was removed: %v", line)
	}
	Remove(path, "peer-b", "")
	r.reload(ctx, ByHangup)
	if line := lastLine(); fmt.Sprint(line["peersRemoved"]) != "[peer-b]" || line["by"] != ByHangup {
		t.Errorf("removal line %v", line)
	}
	for _, secret := range []string{tokA, fresh, tokB} {
		sum := sha256.Sum256([]byte(secret))
		if strings.Contains(all.String(), secret) || strings.Contains(all.String(), hex.EncodeToString(sum[:])[:HashPrefixLen]) {
			t.Fatal("a token or its hash reached the log")
		}
	}
	if !strings.Contains(all.String(), "peer-b") {
		t.Fatal("the secrets check saw no log lines")
	}
}
