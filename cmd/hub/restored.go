package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nomicore/nomicore/backup"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/cluster"
	"github.com/nomicore/nomicore/node"
	"github.com/nomicore/nomicore/node/cli"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
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
// node's copy of the cluster's state (and its tokens file).
func hubBackup(inst *node.Instance, n *cluster.Node, tokensFile, instanceID string, clk clock.Clock) func(context.Context, io.Writer) (int64, error) {
	if n == nil {
		st, ok := inst.Store.(*persistence.BoltStore)
		if !ok {
			return nil
		}
		return node.HubBackup(st, tokensFile, instanceID, clk)
	}
	return func(ctx context.Context, w io.Writer) (int64, error) {
		cw := &countingWriter{w: w}
		bw, err := backup.NewWriter(cw, backup.Header{Kind: backup.KindHubCluster, CreatedAt: clk.Now().UTC(),
			Version: cli.Version("hub"), InstanceID: instanceID, Node: n.Name()})
		if err != nil {
			return cw.n, err
		}
		if err := n.Backup(ctx, bw); err != nil {
			return cw.n, err
		}
		if tokens, err := os.ReadFile(tokensFile); err == nil {
			if err := bw.Bytes(backup.KindTokens, tokens); err != nil {
				return cw.n, err
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			return cw.n, err
		}
		return cw.n, bw.Close()
	}
}

// countingWriter counts what it passes on.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// clusterRestore loads the backup a restore left in the data directory of a cluster node
// (node.ClusterRestoreFile) into its cluster, which must be new and empty: in the background,
// once the cluster has quorum (the node's siblings start meanwhile), then — with
// --restore-fence — raises every namespace's epoch, and marks the restore done. Until then
// the node is not ready and refuses peers and editors; a load that fails leaves it so,
// saying why.
type clusterRestore struct {
	mu    sync.Mutex // guards state
	state error      // nil once loaded
}

func startClusterRestore(n *cluster.Node, reg *registry.Registry, data string, note *node.Restored, log *slog.Logger) *clusterRestore {
	cr := &clusterRestore{state: errors.New("loading a backup into the cluster (waiting for quorum)")}
	go func() {
		err := loadClusterRestore(n, reg, data, note, log)
		if err != nil {
			log.Error("the backup could not be loaded into the cluster; this node stays not ready: fix the cause and restart it",
				slog.String("error", err.Error()))
			err = fmt.Errorf("the backup could not be loaded into the cluster: %v", err)
		}
		cr.mu.Lock()
		cr.state = err
		cr.mu.Unlock()
	}()
	return cr
}

// Ready says why the node cannot serve yet (nil once the backup is loaded).
func (cr *clusterRestore) Ready() error {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	return cr.state
}

func loadClusterRestore(n *cluster.Node, reg *registry.Registry, data string, note *node.Restored, log *slog.Logger) error {
	path := filepath.Join(data, node.ClusterRestoreFile)
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := backup.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	log.Info("loading the backup into the cluster once it has quorum; the node serves once it is loaded",
		slog.String("backup", path), slog.Time("backupCreatedAt", note.BackupCreatedAt))
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	start := time.Now()
	loaded, err := n.Restore(ctx, r, log)
	if err != nil {
		return fmt.Errorf("loading %s: %w", path, err)
	}
	log.Info("the backup is loaded into the cluster", slog.Int("namespaces", loaded),
		slog.Duration("took", time.Since(start).Round(time.Millisecond)))
	if note.Fence {
		if fenced, err := node.FenceAll(ctx, reg, log); err != nil {
			return fmt.Errorf("fencing the restored namespaces (%d done): %w", fenced, err)
		}
	}
	note.Pending = false
	if err := node.WriteRestored(data, *note); err != nil {
		return err
	}
	return os.Remove(path)
}
