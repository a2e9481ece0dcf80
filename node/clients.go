package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/node/accesslog"
	"github.com/nomicore/nomicore/node/cli"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/yws"
)

// ClientFlags are the flags of the client listener (the editor endpoint, package yws),
// shared by `hub serve` and `peer run`.
type ClientFlags struct {
	Listen     string
	Auth       string
	MaxClients int
	Origins    StringList
	MaxStates  int
	MaxState   int
	SendQueue  int
	KeepAlive  time.Duration
	Limits     yws.Limits            // per user and per connection (clientlimits.go)
	Hocuspocus yws.HocuspocusOptions // the bounds of one Hocuspocus socket (clientlimits.go)
	// PresenceRelay (on or off) says whether editors' awareness is relayed to the other
	// nodes: the other nodes of a hub cluster, and between a hub and its peers.
	PresenceRelay string

	// Signed tokens (JWT) and the auth webhook, beside the static client tokens.
	JWTSecretFile  string
	JWTKeysFile    string
	JWKSURL        string
	JWTIssuer      string
	JWTAudience    string
	JWTMaxLifetime time.Duration
	Webhook        string
	WebhookTimeout time.Duration
}

// RegisterClientFlags adds the client listener's flags with the listen default of the
// binary (hub 127.0.0.1:8789, peer 127.0.0.1:8791).
func RegisterClientFlags(f *cli.Flags, defaultListen string) *ClientFlags {
	c := &ClientFlags{}
	f.Define("editors (the client listener: stock y-websocket and Hocuspocus providers)", func() {
		f.StringVar(&c.Listen, "client-listen", defaultListen, "`HOST:PORT` for editors: the y-websocket endpoint /v1/yjs/{namespaceId}, the Hocuspocus endpoint /v1/hocuspocus and the editor pages /edit/{namespaceId} and /edit/rich/{namespaceId}; off disables it")
		f.StringVar(&c.Auth, "client-auth", "token", "token (client tokens of the tokens file, made with `token add --client NAME`) or none (any editor may read and write; only on a loopback --client-listen, for local development)")
		f.IntVar(&c.MaxClients, "max-clients", yws.DefaultMaxClients, "editor connections this node serves at once (503 beyond)")
		f.Var(&c.Origins, "client-origin", "a browser `ORIGIN` host pattern allowed to open editor WebSockets besides the node's own pages (app.example.com, *.example.com or *; repeatable). Default: any with --client-auth token (the token is the credential), none with --client-auth none")
		f.IntVar(&c.MaxStates, "max-awareness-states", yws.DefaultMaxAwarenessStates, "editors' presence states kept per namespace on this node")
		f.IntVar(&c.MaxState, "max-awareness-state-bytes", yws.DefaultMaxAwarenessStateBytes, "bytes of one editor's presence state; a larger one closes its connection with 1008")
		f.IntVar(&c.SendQueue, "client-send-queue-bytes", yws.DefaultSendQueueBytes, "bytes waiting to be sent to one editor before it is dropped as too slow (it catches up when it reconnects)")
		f.DurationVar(&c.KeepAlive, "client-keepalive", yws.DefaultKeepAlive, "longest an editor goes without hearing from the node (providers reconnect after 30s of silence)")
		registerClientLimitFlags(f, &c.Limits)
		f.StringVar(&c.PresenceRelay, "presence-relay", "on", "on: editors see the presence (cursors, names) of the editors attached to other nodes — between a hub and its peers (an extension of the replication connection, negotiated), and among the nodes of a hub cluster; off: only of those attached to this node")
		registerHocuspocusBoundFlags(f, &c.Hocuspocus)
	})
	f.Define("editors' credentials from the application (beside the client tokens of the tokens file; with --client-auth token)", func() {
		f.StringVar(&c.JWTSecretFile, "client-jwt-secret-file", "", "accept signed tokens (JWT) made with the HS256 secret in `FILE` (at least 32 bytes; the application signs with the same)")
		f.StringVar(&c.JWTKeysFile, "client-jwt-keys", "", "accept signed tokens checked with the public keys in `FILE`: PEM or a JWKS document, ES256, EdDSA or RS256, chosen by the token's kid; read again when it changes")
		f.StringVar(&c.JWKSURL, "client-jwt-jwks-url", "", "accept signed tokens checked with the public keys of the JWKS document at `URL`, fetched at start, every 10 minutes, and when a token names an unknown kid (at most every 30s)")
		f.StringVar(&c.JWTIssuer, "client-jwt-issuer", "", "when set, a signed token's iss must be `ISSUER`")
		f.StringVar(&c.JWTAudience, "client-jwt-audience", "", "when set, a signed token's aud must name `AUDIENCE`")
		f.DurationVar(&c.JWTMaxLifetime, "client-jwt-max-lifetime", auth.DefaultJWTMaxLifetime, "longest a signed token may be valid (exp after iat); revocations are kept this long")
		f.StringVar(&c.Webhook, "client-auth-webhook", "", "ask the application at `URL` about every token the node does not know itself: it POSTs {token,namespaceId,node,remoteAddr} and takes {allow,readOnly,user,ttlSeconds}; no answer refuses the editor (503)")
		f.DurationVar(&c.WebhookTimeout, "client-auth-webhook-timeout", auth.DefaultWebhookTimeout, "how long the node waits for the auth webhook before refusing the editor")
	})
	return c
}

// RelayPresence reports whether editors' awareness goes to other nodes (the client listener
// is on and --presence-relay on).
func (c *ClientFlags) RelayPresence() bool { return c.Enabled() && c.PresenceRelay == "on" }

// Enabled reports whether the client listener is on.
func (c *ClientFlags) Enabled() bool { return c.Listen != "off" }

// Check refuses an unusable configuration: a listen address that does not parse,
// --client-auth none beyond loopback.
func (c *ClientFlags) Check() error {
	if !c.Enabled() {
		return nil
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("--client-listen %q: %v (or off)", c.Listen, err)
	}
	if c.PresenceRelay != "on" && c.PresenceRelay != "off" {
		return fmt.Errorf("--presence-relay %q: want on or off", c.PresenceRelay)
	}
	switch c.Auth {
	case "token":
	case "none":
		if !IsLoopback(c.Listen) {
			return fmt.Errorf("--client-auth none is allowed only on a loopback --client-listen (127.0.0.1:PORT), not %s: anyone who reaches it could read and change every document", c.Listen)
		}
	default:
		return fmt.Errorf("--client-auth %q: want token or none", c.Auth)
	}
	if c.MaxClients <= 0 || c.MaxStates <= 0 || c.MaxState <= 0 || c.SendQueue <= 0 || c.KeepAlive <= 0 {
		return errors.New("--max-clients, --max-awareness-states, --max-awareness-state-bytes, --client-send-queue-bytes and --client-keepalive must be positive")
	}
	if err := checkClientLimits(c.Limits); err != nil {
		return err
	}
	if err := checkHocuspocusBounds(c.Hocuspocus); err != nil {
		return err
	}
	if c.KeepAlive >= 30*time.Second {
		return fmt.Errorf("--client-keepalive %v: must stay under 30s (y-websocket providers reconnect after 30s of silence)", c.KeepAlive)
	}
	signed := c.JWTSecretFile != "" || c.JWTKeysFile != "" || c.JWKSURL != ""
	if c.Auth == "none" && (signed || c.Webhook != "") {
		return errors.New("--client-auth none checks no credential: leave out the --client-jwt-… and --client-auth-webhook flags, or use --client-auth token")
	}
	if !signed && (c.JWTIssuer != "" || c.JWTAudience != "") {
		return errors.New("--client-jwt-issuer and --client-jwt-audience check signed tokens: give their key too (--client-jwt-secret-file, --client-jwt-keys or --client-jwt-jwks-url)")
	}
	for flag, u := range map[string]string{"--client-jwt-jwks-url": c.JWKSURL, "--client-auth-webhook": c.Webhook} {
		if u == "" {
			continue
		}
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("%s %q: want an http:// or https:// URL", flag, u)
		}
	}
	if c.JWTMaxLifetime < time.Minute {
		return fmt.Errorf("--client-jwt-max-lifetime %v: give at least 1m", c.JWTMaxLifetime)
	}
	if c.WebhookTimeout <= 0 || c.WebhookTimeout > time.Minute {
		return fmt.Errorf("--client-auth-webhook-timeout %v: give a positive duration of at most 1m", c.WebhookTimeout)
	}
	return nil
}

// Options returns the endpoint's options from the flags; the caller adds the registry, the
// namespace lookup, the metrics and the logger. clients is nil with --client-auth none.
func (c *ClientFlags) Options(in *Instance, common *Common, clients auth.ClientAuthenticator) yws.Options {
	origins := []string(c.Origins)
	if len(origins) == 0 && clients != nil {
		origins = []string{"*"}
	}
	return yws.Options{Registry: in.Registry, Clients: clients, OriginPatterns: origins, MaxClients: c.MaxClients,
		MaxMessageBytes: common.Protocol.MaxChunkedUpdateBytes + 64, SendQueueBytes: c.SendQueue,
		MaxAwarenessStates: c.MaxStates, MaxAwarenessStateBytes: c.MaxState, KeepAlive: c.KeepAlive, Limits: c.Limits,
		Hocuspocus: c.Hocuspocus, Clock: in.clock, Logger: in.log}
}

// ClientHandler is the client listener's handler: the endpoint behind the access log (which
// logs route patterns, never query strings, so a ?token= stays out of it).
func ClientHandler(ed *yws.Server, log *slog.Logger) http.Handler {
	return accesslog.Handler(ed, log, "client")
}

// ClientMetrics registers the endpoint's metrics on the instance's Prometheus registry.
func (in *Instance) ClientMetrics() (*yws.Metrics, error) {
	return yws.NewMetrics(in.Obs.Registry, string(in.Obs.Side))
}

// ShutdownClients is the shutdown step of the client listener: editors are closed (1001)
// and their namespaces released before replication and the registry stop.
func ShutdownClients(ed *yws.Server, srv *Server) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if ed == nil {
			return nil
		}
		err := ed.Shutdown(ctx)
		return errors.Join(err, srv.Shutdown(ctx))
	}
}

// HubNamespaces is the hub's namespace lookup for editors: every active namespace of its
// store.
func HubNamespaces(store persistence.Catalog) yws.Namespaces {
	return func(ctx context.Context, id string) (string, error) {
		e, err := store.Entry(ctx, id)
		switch {
		case errors.Is(err, persistence.ErrNotFound):
			return "", yws.ErrUnknownNamespace
		case err != nil:
			return "", err
		case e.State == persistence.StateArchived:
			return "", yws.ErrUnknownNamespace
		case e.State == persistence.StateDeleted:
			return "", yws.ErrNamespaceDeleted
		}
		return e.Owner, nil
	}
}

// PeerNamespaces is the peer's namespace lookup for editors: its replication targets (a
// conflicted replica is refused until it is reset, one whose replication failed for a cause
// an operator must remove until it replicates again: editors' writes there would not reach
// the hub). A namespace the hub deleted is told apart by the tombstone in store.
func PeerNamespaces(tc *namespace.TargetController, store persistence.Catalog) yws.Namespaces {
	return func(ctx context.Context, id string) (string, error) {
		t, ok := tc.Target(id)
		switch {
		case !ok:
			if e, err := store.Entry(ctx, id); err == nil && e.State == persistence.StateDeleted {
				return "", yws.ErrNamespaceDeleted
			}
			return "", yws.ErrUnknownNamespace
		case t.State == observer.ChannelConflicted:
			return "", yws.ErrConflicted
		}
		var wr *namespace.WriteRefusedError
		if err := tc.AdmitLocalWrite(id, 0); errors.As(err, &wr) {
			switch wr.Reason {
			case namespace.RefusedConflicted:
				return "", yws.ErrConflicted
			case namespace.RefusedFailed, namespace.RefusedSchema:
				return "", fmt.Errorf("%w: %v", yws.ErrReplicaFailed, err)
			}
		}
		return t.Owner, nil
	}
}
