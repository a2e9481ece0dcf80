package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Upgrading a cluster whose nodes wrote one log stream and single records.
//
// This version writes what earlier versions cannot read: batches of records in one log
// message (record.go), which an earlier node skips as unreadable — its copy of the
// document would silently lose those updates — and the logs of new namespaces in streams
// other than NOMICORE_LOG (streams.go), where an earlier node, which reads no stream
// from an entry, would look for them in NOMICORE_LOG and find nothing. What earlier
// versions wrote this version reads as it is: the namespaces whose entries name no stream
// keep their logs in NOMICORE_LOG, single records are read as batches of one. So nothing
// is moved on upgrade; the only danger is an earlier node still running beside this one.
//
// Each node marks its entry in NodesBucket with the log format it writes (logFormat).
// While a node whose entry has no such mark (it last started with an earlier version) is
// alive — its quorum probe is recent — this node refuses writes (it reports no quorum,
// with the reason), so it never writes a record that node would lose. Once every live
// node runs this version, writes are accepted again: a rolling upgrade goes one node at a
// time, the upgraded nodes refusing writes (their peers move to the others) until the last
// earlier node has been upgraded.

// logFormat is the log format this version writes: batches of records, logs spread over
// several streams. Earlier versions wrote no mark (0).
const logFormat = 2

// Checking for nodes of an earlier version.
const (
	// olderCheckEvery is how often the nodes' entries are read.
	olderCheckEvery = 5 * time.Second
	// olderAlive is how recent a node's last probe must be for it to count as alive: far
	// more than the probe interval of a loaded node, far less than an upgrade's downtime
	// would keep an operator waiting.
	olderAlive = 15 * time.Second
)

// OlderNodesError says which live nodes run an earlier version that cannot read what this
// one writes.
type OlderNodesError struct{ Nodes []string }

func (e *OlderNodesError) Error() string {
	who := "node " + e.Nodes[0] + " runs"
	if len(e.Nodes) > 1 {
		who = "nodes " + strings.Join(e.Nodes, ", ") + " run"
	}
	return fmt.Sprintf("%s an earlier version of Nomicore, which cannot read the batched records and spread logs this version writes: "+
		"writes are refused until every node runs this version (upgrade %s, one node at a time)",
		who, strings.Join(e.Nodes, ", "))
}

// olderNodes returns the nodes whose entry carries no log format this node can share the
// log with and whose last quorum probe is recent.
func (n *Node) olderNodes(ctx context.Context) ([]string, error) {
	keys, err := n.nodeNames(ctx)
	if err != nil {
		return nil, err
	}
	var older []string
	for _, name := range keys {
		if name == n.cfg.NodeName {
			continue
		}
		e, err := n.res.nodes.Get(ctx, name)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var rec nodeRecord
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			return nil, fmt.Errorf("the entry of node %s: %w", name, err)
		}
		if rec.LogFormat >= logFormat {
			continue
		}
		probe, err := n.res.stream.GetLastMsgForSubject(ctx, subjectRoot+".probe."+name)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // it never probed: it never served
		}
		if err != nil {
			return nil, err
		}
		if n.cfg.Clock.Now().Sub(probe.Time) < olderAlive {
			older = append(older, name)
		}
	}
	slices.Sort(older)
	return older, nil
}

// watchOlder checks every olderCheckEvery for nodes of an earlier version, on a goroutine of
// its own so that a check waiting through an election never delays the quorum probes.
func (n *Node) watchOlder() {
	defer n.wg.Done()
	for n.sleep(olderCheckEvery) {
		n.checkOlder()
	}
}

// checkOlder reads which nodes of an earlier version are alive and records the answer for
// Healthy and Ready (the run goroutine once, then watchOlder). A failed reading keeps the
// last answer.
func (n *Node) checkOlder() {
	ctx, cancel := context.WithTimeout(n.life, n.cfg.OpTimeout)
	defer cancel()
	older, err := n.olderNodes(ctx)
	if err != nil {
		if n.life.Err() == nil {
			n.log.Debug("could not read which nodes run an earlier version", slog.String("error", err.Error()))
		}
		return
	}
	prev := n.older.Load()
	switch {
	case len(older) == 0 && prev != nil:
		n.older.Store(nil)
		n.log.Info("every live node runs this version: writes are accepted again")
	case len(older) > 0 && (prev == nil || !slices.Equal(prev.Nodes, older)):
		e := &OlderNodesError{Nodes: older}
		n.older.Store(e)
		n.log.Error(e.Error())
	}
}
