package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/replication/protocol"
)

// Defaults of JWTOptions.
const (
	DefaultJWTSkew          = 30 * time.Second // nbf and iat may be this far in the node's future
	DefaultJWTMaxLifetime   = 24 * time.Hour   // a token may be valid for at most this long
	DefaultJWKSRefresh      = 10 * time.Minute // the JWKS URL is fetched again this often
	DefaultJWKSUnknownKid   = 30 * time.Second // at most one fetch this often for an unknown kid
	DefaultJWKSFetchTimeout = 5 * time.Second
	keysFileCheckInterval   = time.Second // the keys file is looked at (one stat) at most this often
	maxSubBytes             = 255
	maxJTIBytes             = 255
	maxTokenBytes           = 16 << 10
)

// Scopes of a signed token's "scope" claim.
const (
	ScopeReadWrite = "read-write" // the default
	ScopeReadOnly  = "read-only"
)

// JWTOptions configure a JWTVerifier. At least one source of keys is required.
type JWTOptions struct {
	// Secret is the HS256 secret (the content of --client-jwt-secret-file), at least
	// MinSecretBytes; nil: no HS256 tokens.
	Secret []byte
	// KeysFile holds public keys (PEM or a JWKS document); it is read again when it changes.
	KeysFile string
	// JWKSURL is fetched for public keys: at start, every JWKSRefresh, and — at most once per
	// JWKSUnknownKid — when a token names a kid the node does not know.
	JWKSURL string
	// Issuer and Audience, when set, must be the token's iss and one of its aud.
	Issuer, Audience string
	// Skew is how far in the node's future nbf and iat may be (DefaultJWTSkew); exp has none.
	Skew time.Duration
	// MaxLifetime bounds how long a token may be valid: exp at most this long after iat (after
	// now without iat). It also bounds how long a revocation must be remembered.
	MaxLifetime time.Duration
	// JWKSRefresh, JWKSUnknownKid and JWKSFetchTimeout pace the JWKS URL (the defaults above).
	JWKSRefresh, JWKSUnknownKid, JWKSFetchTimeout time.Duration
	// HTTPClient fetches the JWKS URL (nil: a client with no redirects to other schemes).
	HTTPClient *http.Client
	// Revocations, when set, refuses tokens of revoked users and ids.
	Revocations *RevocationList
	// Clock judges exp, nbf and iat and paces the fetches; nil: the real clock.
	Clock clock.Clock
	// Logger receives key reloads and fetch failures (never tokens).
	Logger *slog.Logger
}

// JWTVerifier is the ClientAuthenticator of signed client tokens (JWT, RFC 7519, in the JWS
// compact form). A token is accepted when its signature verifies with a key of the node —
// the HS256 secret or a public key chosen by the token's kid, each pinned to its algorithm —
// and its claims hold:
//
//   - exp is required and in the future; nbf and iat, when present, are not later than now
//     plus the skew; exp is at most MaxLifetime after iat (after now without iat);
//   - iss and aud match the configured issuer and audience, when configured;
//   - sub names the user (1 to 255 bytes, printable): the grant's Name and User, in logs and
//     on the dashboard;
//   - ns lists the namespace ids the token may open, or ["*"] for all;
//   - scope is read-write (the default) or read-only;
//   - jti, when present, identifies the token for revocation; neither the user nor the jti is
//     revoked (RevocationList).
//
// A refusal is a *ClientRefusal naming the check that failed. Keys are held in memory: the
// keys file is looked at again at most once a second when a token arrives, the JWKS URL is
// fetched by Run.
type JWTVerifier struct {
	opts JWTOptions
	clk  clock.Clock
	log  *slog.Logger

	secret   *verifyKey                  // nil without a secret
	fileKeys atomic.Pointer[[]verifyKey] // the keys file as last read
	urlKeys  atomic.Pointer[[]verifyKey] // the JWKS URL as last fetched (nil: never fetched)

	fileMu      sync.Mutex // guards fileStat and fileChecked
	fileStat    os.FileInfo
	fileChecked time.Time

	fetching    chan struct{} // cap 1: held by the one JWKS fetch under way
	lastKidTry  time.Time     // the last fetch an unknown kid made (guarded by holding fetching)
	lastFetchOK atomic.Bool
}

// NewJWTVerifier reads the secret and the keys file (errors refuse the configuration); the
// JWKS URL is fetched by Run.
func NewJWTVerifier(opts JWTOptions) (*JWTVerifier, error) {
	if opts.Secret == nil && opts.KeysFile == "" && opts.JWKSURL == "" {
		return nil, errors.New("signed client tokens need a key: --client-jwt-secret-file, --client-jwt-keys or --client-jwt-jwks-url")
	}
	if opts.Skew <= 0 {
		opts.Skew = DefaultJWTSkew
	}
	if opts.MaxLifetime <= 0 {
		opts.MaxLifetime = DefaultJWTMaxLifetime
	}
	if opts.JWKSRefresh <= 0 {
		opts.JWKSRefresh = DefaultJWKSRefresh
	}
	if opts.JWKSUnknownKid <= 0 {
		opts.JWKSUnknownKid = DefaultJWKSUnknownKid
	}
	if opts.JWKSFetchTimeout <= 0 {
		opts.JWKSFetchTimeout = DefaultJWKSFetchTimeout
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	v := &JWTVerifier{opts: opts, clk: opts.Clock, log: opts.Logger, fetching: make(chan struct{}, 1)}
	if v.clk == nil {
		v.clk = clock.Real()
	}
	if v.log == nil {
		v.log = slog.New(slog.DiscardHandler)
	}
	if opts.Secret != nil {
		k, err := secretKey(opts.Secret)
		if err != nil {
			return nil, fmt.Errorf("--client-jwt-secret-file: %v", err)
		}
		v.secret = &k
	}
	if opts.KeysFile != "" {
		keys, st, err := readKeysFile(opts.KeysFile)
		if err != nil {
			return nil, fmt.Errorf("--client-jwt-keys %s: %v", opts.KeysFile, err)
		}
		v.fileKeys.Store(&keys)
		v.fileStat, v.fileChecked = st, v.clk.Now()
	}
	return v, nil
}

func readKeysFile(path string) ([]verifyKey, os.FileInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	keys, err := ParseVerificationKeys(data)
	return keys, st, err
}

// Run fetches the JWKS URL now and every JWKSRefresh until ctx ends (nothing without a URL).
// A failed fetch keeps the keys of the last one that succeeded.
func (v *JWTVerifier) Run(ctx context.Context) {
	if v.opts.JWKSURL == "" {
		return
	}
	for {
		v.fetch(ctx, "start-or-refresh")
		wait := v.opts.JWKSRefresh
		if !v.lastFetchOK.Load() {
			wait = min(wait, v.opts.JWKSUnknownKid) // try again sooner after a failure
		}
		t := make(chan struct{})
		timer := v.clk.AfterFunc(wait, func() { close(t) })
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-t:
		}
	}
}

// fetch gets the JWKS URL once (the caller may hold v.fetching or not: Run's refresh and an
// unknown kid's fetch share it). It reports whether the keys were replaced.
func (v *JWTVerifier) fetch(ctx context.Context, why string) bool {
	select {
	case v.fetching <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	defer func() { <-v.fetching }()
	return v.fetchLocked(ctx, why)
}

func (v *JWTVerifier) fetchLocked(ctx context.Context, why string) bool {
	ctx, cancel := context.WithTimeout(ctx, v.opts.JWKSFetchTimeout)
	defer cancel()
	keys, err := v.get(ctx)
	v.lastFetchOK.Store(err == nil)
	if err != nil {
		v.log.Warn("the signing keys could not be fetched; the keys of the last fetch stay in force",
			slog.String("url", v.opts.JWKSURL), slog.String("by", why), slog.String("error", err.Error()))
		return false
	}
	v.urlKeys.Store(&keys)
	v.log.Info("signing keys fetched", slog.String("url", v.opts.JWKSURL), slog.String("by", why), slog.Int("keys", len(keys)))
	return true
}

func (v *JWTVerifier) get(ctx context.Context) ([]verifyKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.opts.JWKSURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxKeysBytes+1))
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(string(data)) == "" || strings.TrimSpace(string(data))[0] != '{' {
		return nil, errors.New("the answer is not a JWKS document")
	}
	return ParseVerificationKeys(data)
}

// checkKeysFile reads the keys file again when its metadata changed; at most once per
// keysFileCheckInterval unless now is set (an unknown kid).
func (v *JWTVerifier) checkKeysFile(now bool) {
	if v.opts.KeysFile == "" {
		return
	}
	v.fileMu.Lock()
	defer v.fileMu.Unlock()
	t := v.clk.Now()
	if !now && t.Sub(v.fileChecked) < keysFileCheckInterval {
		return
	}
	v.fileChecked = t
	st, err := os.Stat(v.opts.KeysFile)
	if err != nil {
		return // keep the keys: a file being replaced may be missing for a moment
	}
	if p := v.fileStat; p != nil && os.SameFile(st, p) && st.Size() == p.Size() && st.ModTime().Equal(p.ModTime()) {
		return
	}
	keys, st, err := readKeysFile(v.opts.KeysFile)
	if err != nil {
		v.log.Error("the signing keys file was not reloaded; the previous keys stay in force",
			slog.String("path", v.opts.KeysFile), slog.String("error", err.Error()))
		v.fileStat = st
		return
	}
	v.fileKeys.Store(&keys)
	v.fileStat = st
	v.log.Info("signing keys file reloaded", slog.String("path", v.opts.KeysFile), slog.Int("keys", len(keys)))
}

// candidates returns the keys a token of alg and kid may be checked with: the kid's key
// (whatever its kind, so that a kind mismatch is reported as such), or every key of the
// algorithm's kind when the token names no kid; for HS256, the secret.
func (v *JWTVerifier) candidates(alg jose.SignatureAlgorithm, kid string) []verifyKey {
	var out []verifyKey
	for _, set := range []*[]verifyKey{v.fileKeys.Load(), v.urlKeys.Load()} {
		if set == nil {
			continue
		}
		for _, k := range *set {
			if (kid != "" && k.kid == kid) || (kid == "" && k.alg == alg) {
				out = append(out, k)
			}
		}
	}
	// The secret has no kid: an HS256 token is checked with it unless its kid names a public
	// key (which then refuses the algorithm).
	if v.secret != nil && alg == AlgHS256 && len(out) == 0 {
		out = append(out, *v.secret)
	}
	return out
}

// LooksLikeJWT reports whether a presented token has the shape of a signed token (three
// base64url parts separated by dots); a static client token has no dot.
func LooksLikeJWT(tok string) bool {
	return strings.Count(tok, ".") == 2 && !strings.ContainsAny(tok, " \t\r\n")
}

// header is the part of a JWS header the verifier reads before choosing a key.
type header struct {
	Alg  string   `json:"alg"`
	Kid  string   `json:"kid"`
	Crit []string `json:"crit"`
}

// tokenClaims are the claims of a signed client token.
type tokenClaims struct {
	Issuer    string          `json:"iss"`
	Subject   string          `json:"sub"`
	Audience  json.RawMessage `json:"aud"`
	Expiry    *float64        `json:"exp"`
	NotBefore *float64        `json:"nbf"`
	IssuedAt  *float64        `json:"iat"`
	ID        string          `json:"jti"`
	NS        []string        `json:"ns"`
	Scope     string          `json:"scope"`
}

func numericDate(f float64) time.Time {
	sec := int64(f)
	return time.Unix(sec, int64((f-float64(sec))*1e9)).UTC()
}

// AuthenticateClient checks a signed token; see JWTVerifier.
func (v *JWTVerifier) AuthenticateClient(ctx context.Context, c ClientCredential) (ClientGrant, error) {
	tok := c.Token
	if len(tok) > maxTokenBytes {
		return ClientGrant{}, refuse(CheckMalformed, "the token is longer than %d bytes", maxTokenBytes)
	}
	if !LooksLikeJWT(tok) {
		return ClientGrant{}, refuse(CheckMalformed, "not a signed token (a JWT has three parts separated by dots)")
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok[:strings.IndexByte(tok, '.')])
	var h header
	if err != nil || json.Unmarshal(raw, &h) != nil {
		return ClientGrant{}, refuse(CheckMalformed, "the token's header is not base64url JSON")
	}
	alg := jose.SignatureAlgorithm(h.Alg)
	accepted := false
	for _, a := range acceptedAlgs {
		accepted = accepted || a == alg
	}
	if !accepted {
		return ClientGrant{}, refuse(CheckAlgorithm, "the token's algorithm %q is not accepted: sign with HS256, ES256, EdDSA or RS256", h.Alg)
	}
	if len(h.Crit) > 0 {
		return ClientGrant{}, refuse(CheckMalformed, "the token's header has critical extensions (crit) the node does not know")
	}
	v.checkKeysFile(false)
	keys := v.candidates(alg, h.Kid)
	if len(keys) == 0 && h.Kid != "" {
		v.checkKeysFile(true)
		keys = v.candidates(alg, h.Kid)
		if len(keys) == 0 {
			if err := v.fetchForKid(ctx, h.Kid); err != nil {
				return ClientGrant{}, err
			}
			keys = v.candidates(alg, h.Kid)
		}
	}
	if len(keys) == 0 {
		if h.Kid != "" {
			return ClientGrant{}, refuse(CheckUnknownKey, "no signing key of this node has the kid %q", h.Kid)
		}
		return ClientGrant{}, refuse(CheckAlgorithm, "the token names no kid and this node has no %s key", alg)
	}
	jws, err := jose.ParseSignedCompact(tok, acceptedAlgs)
	if err != nil {
		return ClientGrant{}, refuse(CheckMalformed, "the token cannot be decoded as a signed JWT")
	}
	var payload []byte
	for _, k := range keys {
		if k.alg != alg {
			return ClientGrant{}, refuse(CheckAlgorithm, "the token says %s but its key %q is a %s key: a key signs with its own algorithm only", alg, k.kid, k.alg)
		}
		if p, err := jws.Verify(k.key); err == nil {
			payload = p
			break
		}
	}
	if payload == nil {
		return ClientGrant{}, refuse(CheckSignature, "the token's signature does not verify with the node's %s key", alg)
	}
	return v.grant(payload)
}

// fetchForKid fetches the JWKS URL for a kid the node does not know — such fetches at most
// once per JWKSUnknownKid (the regular refresh does not count); it waits for a fetch under
// way. An error is an *UnavailableError when the
// node has never had the URL's keys.
func (v *JWTVerifier) fetchForKid(ctx context.Context, kid string) error {
	if v.opts.JWKSURL == "" {
		return nil
	}
	select {
	case v.fetching <- struct{}{}:
	case <-ctx.Done():
		return &UnavailableError{What: "the signing keys are being fetched", RetryAfter: time.Second, Err: ctx.Err()}
	}
	defer func() { <-v.fetching }()
	if len(v.candidates("", kid)) > 0 {
		return nil // a fetch this call waited for brought it
	}
	if now := v.clk.Now(); v.lastKidTry.IsZero() || now.Sub(v.lastKidTry) >= v.opts.JWKSUnknownKid {
		v.lastKidTry = now
		v.fetchLocked(ctx, "unknown-kid")
	}
	if v.urlKeys.Load() == nil {
		return &UnavailableError{What: "the signing keys could not be fetched from " + v.opts.JWKSURL,
			RetryAfter: v.opts.JWKSUnknownKid}
	}
	return nil
}

// grant checks the verified claims and returns the grant they give.
func (v *JWTVerifier) grant(payload []byte) (ClientGrant, error) {
	var cl tokenClaims
	if err := json.Unmarshal(payload, &cl); err != nil {
		return ClientGrant{}, refuse(CheckClaims, "the token's claims do not decode: %v", claimError(err))
	}
	now := v.clk.Now()
	if cl.Expiry == nil {
		return ClientGrant{}, refuse(CheckClaims, "the token has no exp: every token must expire")
	}
	exp := numericDate(*cl.Expiry)
	if !now.Before(exp) {
		return ClientGrant{}, refuse(CheckExpired, "the token expired at %s", exp.Format(time.RFC3339))
	}
	if cl.NotBefore != nil {
		if nbf := numericDate(*cl.NotBefore); now.Add(v.opts.Skew).Before(nbf) {
			return ClientGrant{}, refuse(CheckNotYetValid, "the token is not valid before %s (nbf)", nbf.Format(time.RFC3339))
		}
	}
	issued := exp.Add(-v.opts.MaxLifetime) // the earliest it can have been issued
	if cl.IssuedAt != nil {
		iat := numericDate(*cl.IssuedAt)
		if now.Add(v.opts.Skew).Before(iat) {
			return ClientGrant{}, refuse(CheckNotYetValid, "the token was issued in the future (iat %s): is the application's clock right?", iat.Format(time.RFC3339))
		}
		if exp.Sub(iat) > v.opts.MaxLifetime {
			return ClientGrant{}, refuse(CheckClaims, "the token is valid for %v after its iat: at most %v is accepted (--client-jwt-max-lifetime)",
				exp.Sub(iat).Round(time.Second), v.opts.MaxLifetime)
		}
		issued = iat
	} else if exp.Sub(now) > v.opts.MaxLifetime {
		return ClientGrant{}, refuse(CheckClaims, "the token is valid for another %v: at most %v is accepted (--client-jwt-max-lifetime)",
			exp.Sub(now).Round(time.Second), v.opts.MaxLifetime)
	}
	if v.opts.Issuer != "" && cl.Issuer != v.opts.Issuer {
		return ClientGrant{}, refuse(CheckIssuer, "the token's issuer (iss) is not the one this node accepts")
	}
	if v.opts.Audience != "" && !audienceHas(cl.Audience, v.opts.Audience) {
		return ClientGrant{}, refuse(CheckAudience, "the token's audience (aud) does not name this node's audience")
	}
	if cl.Subject == "" || len(cl.Subject) > maxSubBytes || !printable(cl.Subject) {
		return ClientGrant{}, refuse(CheckClaims, "the token's sub must name the user: 1 to %d printable bytes", maxSubBytes)
	}
	if len(cl.ID) > maxJTIBytes || !printable(cl.ID) {
		return ClientGrant{}, refuse(CheckClaims, "the token's jti must be at most %d printable bytes", maxJTIBytes)
	}
	if len(cl.NS) == 0 {
		return ClientGrant{}, refuse(CheckClaims, "the token has no ns: list the namespace ids it may open, or [\"*\"]")
	}
	for _, ns := range cl.NS {
		if ns == AllNamespaces {
			continue
		}
		if _, err := protocol.ParseNamespaceID(ns); err != nil {
			return ClientGrant{}, refuse(CheckClaims, "the token's ns lists %q: want ns- and 32 lowercase hex digits, or *", truncate(ns, 80))
		}
	}
	readOnly := false
	switch cl.Scope {
	case "", ScopeReadWrite:
	case ScopeReadOnly:
		readOnly = true
	default:
		return ClientGrant{}, refuse(CheckClaims, "the token's scope %q: want read-write or read-only", truncate(cl.Scope, 80))
	}
	g := ClientGrant{Name: cl.Subject, User: cl.Subject, Namespaces: append([]string(nil), cl.NS...), ReadOnly: readOnly,
		Kind: CredentialJWT, Expires: exp, jti: cl.ID, issued: issued}
	if err := v.opts.Revocations.check(g); err != nil {
		return ClientGrant{}, err
	}
	return g, nil
}

// RecheckClient says what a signed token's grant allows now: the same until it expires or
// its user or jti is revoked.
func (v *JWTVerifier) RecheckClient(g ClientGrant) (ClientGrant, error) {
	if g.Kind != CredentialJWT {
		return ClientGrant{}, ErrUnauthenticated
	}
	if !v.clk.Now().Before(g.Expires) {
		return ClientGrant{}, refuse(CheckExpired, "the token expired at %s", g.Expires.UTC().Format(time.RFC3339))
	}
	if err := v.opts.Revocations.check(g); err != nil {
		return ClientGrant{}, err
	}
	return g, nil
}

// audienceHas reports whether aud (a string or an array of strings) names want.
func audienceHas(aud json.RawMessage, want string) bool {
	var one string
	if json.Unmarshal(aud, &one) == nil {
		return one == want
	}
	var many []string
	if json.Unmarshal(aud, &many) == nil {
		for _, a := range many {
			if a == want {
				return true
			}
		}
	}
	return false
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// claimError says which claim did not decode, without repeating the token's content.
func claimError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s has the wrong type (%s)", te.Field, te.Value)
	}
	return "not a JSON object"
}
