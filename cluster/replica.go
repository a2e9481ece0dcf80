package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nomicore/nomicore/persistence"
)

// Opening a namespace reads three things a JetStream group's leader normally answers: the
// namespace's entry, the tags of its snapshot, and the head of its log. When the node
// that led one of those groups dies, the group answers nothing until the others elect a
// leader — 4 to 9 seconds with NATS's fixed election timeouts — and every namespace opened
// meanwhile would wait for it: the peers of a killed node could not go on elsewhere. So
// these reads ask the leader for at most leaderAttempt and, when it does not answer, ask
// the group's replicas (a direct get: any server holding a copy answers, its own first).
//
// A replica holds everything the group committed before it last heard from its leader,
// except what was committed in the last moment — the leader's final commits may have
// reached only the other replica. What that costs each read:
//
//   - an entry: nothing. What an open uses of it — owner, state, first document, log
//     stream — never changes once written. A replica that does not know the namespace (it
//     was created a moment ago) is not believed: the leader is asked again.
//   - the head of a log: the open may end before the last writes acknowledged elsewhere;
//     they reach the namespace as soon as the log has a leader again, like any later write.
//   - a snapshot's purge floor: the follower checks it to learn whether the log was
//     compacted past its position. A replica could miss a compaction only if it lagged by
//     two compactions of that namespace (about two thousand of its records) — far more than
//     the moment of a leader's death.
//
// The meta record (epoch bumps, schema replacements) is compared and set on the leader
// only: it is never read from a replica.

// leaderAttempt bounds the first attempt to read from a group's leader; once it went
// unanswered the replicas are asked, and the leader again with attempts of
// leaderRetryAttempt in between. A group whose leader went unanswered is asked with
// attempts of leaderRetryAttempt for awayFor after (until its leader answers again), so
// that the opens of a failover do not each wait leaderAttempt for the same dead leader.
const (
	leaderAttempt      = 500 * time.Millisecond
	leaderRetryAttempt = 100 * time.Millisecond
	awayFor            = 15 * time.Second
)

// readLeaderOrReplica runs leader, a read from the leader of group (a stream's name),
// until ctx ends; after an attempt that found the group unavailable it runs replica, the
// same read from any copy of the group, and takes its answer — unless it is
// persistence.ErrNotFound, which only the leader may say — and otherwise asks both again,
// with a short backoff. An answer of the leader other than unavailability ends the read.
func (n *Node) readLeaderOrReplica(ctx context.Context, group, what string, leader, replica func(ctx context.Context) error) error {
	attempt := func(f func(ctx context.Context) error, d time.Duration) error {
		actx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return classify(what, d, f(actx))
	}
	first := leaderAttempt
	n.awayMu.Lock()
	if t, ok := n.leaderAway[group]; ok && n.cfg.Clock.Now().Sub(t) < awayFor {
		first = leaderRetryAttempt
	}
	n.awayMu.Unlock()
	backoff := 25 * time.Millisecond
	err := attempt(leader, first)
	for {
		away := errors.Is(err, persistence.ErrUnavailable)
		n.awayMu.Lock()
		if away {
			n.leaderAway[group] = n.cfg.Clock.Now()
		} else {
			delete(n.leaderAway, group)
		}
		n.awayMu.Unlock()
		if !away || ctx.Err() != nil {
			return err
		}
		if attempt(replica, leaderAttempt) == nil {
			n.log.Debug("read from a replica: the group's leader did not answer", "group", group, "what", what)
			return nil
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, 200*time.Millisecond)
		err = attempt(leader, leaderRetryAttempt)
	}
}

// directGetLast reads the last message of subject from any copy of stream (a direct get;
// the stream allows them). No message, or a deleted or purged key, is
// persistence.ErrNotFound.
func (n *Node) directGetLast(ctx context.Context, stream, subject string) (storedEntry, error) {
	msg, err := n.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+stream+"."+subject, nil)
	if err != nil {
		return storedEntry{}, err
	}
	if status := msg.Header.Get("Status"); status != "" {
		if status == "404" {
			return storedEntry{}, persistence.ErrNotFound
		}
		return storedEntry{}, fmt.Errorf("reading %s from a replica: %s %s", subject, status, msg.Header.Get("Description"))
	}
	if op := msg.Header.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
		return storedEntry{}, persistence.ErrNotFound
	}
	seq, err := strconv.ParseUint(msg.Header.Get(nats.JSSequence), 10, 64)
	if err != nil {
		return storedEntry{}, fmt.Errorf("reading %s from a replica: no sequence in the answer", subject)
	}
	at, _ := time.Parse(time.RFC3339Nano, msg.Header.Get(nats.JSTimeStamp))
	return storedEntry{Revision: seq, Created: at, Value: msg.Data}, nil
}

// openEntry reads a namespace's entry for opening it: from the bucket's leader, or — while
// it does not answer — from a replica (see above; never for the meta record).
func (n *Node) openEntry(ctx context.Context, ns string) (entryValue, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*n.cfg.OpTimeout)
	defer cancel()
	if _, err := n.resources(ctx); err != nil {
		return entryValue{}, err
	}
	var v entryValue
	subject := "$KV." + EntriesBucket + "." + ns
	decode := func(se storedEntry, err error) error {
		if err != nil {
			return err
		}
		v = entryValue{}
		return json.Unmarshal(se.Value, &v)
	}
	err := n.readLeaderOrReplica(ctx, "KV_"+EntriesBucket, "reading a namespace entry",
		func(ctx context.Context) error { return decode(n.leaderGet(ctx, "KV_"+EntriesBucket, subject)) },
		func(ctx context.Context) error { return decode(n.directGetLast(ctx, "KV_"+EntriesBucket, subject)) })
	if err == nil {
		n.noteLogStream(ns, v.Log)
	}
	return v, err
}

// directBatch reads the messages of subject from position from on from any copy of
// stream, in order, in one direct get of up to directBatchSize messages; each goes to f,
// which may stop the reading by returning false. A copy that holds nothing from position
// from on answers "not found": nothing is read, no error.
func (n *Node) directBatch(ctx context.Context, stream, subject string, from uint64, f func(seq uint64, data []byte) bool) error {
	inbox := n.nc.NewRespInbox()
	sub, err := n.nc.SubscribeSync(inbox)
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	req, _ := json.Marshal(map[string]any{"seq": from, "next_by_subj": subject, "batch": directBatchSize})
	if err := n.nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, req); err != nil {
		return err
	}
	for {
		msg, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return err
		}
		switch status := msg.Header.Get("Status"); status {
		case "":
		case "204", "404": // the end of the batch; nothing (more) to read
			return nil
		default:
			return fmt.Errorf("reading %s from a replica: %s %s", subject, status, msg.Header.Get("Description"))
		}
		seq, err := strconv.ParseUint(msg.Header.Get(nats.JSSequence), 10, 64)
		if err != nil {
			return fmt.Errorf("reading %s from a replica: no sequence in the answer", subject)
		}
		if !f(seq, msg.Data) {
			return nil
		}
	}
}

// directBatchSize is the most messages one direct get returns.
const directBatchSize = 256
