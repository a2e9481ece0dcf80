// Package node is what the hub and peer binaries share, so that cmd/hub and cmd/peer read as
// a list of the parts a process is made of, in the order they start and stop:
//
//   - flags (Common, RegisterCommon): logging, the admin token, frame capture and every
//     limit and timeout of the replication protocol, each also settable as NOMICORE_<FLAG>;
//     Resolve checks them before anything starts and names every violated constraint by
//     its flags;
//   - logs (NewLogger): text on a terminal, JSON lines elsewhere;
//   - the instance (OpenInstance): the data directory's bbolt store (a store another
//     process holds is refused), the namespace registry over it, and the observability —
//     replication events to the log and to Prometheus metrics served on /metrics;
//   - the admin listener (Listen, CheckAdmin, Server): loopback unless an admin token is
//     set;
//   - TLS (TLSFlags, ListenTLS, WatchTLS): one certificate for every listener of the
//     process, reloaded on SIGHUP and when its files change; the peer's dialer trusting
//     --hub-ca (HubDialer);
//   - the peer's targets (PersistentTargets): the namespaces it replicates, remembered in
//     its store so a restart resumes them;
//   - the peer's diagnosis (PeerDiagnosis): why it is not replicating, for its log, /readyz
//     and GET /v1/targets;
//   - the `write` command (WriteCommand): a small admin API client for scripts;
//   - the shutdown (ShutdownInOrder): replication first, then the admin API, the registry
//     and the store, with a watchdog that exits the process if it takes too long.
package node
