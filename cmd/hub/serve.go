package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/node"
	"github.com/nomicore/nomicore/node/accesslog"
	"github.com/nomicore/nomicore/node/adminapi"
	"github.com/nomicore/nomicore/node/cli"
	"github.com/nomicore/nomicore/node/gcpace"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/presence"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/ws"
	"github.com/nomicore/nomicore/yws"
)

// paceGC starts the hub's pacing of the garbage collector (gcpace, with its DefaultFloor)
// unless GOGC is set; then it returns nil.
func paceGC(getenv func(string) string) *gcpace.Pacer {
	if getenv("GOGC") != "" {
		return nil
	}
	return gcpace.Start(gcpace.DefaultFloor)
}

// serve runs the hub until SIGINT or SIGTERM, then shuts down in order: the editors first,
// then replication, the admin API, the tokens watcher, the registry, the store
// (docs/protocol.md#restart-and-shutdown).
func serve(args []string, cio cli.IO) int {
	f := cli.NewFlags("hub serve", "hub [serve] [flags]",
		"Runs the hub: peers connect to --listen (WebSocket /v1/replication, with a bearer token from the tokens "+
			"file), applications use the admin API on --admin-listen, editors (stock y-websocket and Hocuspocus providers) connect to "+
			"--client-listen (/v1/yjs/{namespaceId}, with a client token; the editor page is /edit/{namespaceId}). Documents and registry live in a bbolt "+
			"store under --data. SIGINT or SIGTERM stop it in order; SIGHUP re-reads the tokens file and the TLS certificate (--tls-cert).")
	instanceID := f.String("instance-id", "hub", "this hub's `NAME`; peers must expect it (their --hub-instance-id)")
	listen := f.String("listen", "127.0.0.1:8787", "`HOST:PORT` for peers: /v1/replication (WebSocket; wss:// with --tls-cert) and /healthz")
	adminListen := f.String("admin-listen", "127.0.0.1:8788", "`HOST:PORT` of the admin API, /metrics, /healthz and /readyz")
	data := f.String("data", "./nomicore-data/hub", "`DIR` holding the store (nomicore.db) and the tokens file (tokens.json)")
	tokensFile := f.String("tokens", "", "the tokens `FILE` (default DATA/tokens.json)")
	tokensPoll := f.Duration("tokens-poll", time.Second, "how often the tokens file is checked for changes (SIGHUP re-reads it at once)")
	var maxHandshakes, maxOpening int
	f.Define("admission (many peers arriving at once, e.g. after an outage)", func() {
		f.IntVar(&maxHandshakes, "max-handshakes", ws.DefaultMaxHandshakes, "peer connections in their handshake at once; beyond, a new connection is answered 503 with Retry-After and the peer comes back shortly (-1: no limit)")
		f.IntVar(&maxOpening, "max-opening", ws.DefaultMaxOpening, "namespace opens in progress across all peers at once; beyond, new connections are answered 503 with Retry-After (-1: no limit)")
	})
	common := node.RegisterCommon(f)
	clientFlags := node.RegisterClientFlags(f, "127.0.0.1:8789")
	clusterOpts := registerClusterFlags(f)
	feedOpts := registerFeedFlags(f)
	operands, code, ok := f.Parse(args, cio)
	if !ok {
		return code
	}
	if len(operands) > 0 {
		return f.Mistake(cio, "unexpected argument %q (hub serve takes flags only)", operands[0])
	}
	stderr := cio.Stderr
	fail := func(err error) int {
		fmt.Fprintf(stderr, "hub: %s\n", node.OneLine(err))
		return 1
	}
	if err := common.Resolve(); err != nil {
		return fail(err)
	}
	if err := node.CheckInstanceID("instance-id", *instanceID); err != nil {
		return fail(err)
	}
	if err := node.CheckAdmin(*adminListen, common.AdminToken); err != nil {
		return fail(err)
	}
	if *tokensPoll <= 0 {
		return fail(errors.New("--tokens-poll must be positive"))
	}
	if err := clientFlags.Check(); err != nil {
		return fail(err)
	}
	if err := feedOpts.check(); err != nil {
		return fail(err)
	}
	where := "--data " + *data // how the token commands name the tokens file
	if *tokensFile == "" {
		*tokensFile = filepath.Join(*data, auth.FileName)
	} else {
		where = "--tokens " + *tokensFile
	}
	log := node.NewLogger(stderr, common.LogLevel, common.LogFormat, "hub")
	clk := clock.Real()
	if p := paceGC(os.Getenv); p != nil { // the process's environment: the runtime read GOGC from it
		defer p.Stop()
	}

	// Everything that can refuse the configuration is checked before anything is served.
	restored, err := readRestored(*data, log)
	if err != nil {
		return fail(err)
	}
	inst, clusterNode, err := openHub(*data, clusterOpts, feedOpts.storeOptions(), &common.Protocol, restored, clk, log)
	var damaged *node.DamagedStoreError
	if errors.As(err, &damaged) {
		return fail(fmt.Errorf("%v: %s", err, node.HubDamagedFix(*data)))
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
	var editors *yws.Server // the client listener's endpoint, when enabled
	reloader, err := auth.NewReloader(auth.ReloaderOptions{
		Path:     *tokensFile,
		Missing:  missingTokensWarning(where, clientFlags.Enabled() && clientFlags.Auth == "token"),
		OnReload: obs.TokenReload,
		OnChange: func() {
			if editors != nil {
				editors.Revalidate() // a removed client token closes its editors
			}
		},
		Logger: log,
		Namespaces: func(ctx context.Context) ([]string, error) {
			entries, err := reg.Entries(ctx, "")
			ids := make([]string, 0, len(entries))
			for _, e := range entries {
				ids = append(ids, e.NamespaceID)
			}
			return ids, err
		},
	})
	if err != nil {
		return fail(err)
	}
	// The editors' credentials beyond the tokens file: signed tokens, the webhook, and the
	// revocation list (in a hub cluster, kept in the configuration map every node shares).
	var clientAuth *node.ClientAuth
	if clientFlags.Enabled() && clientFlags.Auth == "token" {
		webhookNode := *instanceID
		if clusterNode != nil {
			webhookNode = clusterNode.Name()
		}
		clientAuth, err = clientFlags.NewClientAuth(context.Background(), node.ClientAuthOptions{Static: reloader, Store: store,
			Node: webhookNode, Deferred: clusterNode != nil, Clock: clk, Logger: log,
			OnChange: func() {
				if editors != nil {
					editors.Revalidate() // a revocation closes its editors
				}
			}})
		if err != nil {
			return fail(err)
		}
	}
	// Presence with the peers (the presence extension, offered with --presence-relay on;
	// never by --generation v1): the hub relays between its editors and its peers, and
	// between its peers.
	var relay *presence.Replication
	var presenceMetrics *presence.Metrics
	if clientFlags.PresenceRelay == "on" {
		if presenceMetrics, err = presence.NewMetrics(obs.Registry); err != nil {
			return fail(err)
		}
	}
	if clientFlags.PresenceRelay == "on" && common.Protocol.Generation != protocol.GenerationV1 {
		if relay, err = presence.NewReplication(presence.ReplicationOptions{Hub: true, MaxStates: clientFlags.MaxStates,
			MaxStateBytes: clientFlags.MaxState, UpdatesPerSecond: clientFlags.Limits.AwarenessUpdatesPerSecond,
			Metrics: presenceMetrics, Clock: clk, Logger: log}); err != nil {
			return fail(err)
		}
		cleanup = append(cleanup, relay.Close)
		common.Protocol.Presence = true
	}
	var peerPresence namespace.PresenceRelay
	if relay != nil {
		peerPresence = relay
	}
	namespaces, err := namespace.NewHub(namespace.HubOptions{Registry: reg, Logger: log, Presence: peerPresence,
		Missing: missingNamespaces(restored, *adminListen, common.AdminToken != "", clk, log),
		OwnerMismatch: func(peer, ns, grantOwner, nsOwner string) {
			log.Warn("a peer asked for a namespace of another owner; it was answered as for a missing namespace (NAMESPACE_NOT_FOUND)",
				slog.String("peer", peer), slog.String("namespaceId", ns),
				slog.String("tokenOwner", grantOwner), slog.String("namespaceOwner", nsOwner),
				slog.String("fix", ownerMismatchFix(peer, grantOwner, nsOwner, *tokensFile)))
		}})
	if err != nil {
		return fail(err)
	}
	tap, closeCapture, err := common.FrameTap(log, "hub "+*instanceID)
	if err != nil {
		return fail(err)
	}
	cleanup = append(cleanup, func() { _ = closeCapture() })
	hub, err := ws.NewHub(ws.HubOptions{Config: common.Protocol, InstanceID: *instanceID, Auth: reloader,
		Namespaces: namespaces.NewHandler, Clock: clk, Observer: obs.Observer, Logger: log, FrameTap: tap,
		MaxHandshakes: maxHandshakes, MaxOpening: maxOpening})
	if err != nil {
		return fail(err)
	}
	cleanup = append(cleanup, func() { hub.Shutdown(context.Background()) })
	if err := obs.ReplicationLoad(hub.Load); err != nil {
		return fail(err)
	}
	obs.Assemblies(namespaces.Assemblies)
	adminOpts := inst.AdminOptions(common)
	adminOpts.Backup = hubBackup(inst, clusterNode, *tokensFile, *instanceID, clk)
	adminOpts.Sessions = namespaces.Sessions
	adminOpts.InstanceID, adminOpts.Connections, adminOpts.Flows, adminOpts.Load = *instanceID, hub.Connections, hub.NamespaceFlows, hub.Load
	adminOpts.Listeners = map[string]string{"admin": *adminListen, "replication": *listen}
	if clientFlags.Enabled() {
		adminOpts.Listeners["client"] = clientFlags.Listen
	}
	adminOpts.Editors = func(ns string) (int, bool) { // the editors variable is set below, before anything serves
		if editors == nil {
			return 0, false
		}
		return editors.Editors(ns), true
	}
	adminOpts.EditorList = node.EditorList(&editors)
	nodeName := *instanceID
	if clusterNode != nil {
		nodeName = clusterNode.Name()
	}
	adminOpts.PresenceList = node.PresenceList(&editors, nodeName)
	if clientFlags.Enabled() {
		adminOpts.Stateless = func(ns, payload string) int { return editors.BroadcastStateless(ns, payload) }
	}
	if clientAuth != nil {
		adminOpts.Clients = &node.ClientAdmin{Path: *tokensFile, Static: reloader, Revoked: clientAuth.Revocations}
	}
	if clusterNode != nil {
		adminOpts.Log = func(ns string) (adminapi.LogJSON, bool) {
			st, ok := clusterNode.LogStatus(ns)
			return adminapi.LogJSON{LagRecords: st.LagRecords, Compacting: st.Compacting}, ok
		}
	}
	feed, err := feedOpts.start(inst, clusterNode, &adminOpts, clk, log)
	if err != nil {
		return fail(err)
	}
	api, err := adminapi.New(adminOpts)
	if err != nil {
		return fail(err)
	}
	certs, err := common.TLS.Load(obs, log)
	if err != nil {
		return fail(err)
	}
	// Presence across the cluster's nodes: this node announces there its editors' and its
	// peers' states and hands the other nodes' to them — also without an editor listener,
	// when its peers relay presence.
	var clusterPresence *presence.Cluster
	if clusterNode != nil && clientFlags.PresenceRelay == "on" && (clientFlags.Enabled() || relay != nil) {
		clusterPresence, err = presence.NewCluster(clusterNode.Conn(), presence.ClusterOptions{Node: clusterNode.Name(),
			MaxStates: clientFlags.MaxStates, MaxStateBytes: clientFlags.MaxState, Metrics: presenceMetrics, Clock: clk, Logger: log})
		if err != nil {
			return fail(err)
		}
		if relay != nil {
			// The peers' relay joins the cluster's for its namespaces: the other nodes
			// hear this node's editors and peers, and its editors and peers hear theirs.
			relay.SetUpstream(clusterPresence, func(ns string) (string, bool) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				owner, ok, err := reg.OwnerOf(ctx, ns)
				if err != nil {
					log.Warn("the presence of this namespace's peers is not relayed to the other nodes: its owner could not be read",
						slog.String("namespaceId", ns), slog.String("error", err.Error()))
				}
				return owner, ok && err == nil
			})
		}
	}
	var clients *node.Server
	if clientFlags.Enabled() {
		var checks auth.ClientAuthenticator // nil: --client-auth none
		if clientAuth != nil {
			checks = clientAuth.Chain
		}
		m, err := inst.ClientMetrics()
		if err != nil {
			return fail(err)
		}
		opts := clientFlags.Options(inst, common, checks)
		opts.Namespaces, opts.Metrics = node.HubNamespaces(store), m
		if relay != nil {
			opts.Presence = relay
		}
		if clusterPresence != nil && relay == nil {
			opts.Presence = clusterPresence
		}
		if editors, err = yws.New(opts); err != nil {
			return fail(err)
		}
		clientLn, err := node.ListenTLS("client-listen", clientFlags.Listen, certs)
		if err != nil {
			return fail(err)
		}
		clients = &node.Server{Name: "client", Listener: clientLn, Handler: gateEditors(inst.Ready, node.ClientHandler(editors, log))}
		cleanup = append(cleanup, func() { clientLn.Close() })
	}
	replLn, err := node.ListenTLS("listen", *listen, certs)
	if err != nil {
		return fail(err)
	}
	adminLn, err := node.ListenTLS("admin-listen", *adminListen, certs)
	if err != nil {
		replLn.Close()
		return fail(err)
	}
	cleanup = nil // from here on the shutdown sequence owns everything

	replMux := http.NewServeMux()
	replMux.Handle("/v1/replication", gateCluster(inst.Ready, hub))
	replMux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "{\"status\":\"ok\"}\n")
	})
	repl := &node.Server{Name: "replication", Listener: replLn, Handler: accesslog.Handler(replMux, log, "replication")}
	admin := &node.Server{Name: "admin", Listener: adminLn, Handler: accesslog.Handler(api, log, "admin")}
	sigs := node.NotifySignals()
	defer sigs.Release()
	hup := make(chan struct{}, 1)
	stopTLS := node.WatchTLS(certs, clk, common.TLS.Poll, sigs)
	stopReload := node.Go(func(ctx context.Context) { reloader.Run(ctx, clk, *tokensPoll, hup) })
	stopFlush := node.Go(func(ctx context.Context) { obs.RunFlush(ctx, clk, 10*time.Second) })
	stopFeed := feed.run()
	stopClientAuth := func(context.Context) error { return nil }
	if clientAuth != nil {
		stopClientAuth = node.Go(clientAuth.Run)
	}
	failed := make(chan error, 3)
	repl.Start(log, failed)
	admin.Start(log, failed)
	clientListen := "off"
	if clients != nil {
		clients.Start(log, failed)
		clientListen = clients.Listener.Addr().String()
	}
	stopProcs := common.StartProcs(log)
	log.Info("hub serving", slog.String("instanceId", *instanceID), slog.String("listen", replLn.Addr().String()),
		slog.String("adminListen", adminLn.Addr().String()), slog.String("clientListen", clientListen), slog.Bool("tls", certs != nil),
		slog.String("clientAuth", clientFlags.Auth), slog.Any("clientCredentials", clientKinds(clientAuth)), slog.String("data", *data),
		slog.String("generation", common.Protocol.Generation.String()), node.LimitAttrs(&common.Protocol),
		slog.Int("tokens", reloader.Peers()), slog.Int("clientTokens", reloader.ClientCount()))

	exit := sigs.WaitForStop(log, stderr, "hub", hup, failed)
	// The editors first (local writers, like the admin API, holding leases); replication
	// stops accepting and closes every transport with 1001 (waiting for the applies already
	// admitted, the sessions and their leases); then the local API; the registry; the store;
	// the observer's last summaries.
	err = node.ShutdownInOrder(log, stderr, "hub", common.ShutdownTimeout, sigs.Stop, []node.Step{
		{Name: "editor clients", Run: node.ShutdownClients(editors, clients)},
		{Name: "replication", Run: func(ctx context.Context) error {
			err := hub.Shutdown(ctx)
			return errors.Join(err, repl.Shutdown(ctx))
		}},
		{Name: "presence relay", Run: func(context.Context) error {
			if relay != nil {
				relay.Close()
			}
			return nil
		}},
		{Name: "frame capture", Run: func(context.Context) error { return closeCapture() }},
		{Name: "admin api", Run: func(ctx context.Context) error { api.Close(); return admin.Shutdown(ctx) }},
		{Name: "versions and webhooks", Run: stopFeed},
		{Name: "tokens watcher", Run: stopReload},
		{Name: "editor credentials", Run: stopClientAuth},
		{Name: "tls watcher", Run: stopTLS},
		{Name: "registry", Run: reg.Close},
		{Name: "store", Run: store.Close},
		{Name: "cluster", Run: closeCluster(clusterNode)},
		{Name: "observer", Run: stopFlush},
		{Name: "processors", Run: stopProcs},
	})
	if err != nil {
		fmt.Fprintf(stderr, "hub: shutdown: %s\n", node.OneLine(err))
		return 1
	}
	log.Info("hub stopped")
	return exit
}

var _ persistence.Store = (*persistence.BoltStore)(nil)

// ownerMismatchFix says what to do when peer's token gives it the namespaces of grantOwner
// and it asked for one of nsOwner.
func ownerMismatchFix(peer, grantOwner, nsOwner, tokensFile string) string {
	return fmt.Sprintf("the namespace belongs to owner %q and %s's token to owner %q, and a peer replicates the namespaces "+
		"of its token's owner only: either set \"owner\":%q in %s's entry of %s (the hub applies it within a second; "+
		"%s's namespaces of owner %q then stop replicating), or have %s replicate a namespace of owner %q instead",
		nsOwner, peer, grantOwner, nsOwner, peer, tokensFile, peer, grantOwner, peer, grantOwner)
}

// missingTokensWarning finishes the hub's warning at start without a tokens file: who is
// refused until one exists (peers, and editors when they need client tokens), and the
// command that creates it; where is how that command names the file (--data DIR).
func missingTokensWarning(where string, editors bool) string {
	if editors {
		return fmt.Sprintf("every peer and editor is refused until `hub token add %s --peer NAME` (or `--client NAME` for an editor) creates one", where)
	}
	return fmt.Sprintf("every peer is refused until `hub token add %s --peer NAME` creates one", where)
}

// clientKinds lists the editors' credentials the node accepts (none with --client-auth
// none), for the start line.
func clientKinds(a *node.ClientAuth) []string {
	if a == nil {
		return []string{}
	}
	return a.Kinds()
}
