package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/cluster"
	"github.com/nomicore/nomicore/node"
	"github.com/nomicore/nomicore/persistence"
)

// readRestored reads the note a restore left in the data directory, and logs it.
func readRestored(data string, log *slog.Logger) (*node.Restored, error) {
	note, ok, err := node.ReadRestored(data)
	if err != nil || !ok {
		return nil, err
	}
	log.Info("this hub was restored from a backup: peers that reconnect merge what they wrote since back into it; "+
		"a peer asking for a namespace created since is reported with what to do",
		slog.Time("backupCreatedAt", note.BackupCreatedAt), slog.Time("restoredAt", note.RestoredAt),
		slog.String("from", note.From), slog.Bool("fenced", note.Fence), slog.Int("namespaces", note.Namespaces))
	return &note, nil
}

// missingNamespaces is the hub's report of a peer asking for a namespace it does not have
// under any owner: once per namespace every ten minutes (a peer asks again on its retries),
// with the next step. After a restore it is the likely case of a namespace created after
// the backup, whose content its peers still hold.
func missingNamespaces(restored *node.Restored, adminListen string, adminToken bool, clk clock.Clock, log *slog.Logger) func(peer, ns string, hasReplica bool) {
	auth := ""
	if adminToken {
		auth = "-H \"Authorization: Bearer $(cat ADMIN_TOKEN_FILE)\" "
	}
	var mu sync.Mutex // guards last
	last := map[string]time.Time{}
	return func(peer, ns string, hasReplica bool) {
		now := clk.Now()
		mu.Lock()
		if t, ok := last[ns]; ok && now.Sub(t) < 10*time.Minute {
			mu.Unlock()
			return
		}
		last[ns] = now
		mu.Unlock()
		attrs := []any{slog.String("peer", peer), slog.String("namespaceId", ns), slog.Bool("peerHasReplica", hasReplica)}
		if restored == nil || !hasReplica {
			log.Warn("a peer asked for a namespace this hub does not have (NAMESPACE_NOT_FOUND): check the peer's target, or "+
				"create the namespace here", attrs...)
			return
		}
		fix := fmt.Sprintf("get it back from the peer's replica: curl -s http://PEER_ADMIN/v1/namespaces/%s/update | "+
			"curl -X POST --data-binary @- %shttp://%s/v1/namespaces/%s/recreate?owner=OWNER "+
			"(the peers open it again within 15 s, and what they wrote flows back); or, to drop it, remove the target on the peers",
			ns, auth, adminListen, ns)
		log.Warn("a peer asked for a namespace this hub does not have: the hub was restored from a backup taken before the "+
			"namespace was created, and the peer holds a replica of it", append(attrs,
			slog.Time("backupCreatedAt", restored.BackupCreatedAt), slog.String("fix", fix))...)
	}
}

// hubBackup is the admin API's backup: a single hub's store and tokens file, or a cluster
// node's copy of the cluster's state.
func hubBackup(inst *node.Instance, n *cluster.Node, tokensFile, instanceID string, clk clock.Clock) func(context.Context, io.Writer) (int64, error) {
	if n != nil {
		return nil // the cluster's backup comes with the cluster's restore
	}
	st, ok := inst.Store.(*persistence.BoltStore)
	if !ok {
		return nil
	}
	return node.HubBackup(st, tokensFile, instanceID, clk)
}
