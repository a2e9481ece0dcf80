package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
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
}

// RegisterClientFlags adds the client listener's flags with the listen default of the
// binary (hub 127.0.0.1:8789, peer 127.0.0.1:8791).
func RegisterClientFlags(f *cli.Flags, defaultListen string) *ClientFlags {
	c := &ClientFlags{}
	f.Define("editors (the client listener: stock y-websocket providers)", func() {
		f.StringVar(&c.Listen, "client-listen", defaultListen, "`HOST:PORT` for editors: the y-websocket endpoint /v1/yjs/{namespaceId} and the editor page /edit/{namespaceId}; off disables it")
		f.StringVar(&c.Auth, "client-auth", "token", "token (client tokens of the tokens file, made with `token add --client NAME`) or none (any editor may read and write; only on a loopback --client-listen, for local development)")
		f.IntVar(&c.MaxClients, "max-clients", yws.DefaultMaxClients, "editor connections this node serves at once (503 beyond)")
		f.Var(&c.Origins, "client-origin", "a browser `ORIGIN` host pattern allowed to open editor WebSockets besides the node's own pages (app.example.com, *.example.com or *; repeatable). Default: any with --client-auth token (the token is the credential), none with --client-auth none")
		f.IntVar(&c.MaxStates, "max-awareness-states", yws.DefaultMaxAwarenessStates, "editors' presence states kept per namespace on this node")
		f.IntVar(&c.MaxState, "max-awareness-state-bytes", yws.DefaultMaxAwarenessStateBytes, "bytes of one editor's presence state")
		f.IntVar(&c.SendQueue, "client-send-queue-bytes", yws.DefaultSendQueueBytes, "bytes waiting to be sent to one editor before it is dropped as too slow (it catches up when it reconnects)")
		f.DurationVar(&c.KeepAlive, "client-keepalive", yws.DefaultKeepAlive, "longest an editor goes without hearing from the node (providers reconnect after 30s of silence)")
	})
	return c
}

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
	if c.KeepAlive >= 30*time.Second {
		return fmt.Errorf("--client-keepalive %v: must stay under 30s (y-websocket providers reconnect after 30s of silence)", c.KeepAlive)
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
		MaxAwarenessStates: c.MaxStates, MaxAwarenessStateBytes: c.MaxState, KeepAlive: c.KeepAlive,
		Clock: in.clock, Logger: in.log}
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

// RunClientToken serves `token add|list|remove` for client tokens in the tokens file at
// path (name is "hub token" or "peer token"). The token is printed once, on stdout.
func RunClientToken(name, sub, path string, client string, namespaces StringList, readOnly bool,
	prefix string, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "%s %s: %s\n", name, sub, OneLine(err))
		return 1
	}
	file := TokensFileFlags(path)
	switch sub {
	case "add":
		if len(namespaces) == 0 {
			namespaces = StringList{auth.AllNamespaces}
		}
		tok, err := auth.AddClient(path, auth.ClientGrant{Name: client, Namespaces: namespaces, ReadOnly: readOnly}, nil)
		var existing *auth.ExistingClientError
		if errors.As(err, &existing) {
			return fail(fmt.Errorf("%v: a name has one token; to replace it, remove the old one first (%s remove %s --client %s; "+
				"its editors are closed), then add it again, or pick another name", err, name, file, cli.ShellArg(client)))
		}
		if err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout, tok)
		fmt.Fprintf(stderr, "%s add: client token for %s stored in %s (only its SHA-256); the token was printed once, on stdout; editors present it as ?token=… or Authorization: Bearer\n", name, client, path)
		return 0
	case "remove":
		n, err := auth.RemoveClient(path, client, prefix)
		if err != nil {
			return fail(err)
		}
		if n == 0 {
			return fail(fmt.Errorf("no client token of %s matched (%s list %s shows them)", client, name, file))
		}
		fmt.Fprintf(stderr, "%s remove: removed %d client token(s) of %s; a running node closes their editors within a second\n", name, n, client)
		return 0
	}
	return fail(fmt.Errorf("unknown command %q", sub))
}

// TokensFileFlags is how the token commands name the tokens file at path, for a command
// suggested to the operator: --data DIR when it is DIR's tokens file, else --tokens FILE.
func TokensFileFlags(path string) string {
	if filepath.Base(path) == auth.FileName {
		return "--data " + cli.ShellArg(filepath.Dir(path))
	}
	return "--tokens " + cli.ShellArg(path)
}

// ListClientTokens prints the client entries of a tokens file, one per line.
func ListClientTokens(f auth.File, stdout io.Writer) {
	for _, c := range f.Clients {
		perm := "read,write"
		if c.ReadOnly {
			perm = "read-only"
		}
		fmt.Fprintf(stdout, "client:%s\tsha256:%s…\t%s\t%v\n", c.Name, auth.HashPrefix(c.TokenSHA256), perm, c.Namespaces)
	}
}

// HubNamespaces is the hub's namespace lookup for editors: every active namespace of its
// store.
func HubNamespaces(store persistence.Store) yws.Namespaces {
	return func(ctx context.Context, id string) (string, error) {
		e, err := store.Entry(ctx, id)
		switch {
		case errors.Is(err, persistence.ErrNotFound):
			return "", yws.ErrUnknownNamespace
		case err != nil:
			return "", err
		case e.State == persistence.StateArchived:
			return "", yws.ErrUnknownNamespace
		}
		return e.Owner, nil
	}
}

// PeerNamespaces is the peer's namespace lookup for editors: its replication targets (a
// conflicted replica is refused until it is reset, one whose replication failed for a cause
// an operator must remove until it replicates again: editors' writes there would not reach
// the hub).
func PeerNamespaces(tc *namespace.TargetController) yws.Namespaces {
	return func(_ context.Context, id string) (string, error) {
		t, ok := tc.Target(id)
		switch {
		case !ok:
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
