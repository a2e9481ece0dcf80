package cluster

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
)

// The namespace logs are spread over Config.LogStreams streams, so that no one stream —
// one leader, one replication group — carries every write of the cluster: log stream 0 is
// NOMICORE_LOG (subjects nomicore.log.>, which also holds the quorum probes), log stream k
// > 0 is NOMICORE_LOG_k (subjects nomicore.log<k>.>). A namespace's entry names the stream
// of its log, chosen when it is created (a hash of its id over this node's LogStreams) and
// never changed; an entry that names none is a namespace created before the logs were
// spread, whose log is in NOMICORE_LOG. So nodes need not agree on LogStreams: each
// creates the streams it would place namespaces on, and opens any other a namespace names.

// DefaultLogStreams is Config.LogStreams's default: three streams, so that with the usual
// three nodes each may lead one and the writes of a busy cluster are spread over three
// replication groups instead of queueing behind one leader (docs/decisions.md). The change
// feed reads every log stream (feed.go).
const DefaultLogStreams = 3

// maxLogStreams bounds Config.LogStreams.
const maxLogStreams = 64

// logStreamName is the name of log stream k.
func logStreamName(k int) string {
	if k == 0 {
		return StreamName
	}
	return StreamName + "_" + strconv.Itoa(k)
}

// logRoot is the first token of log stream k's subjects.
func logRoot(k int) string {
	if k == 0 {
		return subjectRoot
	}
	return subjectRoot + strconv.Itoa(k)
}

// logSubjectIn is the subject of a namespace's log in log stream k.
func logSubjectIn(k int, owner, ns string) string {
	return logRoot(k) + ".ns." + ownerToken(owner) + "." + ns
}

// placeLog picks the log stream of a new namespace: its id hashed over count streams.
func placeLog(ns string, count int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(ns))
	return int(h.Sum32() % uint32(count))
}

// streamConfig is the configuration of log stream k.
func (n *Node) streamConfig(k int) jetstream.StreamConfig {
	cfg := jetstream.StreamConfig{
		Name:        logStreamName(k),
		Description: "Nomicore: the update logs of namespaces, one subject per namespace",
		Subjects:    []string{logRoot(k) + ".>"},
		Storage:     jetstream.FileStorage,
		Replicas:    n.cfg.Replicas,
		MaxMsgSize:  int32(n.maxMessageBytes()),
		Duplicates:  duplicateWindow,
		DenyDelete:  true,
		AllowDirect: true, // reads from a replica while the leader is away (replica.go)
	}
	if k == 0 {
		cfg.Description = "Nomicore: the update log of every namespace, one subject per namespace"
	}
	// The quorum probe (NOMICORE_LOG) keeps one message per node, a namespace's "created"
	// marker of the change feed one per namespace (feed.go).
	cfg.AllowRollup = true
	return cfg
}

// ensureLogStream creates or opens log stream k, and raises its message limit to this
// node's largest record if a node with smaller limits created it.
func (n *Node) ensureLogStream(ctx context.Context, k int) (jetstream.Stream, error) {
	cfg := n.streamConfig(k)
	s, err := n.js.CreateStream(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		s, err = n.js.Stream(ctx, cfg.Name)
	}
	if err != nil {
		return nil, classify("creating the log stream "+cfg.Name, n.cfg.OpTimeout, err)
	}
	if cur := s.CachedInfo().Config; cur.MaxMsgSize >= 0 && int(cur.MaxMsgSize) < n.maxMessageBytes() {
		cur.MaxMsgSize = int32(n.maxMessageBytes())
		if s, err = n.js.UpdateStream(ctx, cur); err != nil {
			return nil, classify("raising the message limit of "+cfg.Name, n.cfg.OpTimeout, err)
		}
		n.log.Info("raised a log stream's message limit to this node's largest record", "stream", cfg.Name, "bytes", int(cur.MaxMsgSize))
	}
	// A stream created by an earlier version answers no direct gets.
	if cur := s.CachedInfo().Config; !cur.AllowDirect {
		cur.AllowDirect = true
		if s, err = n.js.UpdateStream(ctx, cur); err != nil {
			return nil, classify("letting the replicas of "+cfg.Name+" answer reads", n.cfg.OpTimeout, err)
		}
		n.log.Info("a log stream's replicas now answer reads while its leader is away", "stream", cfg.Name)
	}
	// A log stream other than NOMICORE_LOG created by an earlier version allows no rollup,
	// which the change feed's "created" markers use.
	if cur := s.CachedInfo().Config; !cur.AllowRollup {
		cur.AllowRollup = true
		if s, err = n.js.UpdateStream(ctx, cur); err != nil {
			return nil, classify("letting "+cfg.Name+" keep one change-feed marker per namespace", n.cfg.OpTimeout, err)
		}
	}
	return s, nil
}

// logStream returns log stream k: one this node created at start, or one another node
// created (opened once, then kept).
func (n *Node) logStream(ctx context.Context, k int) (jetstream.Stream, error) {
	if k < 0 || k >= maxLogStreams {
		return nil, fmt.Errorf("cluster: a namespace entry names log stream %d, which no version creates", k)
	}
	n.streamsMu.Lock()
	s := n.streams[k]
	n.streamsMu.Unlock()
	if s != nil {
		return s, nil
	}
	var err error
	if err = n.op(ctx, "opening log stream "+logStreamName(k), func(ctx context.Context, _ *resources) error {
		s, err = n.js.Stream(ctx, logStreamName(k))
		return err
	}); err != nil {
		return nil, err
	}
	n.streamsMu.Lock()
	defer n.streamsMu.Unlock()
	if cur := n.streams[k]; cur != nil {
		return cur, nil
	}
	n.streams[k] = s
	return s, nil
}

// noteLogStream remembers which log stream holds namespace ns's log (read from its entry,
// which never changes it).
func (n *Node) noteLogStream(ns string, k int) {
	n.streamsMu.Lock()
	n.logOf[ns] = k
	n.streamsMu.Unlock()
}

// logStreamOf returns the index of the log stream of namespace ns: remembered from its
// entry, else read from the entry.
func (n *Node) logStreamOf(ctx context.Context, ns string) (int, error) {
	n.streamsMu.Lock()
	k, ok := n.logOf[ns]
	n.streamsMu.Unlock()
	if ok {
		return k, nil
	}
	v, err := n.openEntry(ctx, ns)
	if err != nil {
		return 0, err
	}
	return v.Log, nil
}

// LogStreamName returns the name of the stream that holds namespace ns's log.
func (n *Node) LogStreamName(ctx context.Context, ns string) (string, error) {
	k, err := n.logStreamOf(ctx, ns)
	if err != nil {
		return "", err
	}
	return logStreamName(k), nil
}
