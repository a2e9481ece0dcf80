package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"time"

	"github.com/nomicore/nomicore/internal/adminapi"
	"github.com/nomicore/nomicore/internal/clock"
	"github.com/nomicore/nomicore/internal/node"
	"github.com/nomicore/nomicore/internal/tokens"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/replication/ws"
)

// serve runs the hub until SIGINT or SIGTERM, then shuts down in the order of §21.
func serve(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("hub serve", flag.ContinueOnError)
	instanceID := fs.String("instance-id", "hub", "this hub's instance id (§6.2 hubInstanceId)")
	listen := fs.String("listen", "127.0.0.1:8787", "replication listener: /v1/replication (WebSocket) and /healthz")
	adminListen := fs.String("admin-listen", "127.0.0.1:8788", "admin API listener (GUIDE §8)")
	data := fs.String("data", "./nomicore-data/hub", "data directory: the bbolt store nomicore.db and tokens.json")
	tokensFile := fs.String("tokens", "", "tokens file (default DATA/tokens.json)")
	tokensPoll := fs.Duration("tokens-poll", time.Second, "how often the tokens file is checked for changes (SIGHUP reloads at once)")
	common := node.RegisterCommon(fs)
	clusterOpts := registerClusterFlags(fs)
	if code, ok := node.ParseFlags(fs, args, getenv, stderr); !ok {
		return code
	}
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
	if *tokensFile == "" {
		*tokensFile = filepath.Join(*data, tokens.FileName)
	}
	log := node.NewLogger(stderr, common.LogLevel, "hub")
	clk := clock.Real()

	// Everything that can refuse the configuration is checked before anything is served.
	inst, err := openHub(*data, clusterOpts, clk, log)
	if err != nil {
		return fail(err)
	}
	store, reg, obs := inst.store, inst.reg, inst.obs
	cleanup := []func(){inst.close}
	defer func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}()
	reloader, err := tokens.NewReloader(tokens.ReloaderOptions{
		Path:     *tokensFile,
		OnReload: obs.TokenReload,
		Logger:   log,
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
	namespaces, err := ws.NewHubNamespaces(ws.HubNamespacesOptions{Registry: reg, Logger: log})
	if err != nil {
		return fail(err)
	}
	hub, err := ws.NewHub(ws.HubOptions{Config: common.Protocol, InstanceID: *instanceID, Auth: reloader.Authenticator(),
		Namespaces: namespaces.NewHandler, Clock: clk, Observer: obs.Observer, Logger: log})
	if err != nil {
		return fail(err)
	}
	cleanup = append(cleanup, func() { hub.Shutdown(context.Background()) })
	obs.ReplicationLoad(hub.Load)
	adminOpts := inst.admin(common)
	adminOpts.Sessions = namespaces.Sessions
	api, err := adminapi.New(adminOpts)
	if err != nil {
		return fail(err)
	}
	replLn, err := node.Listen("listen", *listen)
	if err != nil {
		return fail(err)
	}
	adminLn, err := node.Listen("admin-listen", *adminListen)
	if err != nil {
		replLn.Close()
		return fail(err)
	}
	cleanup = nil // from here on the shutdown sequence owns everything

	replMux := http.NewServeMux()
	replMux.Handle("/v1/replication", inst.gateReplication(hub))
	replMux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "{\"status\":\"ok\"}\n")
	})
	repl := &node.Server{Name: "replication", Listener: replLn, Handler: replMux}
	admin := &node.Server{Name: "admin", Listener: adminLn, Handler: api}
	sigs := node.NotifySignals()
	defer sigs.Release()
	hup := make(chan struct{}, 1)
	stopReload := node.Go(func(ctx context.Context) { reloader.Run(ctx, clk, *tokensPoll, hup) })
	stopFlush := node.Go(func(ctx context.Context) { obs.RunFlush(ctx, clk, 10*time.Second) })
	failed := make(chan error, 2)
	repl.Start(log, failed)
	admin.Start(log, failed)
	log.Info("hub serving", slog.String("instanceId", *instanceID), slog.String("listen", replLn.Addr().String()),
		slog.String("adminListen", adminLn.Addr().String()), slog.String("data", *data),
		slog.String("generation", common.Protocol.Generation.String()), slog.Int("tokens", reloader.Peers()))

	exit := sigs.WaitForStop(log, stderr, "hub", hup, failed)
	// §21: replication stops accepting and closes every transport with 1001 (waiting for the
	// applies already admitted, the sessions and their leases); then the local API; the
	// registry; the store; the observer's last summaries.
	err = node.ShutdownInOrder(log, stderr, "hub", common.ShutdownTimeout, sigs.Stop, []node.Step{
		{Name: "replication", Run: func(ctx context.Context) error {
			err := hub.Shutdown(ctx)
			return errors.Join(err, repl.Shutdown(ctx))
		}},
		{Name: "admin api", Run: func(ctx context.Context) error { api.Close(); return admin.Shutdown(ctx) }},
		{Name: "tokens watcher", Run: stopReload},
		{Name: "registry", Run: reg.Close},
		{Name: "store", Run: store.Close},
		{Name: "cluster", Run: inst.closeCluster},
		{Name: "observer", Run: stopFlush},
	})
	if err != nil {
		fmt.Fprintf(stderr, "hub: shutdown: %s\n", node.OneLine(err))
		return 1
	}
	log.Info("hub stopped")
	return exit
}

var _ persistence.Store = (*persistence.BoltStore)(nil)
