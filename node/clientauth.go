package node

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/node/adminapi"
	"github.com/nomicore/nomicore/yws"
)

// ClientAuth is what checks a node's editors with --client-auth token: the static client
// tokens of the tokens file, the signed tokens and the auth webhook the flags configure, and
// the revocation list they share, in one chain the client listener consults.
type ClientAuth struct {
	Chain       *auth.ClientChain
	Static      *auth.Reloader
	Signed      *auth.JWTVerifier // nil without a key
	Webhook     *auth.Webhook     // nil without --client-auth-webhook
	Revocations *auth.RevocationList
}

// ClientAuthOptions are what NewClientAuth needs beyond the flags.
type ClientAuthOptions struct {
	// Static is the node's tokens file reloader (its client tokens).
	Static *auth.Reloader
	// Store keeps the revocation list: the node's store (in a hub cluster, the map every
	// node shares).
	Store auth.ConfigStore
	// Node names this node to the webhook.
	Node string
	// Deferred: the store may not answer yet (a hub cluster node starting); the revocation
	// list is read by Run, and until then signed tokens and webhook answers wait (503).
	Deferred bool
	// OnChange re-checks the open editors (yws.Server.Revalidate) after a revocation.
	OnChange func()
	Clock    clock.Clock
	Logger   *slog.Logger
}

// NewClientAuth builds the chain from the flags: it reads the HS256 secret and the keys
// file (an unusable one refuses the configuration) and the revocation list.
func (c *ClientFlags) NewClientAuth(ctx context.Context, o ClientAuthOptions) (*ClientAuth, error) {
	a := &ClientAuth{Static: o.Static}
	lifetime := max(c.JWTMaxLifetime+auth.DefaultJWTSkew, auth.DefaultWebhookMaxTTL)
	loadCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var err error
	a.Revocations, err = auth.NewRevocationList(loadCtx, auth.RevocationOptions{Store: o.Store, Lifetime: lifetime,
		OnChange: o.OnChange, Deferred: o.Deferred, Clock: o.Clock, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	if c.JWTSecretFile != "" || c.JWTKeysFile != "" || c.JWKSURL != "" {
		var secret []byte
		if c.JWTSecretFile != "" {
			if secret, err = os.ReadFile(c.JWTSecretFile); err != nil {
				return nil, fmt.Errorf("--client-jwt-secret-file: %v", err)
			}
		}
		a.Signed, err = auth.NewJWTVerifier(auth.JWTOptions{Secret: secret, KeysFile: c.JWTKeysFile, JWKSURL: c.JWKSURL,
			Issuer: c.JWTIssuer, Audience: c.JWTAudience, MaxLifetime: c.JWTMaxLifetime, Revocations: a.Revocations,
			Clock: o.Clock, Logger: o.Logger})
		if err != nil {
			return nil, err
		}
	}
	if c.Webhook != "" {
		a.Webhook, err = auth.NewWebhook(auth.WebhookOptions{URL: c.Webhook, Node: o.Node, Timeout: c.WebhookTimeout,
			Revocations: a.Revocations, Clock: o.Clock, Logger: o.Logger})
		if err != nil {
			return nil, err
		}
	}
	a.Chain = &auth.ClientChain{Static: o.Static, Signed: a.Signed, Webhook: a.Webhook}
	return a, nil
}

// Run keeps the chain current until ctx ends: the JWKS URL fetched and refreshed, the
// revocation list read again when a hub cluster's shared map says it changed (how a
// revocation made on another node reaches this one) and every auth.DefaultRevocationPoll
// (how expired entries leave).
func (a *ClientAuth) Run(ctx context.Context) {
	done := make(chan struct{})
	if a.Signed != nil {
		go func() { defer close(done); a.Signed.Run(ctx) }()
	} else {
		close(done)
	}
	a.Revocations.Run(ctx, auth.DefaultRevocationPoll)
	<-done
}

// Kinds lists the credentials the chain accepts, for the start line ("client-token", "jwt",
// "webhook").
func (a *ClientAuth) Kinds() []string {
	out := []string{auth.CredentialClientToken}
	if a.Signed != nil {
		out = append(out, auth.CredentialJWT)
	}
	if a.Webhook != nil {
		out = append(out, auth.CredentialWebhook)
	}
	return out
}

// ClientAdmin is the admin API's management of editors' credentials (adminapi.Clients) on
// a node: the client tokens of its tokens file — read again at once after each change, so
// that a removed or narrowed token closes its editors within the second — and the
// revocation list. In a hub cluster each node has its own tokens file (a client token made
// through one node's API is that node's); signed tokens are accepted by every node
// configured with the same key.
type ClientAdmin struct {
	Path    string
	Static  *auth.Reloader
	Revoked *auth.RevocationList
}

// AddClient adds a client token to the tokens file and reloads it.
func (c *ClientAdmin) AddClient(ctx context.Context, g auth.ClientGrant) (string, auth.ClientEntry, error) {
	tok, err := auth.AddClient(c.Path, g, nil)
	if err != nil {
		return "", auth.ClientEntry{}, err
	}
	_, _ = c.Static.Reload(ctx)
	e := auth.ClientEntry{Name: g.Name, TokenSHA256: auth.HashToken(tok), Namespaces: g.Namespaces, ReadOnly: g.ReadOnly}
	if !g.Expires.IsZero() {
		e.ExpiresAt = g.Expires.UTC().Truncate(time.Second)
	}
	return tok, e, nil
}

// ListClients reads the tokens file's client tokens.
func (c *ClientAdmin) ListClients(context.Context) ([]auth.ClientEntry, error) {
	f, _, err := auth.ReadFile(c.Path)
	return f.Clients, err
}

// UpdateClient changes a client token's grant in the tokens file and reloads it.
func (c *ClientAdmin) UpdateClient(ctx context.Context, name string, namespaces []string, readOnly *bool) (auth.ClientEntry, error) {
	e, err := auth.UpdateClient(c.Path, name, func(e *auth.ClientEntry) {
		if namespaces != nil {
			e.Namespaces = namespaces
		}
		if readOnly != nil {
			e.ReadOnly = *readOnly
		}
	})
	if err != nil {
		return e, err
	}
	_, _ = c.Static.Reload(ctx)
	return e, nil
}

// RemoveClient removes a name's client tokens and reloads the file (their editors close).
func (c *ClientAdmin) RemoveClient(ctx context.Context, name string) (int, error) {
	n, err := auth.RemoveClient(c.Path, name, "")
	if err == nil && n > 0 {
		_, _ = c.Static.Reload(ctx)
	}
	return n, err
}

// Revoke adds a revocation.
func (c *ClientAdmin) Revoke(ctx context.Context, sub, jti string) (auth.Revocation, error) {
	return c.Revoked.Revoke(ctx, sub, jti)
}

// Revocations lists the revocations in force.
func (c *ClientAdmin) Revocations() []auth.Revocation { return c.Revoked.List() }

// PresenceList is the admin API's list of the editors present in a namespace as ed holds
// them (adminapi.Options.PresenceList): this node's, named node, and other nodes'. ed may be
// set after the API is built (nil: none).
func PresenceList(ed **yws.Server, node string) func(ns string) []adminapi.PresenceJSON {
	return func(ns string) []adminapi.PresenceJSON {
		if *ed == nil {
			return nil
		}
		var out []adminapi.PresenceJSON
		for _, p := range (*ed).PresentIn(ns) {
			j := adminapi.PresenceJSON{User: p.User, ClientID: p.ClientID, Client: p.Client, Node: p.Node, UpdatedAt: p.Updated.UTC()}
			if j.Node == "" {
				j.Node, j.Local = node, true
			}
			out = append(out, j)
		}
		return out
	}
}

// EditorList is the admin API's list of a namespace's editors on ed (adminapi.Options.
// EditorList); ed may be set after the API is built (nil: none).
func EditorList(ed **yws.Server) func(ns string) []adminapi.EditorJSON {
	return func(ns string) []adminapi.EditorJSON {
		if *ed == nil {
			return nil
		}
		var out []adminapi.EditorJSON
		for _, e := range (*ed).EditorsOf(ns) {
			j := adminapi.EditorJSON{Name: e.Name, User: e.User, Credential: e.Credential, ReadOnly: e.ReadOnly, Remote: e.Remote}
			since := e.Since.UTC()
			j.ConnectedSince = &since
			if !e.Expires.IsZero() {
				exp := e.Expires.UTC()
				j.ExpiresAt = &exp
			}
			out = append(out, j)
		}
		return out
	}
}
