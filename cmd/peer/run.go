package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/node"
	"github.com/nomicore/nomicore/node/accesslog"
	"github.com/nomicore/nomicore/node/adminapi"
	"github.com/nomicore/nomicore/node/cli"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/presence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/ws"
	"github.com/nomicore/nomicore/yws"
)

// runPeer runs the peer until SIGINT or SIGTERM, then shuts down in order: the editors
// first, then the replication connection drains, then the admin API, the registry, the
// store (docs/protocol.md#restart-and-shutdown).
func runPeer(args []string, cio cli.IO) int {
	f := cli.NewFlags("peer run", "peer [run] [flags]",
		"Runs a peer: it keeps a replica of each target namespace under --data, replicates it with the hub at "+
			"--hub-url using the bearer token in --token-file, and serves the admin API on --admin-listen. Targets "+
			"given with --target (or added through the admin API) are remembered in the store. Editors (stock "+
			"y-websocket providers) edit the targets through --client-listen, with client tokens from `peer token "+
			"add --client`. SIGINT or SIGTERM stop it in order; SIGHUP makes a blocked peer try again and reloads "+
			"the TLS certificate (--tls-cert).")
	instanceID := f.String("instance-id", "peer-a", "this peer's `NAME`; its token must have been made for it (hub token add --peer)")
	var hubURLFlag hubURLs
	f.Var(&hubURLFlag, "hub-url", "the hub's replication endpoint, ws://HOST:PORT/v1/replication or wss://… (default "+defaultHubURL+
		"); repeat it for the nodes of a hub cluster: after a failed dial or a lost connection the peer tries the next one")
	hubID := f.String("hub-instance-id", "hub", "the hub's `NAME` (its --instance-id); the peer refuses to replicate with a hub of another name")
	tokenFile := f.String("token-file", "", "`FILE` holding the bearer token, re-read before every connection attempt (else NOMICORE_TOKEN)")
	adminListen := f.String("admin-listen", "127.0.0.1:8790", "`HOST:PORT` of the admin API, /metrics, /healthz and /readyz")
	data := f.String("data", "", "`DIR` holding the store, nomicore.db (default ./nomicore-data/INSTANCE-ID)")
	var targetFlags node.StringList
	f.Var(&targetFlags, "target", "a namespace to replicate, `ns-…[:OWNER]` (repeatable; remembered in the store)")
	owner := f.String("owner", "default", "the local owner (storage partition) of --target replicas given without :OWNER")
	tokenPoll := f.Duration("token-poll", time.Second, "how often a peer the hub refused checks its token file for a new token")
	rebuild := f.Bool("rebuild-damaged-store", false, "when the store is damaged, move it aside (kept as nomicore.db.damaged-TIME for nmcr) "+
		"and start with a new one: the targets are read back from it where they can be (and --target adds them) and bootstrap again from the hub")
	hubCA := f.String("hub-ca", "", "`FILE` of PEM certificates (CAs) to trust for a wss:// hub, read again when it changes (default: the system's)")
	f.StringVar(hubCA, "hub-ca-file", "", "`FILE`: the same as --hub-ca (its earlier name)")
	common := node.RegisterCommon(f)
	clientFlags := node.RegisterClientFlags(f, "127.0.0.1:8791")
	operands, code, ok := f.Parse(args, cio)
	if !ok {
		return code
	}
	if len(operands) > 0 {
		return f.Mistake(cio, "unexpected argument %q (peer run takes flags only)", operands[0])
	}
	getenv, stderr := cio.Getenv, cio.Stderr
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
	hubURLList, err := hubURLFlag.list(getenv("NOMICORE_HUB_URL") != "")
	if err != nil {
		return fail(err)
	}
	if err := node.CheckAdmin(*adminListen, common.AdminToken); err != nil {
		return fail(err)
	}
	dialer, err := node.HubDialer(*hubCA)
	if err != nil {
		caFlag := "--hub-ca"
		f.Visit(func(fl *flag.Flag) {
			if fl.Name == "hub-ca-file" {
				caFlag = "--hub-ca-file"
			}
		})
		return fail(fmt.Errorf("%s: %v", caFlag, err))
	}
	if err := clientFlags.Check(); err != nil {
		return fail(err)
	}
	if *tokenPoll <= 0 {
		return fail(errors.New("--token-poll must be positive"))
	}
	if *data == "" {
		*data = filepath.Join("nomicore-data", *instanceID)
	}
	var flagTargets []namespace.Target
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
	tw := &tokenWatch{inner: source, file: *tokenFile}

	log := node.NewLogger(stderr, common.LogLevel, common.LogFormat, "peer")
	clk := clock.Real()
	inst, err := node.OpenInstance(*data, registry.RolePeer, observer.SidePeer, clk, log)
	var damaged *node.DamagedStoreError
	var rebuilt *node.Rebuilt
	if errors.As(err, &damaged) {
		if !*rebuild {
			return fail(fmt.Errorf("%v: %s", err, node.PeerDamagedFix()))
		}
		rb, rerr := node.RebuildDamagedStore(*data, clk.Now(), log)
		if rerr != nil {
			return fail(fmt.Errorf("%v; %v", err, rerr))
		}
		rebuilt = &rb
		inst, err = node.OpenInstance(*data, registry.RolePeer, observer.SidePeer, clk, log)
	}
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
	if rebuilt != nil {
		flagTargets = append(rebuilt.Targets, flagTargets...)
	}
	for _, t := range flagTargets {
		if err := node.RememberTarget(ctx, store, t); err != nil {
			return fail(err)
		}
	}
	targets, err := node.LoadTargets(ctx, store)
	if err != nil {
		return fail(err)
	}
	// Presence with the hub (the presence extension, offered with --presence-relay on by a
	// peer whose editors it would serve; never by --generation v1).
	var relay *presence.Replication
	if clientFlags.RelayPresence() && common.Protocol.Generation != protocol.GenerationV1 {
		pm, err := presence.NewMetrics(obs.Registry)
		if err != nil {
			return fail(err)
		}
		if relay, err = presence.NewReplication(presence.ReplicationOptions{MaxStates: clientFlags.MaxStates,
			MaxStateBytes: clientFlags.MaxState, UpdatesPerSecond: clientFlags.Limits.AwarenessUpdatesPerSecond,
			Metrics: pm, Clock: clk, Logger: log}); err != nil {
			return fail(err)
		}
		cleanup = append(cleanup, relay.Close)
		common.Protocol.Presence = true
	}
	// The counts of local writes the hub does not hold yet, as the last run left them.
	ids := make([]string, len(targets))
	for i, t := range targets {
		ids[i] = t.NamespaceID
	}
	unreplicated, err := node.LoadLedger(ctx, store, ids)
	if err != nil {
		return fail(err)
	}
	ledger := node.NewDurableLedger(store, log)
	tcOpts := namespace.TargetControllerOptions{Registry: reg, Targets: targets, Logger: log, Unreplicated: unreplicated,
		// A namespace the hub deleted is no target any more: a restart must not bring it back.
		OnHubDeleted: func(t namespace.Target, _ persistence.ArchiveInfo, _ error) {
			node.ForgetTarget(context.Background(), store, t.NamespaceID)
		}}
	if ledger != nil {
		tcOpts.Ledger = ledger
	}
	if relay != nil {
		tcOpts.Presence = relay
	}
	tc, err := namespace.NewTargetController(tcOpts)
	if err != nil {
		return fail(err)
	}
	cleanup = append(cleanup, tc.Close)
	tokenSource := "NOMICORE_TOKEN (restart the peer after changing it)"
	if *tokenFile != "" {
		tokenSource = "the token file " + *tokenFile
	}
	diag := node.NewPeerDiagnosis(node.PeerDiagnosisOptions{TokenSource: tokenSource, InstanceID: *instanceID, Clock: clk, Logger: log})
	tap, closeCapture, err := common.FrameTap(log, "peer "+*instanceID)
	if err != nil {
		return fail(err)
	}
	cleanup = append(cleanup, func() { _ = closeCapture() })
	peer, err := ws.NewPeer(ws.PeerOptions{Config: common.Protocol, InstanceID: *instanceID, HubInstanceID: *hubID,
		URL: hubURLList[0], FailoverURLs: hubURLList[1:], Token: tw.source, Dialer: diag.Dialer(dialer), Namespaces: tc.NewHandler, Clock: clk,
		Observer: observer.Multi(obs.Observer, observer.ObserverFunc(diag.Observe)), Logger: log, FrameTap: tap})
	if err != nil {
		return fail(err)
	}
	cleanup = append(cleanup, peer.Close)
	if err := obs.ReplicationLoad(peer.Load); err != nil {
		return fail(err)
	}
	obs.Assemblies(tc.Assemblies)
	certs, err := common.TLS.Load(obs, log)
	if err != nil {
		return fail(err)
	}
	localWrites, err := node.NewLocalWrites(tc, obs)
	if err != nil {
		return fail(err)
	}
	localWrites.Ledger = ledger
	// The client listener: editors of the peer's targets, with the client tokens of
	// DATA/tokens.json (peer token add --client).
	var editors *yws.Server
	var clients *node.Server
	var clientTokens *auth.Reloader
	var clientAuth *node.ClientAuth // the editors' credentials (nil with --client-auth none)
	if clientFlags.Enabled() {
		var checks auth.ClientAuthenticator // nil: --client-auth none
		if clientFlags.Auth == "token" {
			revalidate := func() {
				if editors != nil {
					editors.Revalidate() // a removed client token or a revocation closes its editors
				}
			}
			clientTokens, err = auth.NewReloader(auth.ReloaderOptions{Path: filepath.Join(*data, auth.FileName),
				Missing:  fmt.Sprintf("every editor is refused until `peer token add --data %s --client NAME` creates one", *data),
				OnReload: obs.TokenReload, Logger: log, Clock: clk, OnChange: revalidate})
			if err != nil {
				return fail(err)
			}
			clientAuth, err = clientFlags.NewClientAuth(context.Background(), node.ClientAuthOptions{Static: clientTokens, Store: store,
				Node: *instanceID, Clock: clk, Logger: log, OnChange: revalidate})
			if err != nil {
				return fail(err)
			}
			checks = clientAuth.Chain
		}
		m, err := inst.ClientMetrics()
		if err != nil {
			return fail(err)
		}
		opts := clientFlags.Options(inst, common, checks)
		opts.Namespaces, opts.Metrics, opts.Writes = node.PeerNamespaces(tc, store), m, localWrites.Editors()
		if relay != nil {
			opts.Presence = relay
		}
		if editors, err = yws.New(opts); err != nil {
			return fail(err)
		}
		clientLn, err := node.ListenTLS("client-listen", clientFlags.Listen, certs)
		if err != nil {
			return fail(err)
		}
		clients = &node.Server{Name: "client", Listener: clientLn, Handler: node.ClientHandler(editors, log)}
		cleanup = append(cleanup, func() { clientLn.Close() })
	}
	adminOpts := inst.AdminOptions(common)
	pt := &node.PersistentTargets{TC: tc, Store: store}
	if editors != nil {
		pt.Unload = editors.CloseNamespace
	}
	adminOpts.Targets, adminOpts.LocalWrites = pt, localWrites
	adminOpts.Ready = func() error {
		held := localWrites.NotReady()
		if s := peer.State(); s != observer.ConnReady {
			msg := fmt.Sprintf("replication connection is %s", s)
			if why := diag.ConnectionProblem(); why != "" {
				msg += ": " + why
			}
			if held != "" {
				msg += "; " + held
			}
			return errors.New(msg)
		}
		if held != "" {
			return errors.New(held)
		}
		return nil
	}
	adminOpts.ExplainTarget = diag.ExplainTarget
	adminOpts.InstanceID, adminOpts.Load = *instanceID, peer.Load
	adminOpts.Listeners = map[string]string{"admin": *adminListen}
	adminOpts.EditorList = node.EditorList(&editors)
	adminOpts.PresenceList = node.PresenceList(&editors, *instanceID)
	if clientAuth != nil {
		adminOpts.Clients = &node.ClientAdmin{Path: filepath.Join(*data, auth.FileName), Static: clientTokens, Revoked: clientAuth.Revocations}
	}
	if editors != nil {
		adminOpts.Listeners["client"] = clientFlags.Listen
		adminOpts.Editors = func(ns string) (int, bool) { return editors.Editors(ns), true }
		adminOpts.Stateless = editors.BroadcastStateless
	}
	adminOpts.Link = func() adminapi.LinkInfo {
		c, _ := peer.Connection()
		return adminapi.LinkInfo{HubURL: peer.URL(), State: peer.State(), Problem: diag.ConnectionProblem(), PingRTT: c.PingRTT}
	}
	api, err := adminapi.New(adminOpts)
	if err != nil {
		return fail(err)
	}
	adminLn, err := node.ListenTLS("admin-listen", *adminListen, certs)
	if err != nil {
		return fail(err)
	}
	cleanup = nil // from here on the shutdown sequence owns everything

	admin := &node.Server{Name: "admin", Listener: adminLn, Handler: accesslog.Handler(api, log, "admin")}
	sigs := node.NotifySignals()
	defer sigs.Release()
	hup := make(chan struct{}, 1)
	stopTLS := node.WatchTLS(certs, clk, common.TLS.Poll, sigs)
	stopTokenWatch := node.Go(func(ctx context.Context) { tw.run(ctx, clk, *tokenPoll, hup, peer) })
	stopFlush := node.Go(func(ctx context.Context) { obs.RunFlush(ctx, clk, 10*time.Second) })
	stopClientTokens := func(context.Context) error { return nil }
	if clientTokens != nil {
		stopClientTokens = node.Go(func(ctx context.Context) {
			done := make(chan struct{})
			go func() { defer close(done); clientAuth.Run(ctx) }()
			clientTokens.Run(ctx, clk, time.Second, nil)
			<-done
		})
	}
	failed := make(chan error, 2)
	admin.Start(log, failed)
	clientListen := "off"
	if clients != nil {
		clients.Start(log, failed)
		clientListen = clients.Listener.Addr().String()
	}
	peer.Start()
	stopProcs := common.StartProcs(log)
	log.Info("peer running", slog.String("instanceId", *instanceID), slog.String("hubUrl", strings.Join(hubURLList, ",")),
		slog.String("adminListen", adminLn.Addr().String()), slog.String("clientListen", clientListen), slog.Bool("tls", certs != nil),
		slog.String("clientAuth", clientFlags.Auth), slog.String("data", *data), slog.Int("targets", len(targets)),
		slog.String("generation", common.Protocol.Generation.String()), node.LimitAttrs(&common.Protocol))

	exit := sigs.WaitForStop(log, stderr, "peer", hup, failed)
	// The editors first; replication (the connection drains: every namespace closes, admitted
	// applies settle, sessions and leases are released), then the local API, the registry,
	// the store.
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
		{Name: "presence relay", Run: func(context.Context) error {
			if relay != nil {
				relay.Close()
			}
			return nil
		}},
		{Name: "token watcher", Run: stopTokenWatch},
		{Name: "frame capture", Run: func(context.Context) error { return closeCapture() }},
		{Name: "tls watcher", Run: stopTLS},
		{Name: "admin api", Run: func(ctx context.Context) error { api.Close(); return admin.Shutdown(ctx) }},
		{Name: "registry", Run: reg.Close},
		{Name: "store", Run: store.Close},
		{Name: "observer", Run: stopFlush},
		{Name: "processors", Run: stopProcs},
	})
	if err != nil {
		fmt.Fprintf(stderr, "peer: shutdown: %s\n", node.OneLine(err))
		return 1
	}
	log.Info("peer stopped")
	return exit
}

// tokenWatch lets a blocked peer (docs/protocol.md#peer-connection-states) come back when
// its credentials change: refused with 401/403 (after a rotation the peer authenticates
// again once at once, with the token it has then — see ws.Peer), it stays blocked until the
// token file holds a different token than the one last presented, or SIGHUP. The token
// itself is never logged or kept beyond its hash.
type tokenWatch struct {
	inner ws.TokenSource
	file  string

	lastUsed atomic.Pointer[[sha256.Size]byte] // hash of the token of the last dial
}

func (t *tokenWatch) source() (string, error) {
	tok, err := t.inner()
	if err == nil {
		h := sha256.Sum256([]byte(tok))
		t.lastUsed.Store(&h)
	}
	return tok, err
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
		case <-tick.C:
			if p.State() == observer.ConnBlocked && t.changed() {
				p.ConfigChanged()
			}
		}
	}
}
