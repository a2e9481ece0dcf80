package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nomicore/nomicore/internal/adminapi"
	"github.com/nomicore/nomicore/internal/clock"
	"github.com/nomicore/nomicore/internal/node"
	"github.com/nomicore/nomicore/internal/tokens"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/ws"
	"github.com/nomicore/nomicore/yws"
)

// runPeer runs the peer until SIGINT or SIGTERM, then shuts down in the order of §21.
func runPeer(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("peer run", flag.ContinueOnError)
	instanceID := fs.String("instance-id", "peer-a", "this peer's instance id (§6.1 peerInstanceId); the hub's token must name it")
	hubURL := fs.String("hub-url", "ws://127.0.0.1:8787/v1/replication", "the hub's replication endpoint")
	hubID := fs.String("hub-instance-id", "hub", "the hub's instance id this peer expects (§6.1 expectedHubInstanceId)")
	tokenFile := fs.String("token-file", "", "file holding the bearer token (re-read before every dial); else NOMICORE_TOKEN")
	adminListen := fs.String("admin-listen", "127.0.0.1:8790", "admin API listener (GUIDE §8)")
	data := fs.String("data", "", "data directory: the bbolt store nomicore.db (default ./nomicore-data/INSTANCE-ID)")
	var targetFlags node.StringList
	fs.Var(&targetFlags, "target", "a namespace to replicate, ns-…[:OWNER] (repeatable; remembered in the store)")
	owner := fs.String("owner", "default", "local owner of --target replicas given without :OWNER")
	tokenPoll := fs.Duration("token-poll", time.Second, "how often a blocked peer checks its token file for a new token")
	hubCA := fs.String("hub-ca-file", "", "PEM certificates to trust for a wss:// hub URL (default: the system roots)")
	common := node.RegisterCommon(fs)
	clientFlags := node.RegisterClientFlags(fs, "127.0.0.1:8791")
	if code, ok := node.ParseFlags(fs, args, getenv, stderr); !ok {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "peer: %s\n", node.OneLine(err))
		return 1
	}
	if err := common.Resolve(); err != nil {
		return fail(err)
	}
	if err := node.CheckInstanceID("instance-id", *instanceID); err != nil {
		return fail(err)
	}
	if err := node.CheckInstanceID("hub-instance-id", *hubID); err != nil {
		return fail(err)
	}
	if u, err := url.Parse(*hubURL); err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return fail(fmt.Errorf("--hub-url %q: want ws://HOST:PORT/v1/replication or wss://…", *hubURL))
	}
	if err := node.CheckAdmin(*adminListen, common.AdminToken); err != nil {
		return fail(err)
	}
	dialer, err := node.HubDialer(*hubCA)
	if err != nil {
		return fail(err)
	}
	if *tokenPoll <= 0 {
		return fail(errors.New("--token-poll must be positive"))
	}
	if err := clientFlags.Check(); err != nil {
		return fail(err)
	}
	if *data == "" {
		*data = filepath.Join("nomicore-data", *instanceID)
	}
	var flagTargets []ws.Target
	for _, v := range targetFlags {
		t, err := node.ParseTarget(v, *owner)
		if err != nil {
			return fail(err)
		}
		flagTargets = append(flagTargets, t)
	}
	// The token: a file re-read before every dial (so a rotated token is picked up), or the
	// environment. Either must be readable now.
	var source ws.TokenSource
	switch {
	case *tokenFile != "":
		source = ws.TokenFromFile(*tokenFile)
	case getenv("NOMICORE_TOKEN") != "":
		tok := getenv("NOMICORE_TOKEN")
		source = func() (string, error) { return strings.TrimSpace(tok), nil }
	default:
		return fail(errors.New("no token: give --token-file FILE or set NOMICORE_TOKEN"))
	}
	if tok, err := source(); err != nil {
		return fail(fmt.Errorf("token: %v", err))
	} else if tok == "" {
		return fail(errors.New("token: the token is empty"))
	}
	tw := &tokenWatch{inner: source, file: *tokenFile, blocked: make(chan struct{}, 1)}

	log := node.NewLogger(stderr, common.LogLevel, "peer")
	clk := clock.Real()
	inst, err := node.OpenInstance(*data, registry.RolePeer, observer.SidePeer, clk, log)
	if err != nil {
		return fail(err)
	}
	store, reg, obs := inst.Store, inst.Registry, inst.Obs
	cleanup := []func(){inst.Close}
	defer func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}()
	ctx := context.Background()
	for _, t := range flagTargets {
		if err := node.RememberTarget(ctx, store, t); err != nil {
			return fail(err)
		}
	}
	targets, err := node.LoadTargets(ctx, store)
	if err != nil {
		return fail(err)
	}
	tc, err := ws.NewTargetController(ws.TargetControllerOptions{Registry: reg, Targets: targets, Logger: log})
	if err != nil {
		return fail(err)
	}
	cleanup = append(cleanup, tc.Close)
	peer, err := ws.NewPeer(ws.PeerOptions{Config: common.Protocol, InstanceID: *instanceID, HubInstanceID: *hubID,
		URL: *hubURL, Token: tw.source, Dialer: dialer, Namespaces: tc.NewHandler, Clock: clk,
		Observer: observer.Multi(obs.Observer, observer.ObserverFunc(tw.observe)), Logger: log})
	if err != nil {
		return fail(err)
	}
	cleanup = append(cleanup, peer.Close)
	obs.ReplicationLoad(peer.Load)
	peer.Watch(tw.state)
	// The client listener: editors of the peer's targets, with the client tokens of
	// DATA/tokens.json (peer token add --client).
	var editors *yws.Server
	var clients *node.Server
	var clientTokens *tokens.Reloader
	if clientFlags.Enabled() {
		var auth yws.Clients
		if clientFlags.Auth == "token" {
			clientTokens, err = tokens.NewReloader(tokens.ReloaderOptions{Path: filepath.Join(*data, tokens.FileName),
				OnReload: obs.TokenReload, Logger: log, OnChange: func() {
					if editors != nil {
						editors.Revalidate() // a removed client token closes its editors
					}
				}})
			if err != nil {
				return fail(err)
			}
			auth = clientTokens.Clients()
		}
		m, err := inst.ClientMetrics()
		if err != nil {
			return fail(err)
		}
		opts := clientFlags.Options(inst, common, auth)
		opts.Namespaces, opts.Metrics = node.PeerNamespaces(tc), m
		if editors, err = yws.New(opts); err != nil {
			return fail(err)
		}
		clientLn, err := node.Listen("client-listen", clientFlags.Listen)
		if err != nil {
			return fail(err)
		}
		clients = &node.Server{Name: "client", Listener: clientLn, Handler: editors}
		cleanup = append(cleanup, func() { clientLn.Close() })
	}
	adminOpts := inst.AdminOptions(common)
	pt := &node.PersistentTargets{TC: tc, Store: store}
	if editors != nil {
		pt.Unload = editors.CloseNamespace
	}
	adminOpts.Targets = pt
	adminOpts.Ready = func() error {
		if s := peer.State(); s != observer.ConnReady {
			return fmt.Errorf("replication connection is %s", s)
		}
		return nil
	}
	api, err := adminapi.New(adminOpts)
	if err != nil {
		return fail(err)
	}
	adminLn, err := node.Listen("admin-listen", *adminListen)
	if err != nil {
		return fail(err)
	}
	cleanup = nil // from here on the shutdown sequence owns everything

	admin := &node.Server{Name: "admin", Listener: adminLn, Handler: api}
	sigs := node.NotifySignals()
	defer sigs.Release()
	hup := make(chan struct{}, 1)
	stopTokenWatch := node.Go(func(ctx context.Context) { tw.run(ctx, clk, *tokenPoll, hup, peer) })
	stopFlush := node.Go(func(ctx context.Context) { obs.RunFlush(ctx, clk, 10*time.Second) })
	stopClientTokens := func(context.Context) error { return nil }
	if clientTokens != nil {
		stopClientTokens = node.Go(func(ctx context.Context) { clientTokens.Run(ctx, clk, time.Second, nil) })
	}
	failed := make(chan error, 2)
	admin.Start(log, failed)
	clientListen := "off"
	if clients != nil {
		clients.Start(log, failed)
		clientListen = clients.Listener.Addr().String()
	}
	peer.Start()
	log.Info("peer running", slog.String("instanceId", *instanceID), slog.String("hubUrl", *hubURL),
		slog.String("adminListen", adminLn.Addr().String()), slog.String("clientListen", clientListen),
		slog.String("clientAuth", clientFlags.Auth), slog.String("data", *data), slog.Int("targets", len(targets)),
		slog.String("generation", common.Protocol.Generation.String()))

	exit := sigs.WaitForStop(log, stderr, "peer", hup, failed)
	// §21: replication first (the connection drains: every namespace closes, admitted applies
	// settle, sessions and leases are released), then the local API, the registry, the store.
	err = node.ShutdownInOrder(log, stderr, "peer", common.ShutdownTimeout, sigs.Stop, []node.Step{
		{Name: "editor clients", Run: node.ShutdownClients(editors, clients)},
		{Name: "client tokens watcher", Run: stopClientTokens},
		{Name: "replication", Run: func(ctx context.Context) error {
			drain, cancel := context.WithTimeout(ctx, common.Protocol.CloseTimeout)
			err := peer.Stop(drain)
			cancel()
			peer.Close()
			if errors.Is(err, context.DeadlineExceeded) {
				log.Warn("the replication drain did not finish within --close-timeout; closed", slog.Duration("closeTimeout", common.Protocol.CloseTimeout))
				err = nil
			}
			tc.Close()
			return err
		}},
		{Name: "token watcher", Run: stopTokenWatch},
		{Name: "admin api", Run: func(ctx context.Context) error { api.Close(); return admin.Shutdown(ctx) }},
		{Name: "registry", Run: reg.Close},
		{Name: "store", Run: store.Close},
		{Name: "observer", Run: stopFlush},
	})
	if err != nil {
		fmt.Fprintf(stderr, "peer: shutdown: %s\n", node.OneLine(err))
		return 1
	}
	log.Info("peer stopped")
	return exit
}

// tokenWatch lets a blocked peer (§15.1) come back when its credentials change: the hub's
// GOAWAY REAUTH_REQUIRED (a token of this peer was removed or rotated on the hub, §19) is
// answered with one immediate re-authentication with the token it has now; a 401/403 then
// blocks it until the token file holds a different token than the one last presented, or
// SIGHUP. The token itself is never logged or kept beyond its hash.
type tokenWatch struct {
	inner ws.TokenSource
	file  string

	lastUsed atomic.Pointer[[sha256.Size]byte] // hash of the token of the last dial
	reauth   atomic.Bool                       // a REAUTH_REQUIRED GOAWAY arrived
	blocked  chan struct{}                     // signalled when the peer enters blocked
}

func (t *tokenWatch) source() (string, error) {
	tok, err := t.inner()
	if err == nil {
		h := sha256.Sum256([]byte(tok))
		t.lastUsed.Store(&h)
	}
	return tok, err
}

func (t *tokenWatch) observe(e observer.Event) {
	if g, ok := e.Payload.(observer.GoAwayReceived); ok && g.ReasonCode == observer.GoAwayReauthRequired {
		t.reauth.Store(true)
	}
}

// state runs on the peer's controller goroutine: it must not block.
func (t *tokenWatch) state(s ws.PeerState) {
	if s == observer.ConnBlocked {
		select {
		case t.blocked <- struct{}{}:
		default:
		}
	}
}

func (t *tokenWatch) changed() bool {
	if t.file == "" {
		return false
	}
	b, err := os.ReadFile(t.file)
	if err != nil {
		return false
	}
	h := sha256.Sum256([]byte(strings.TrimSpace(string(b))))
	last := t.lastUsed.Load()
	return last == nil || *last != h
}

func (t *tokenWatch) run(ctx context.Context, clk clock.Clock, every time.Duration, hup <-chan struct{}, p *ws.Peer) {
	tick := clock.NewTicker(clk, every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			p.ConfigChanged()
		case <-t.blocked:
			if t.reauth.Swap(false) {
				p.ConfigChanged() // the hub asked for a new authentication: one attempt, now
			}
		case <-tick.C:
			if p.State() == observer.ConnBlocked && t.changed() {
				p.ConfigChanged()
			}
		}
	}
}
