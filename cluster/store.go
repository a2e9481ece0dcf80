package cluster

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nomicore/nomicore/persistence"
)

// Store is the persistence.Catalog of a hub node in a cluster. It keeps what every node
// must see alike in JetStream: the namespace entries (with each namespace's first
// document and its meta record) in EntriesBucket, the configuration map in ConfigBucket.
// It keeps no documents: they are the namespace logs and snapshots (Node.OpenLog), which
// the registry reads through registry.SharedLog, so a cluster node has no
// persistence.Documents (and no archives: archiving is not offered in a cluster yet).
//
// Healthy is the node's quorum. Entries read once are kept in memory, so a node without
// quorum still answers Entry for the namespaces it knows: reads go on while writes are
// refused (docs/protocol.md#degraded-persistence).
type Store struct {
	n *Node

	mu    sync.Mutex // guards cache
	cache map[string]persistence.Entry
}

// Store returns the node's store.
func (n *Node) Store() *Store { return &Store{n: n, cache: make(map[string]persistence.Entry)} }

var _ persistence.Catalog = (*Store)(nil)

// entryValue is a namespace entry in EntriesBucket (JSON).
type entryValue struct {
	Owner     string            `json:"owner"`
	State     persistence.State `json:"state"`
	CreatedAt time.Time         `json:"createdAt"`
	Meta      map[string]string `json:"meta,omitempty"`
	Name      string            `json:"name,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	// Genesis is the namespace's first document (its identity, written by the registry at
	// creation): where its log starts until the first snapshot.
	Genesis []byte `json:"genesis"`
	// The meta record (registry.MetaState): changes claimed, the epoch and schema after them.
	Gen    uint64 `json:"gen"`
	Epoch  uint64 `json:"epoch"`
	Schema []byte `json:"schema,omitempty"`
	// Log is the log stream of the namespace (streams.go; 0, or absent from entries written
	// before the logs were spread: NOMICORE_LOG).
	Log int `json:"log,omitempty"`
}

func (v *entryValue) entry(ns string) persistence.Entry {
	return persistence.Entry{NamespaceID: ns, Owner: v.Owner, State: v.State, CreatedAt: v.CreatedAt, Meta: v.Meta, Name: v.Name, Labels: v.Labels}
}

// op runs f with the node's resources and a deadline, classifying its error. An answer
// that no server was there to give (no responders: a stream between leaders, a replica
// catching up) is asked again until the deadline: f must be safe to repeat after such an
// answer, which nothing received.
func (n *Node) op(ctx context.Context, what string, f func(ctx context.Context, r *resources) error) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.OpTimeout)
	defer cancel()
	r, err := n.resources(ctx)
	if err != nil {
		return err
	}
	return retryUnanswered(ctx, func() error { return classify(what, n.cfg.OpTimeout, f(ctx, r)) })
}

// read runs f, a read that may be repeated whatever became of an earlier attempt: each
// attempt has Config.OpTimeout, and one that finds the cluster unavailable — a stream
// between leaders answers nothing during an election, 4 to 9 seconds after its leader's
// node died — is made again until 2×OpTimeout have passed, so that a namespace opens on
// a node through a sibling's failure instead of failing in the middle of the election.
func (n *Node) read(ctx context.Context, what string, f func(ctx context.Context, r *resources) error) error {
	ctx, cancel := context.WithTimeout(ctx, 2*n.cfg.OpTimeout)
	defer cancel()
	r, err := n.resources(ctx)
	if err != nil {
		return err
	}
	return retry(ctx, func() error {
		actx, acancel := context.WithTimeout(ctx, n.cfg.OpTimeout)
		defer acancel()
		return classify(what, n.cfg.OpTimeout, f(actx, r))
	}, func(err error) bool {
		var ue *UnavailableError
		return errors.As(err, &ue)
	})
}

// retryUntil calls f again, with a short backoff, after any error until ctx ends (for
// operations that may be repeated whatever happened to the first attempt).
func retryUntil(ctx context.Context, f func() error) error {
	return retry(ctx, f, func(error) bool { return true })
}

// retryUnanswered calls f again, with a short backoff, while it fails because nobody
// answered (never a timeout: a request that timed out may have been carried out), until
// ctx ends; then the last error stands.
func retryUnanswered(ctx context.Context, f func() error) error {
	return retry(ctx, f, func(err error) bool {
		var ue *UnavailableError
		return errors.As(err, &ue) && ue.Deadline == 0 && unanswered(ue.Err)
	})
}

// retry calls f until it succeeds, fails with an error again does not accept, or ctx ends,
// waiting between attempts from 25 ms doubling to 400 ms; the last error stands.
func retry(ctx context.Context, f func() error, again func(error) bool) error {
	backoff := 25 * time.Millisecond
	for {
		err := f()
		if err == nil || !again(err) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, 400*time.Millisecond)
	}
}

// storedEntry is an entry as its bucket's stream leader returned it.
type storedEntry struct {
	Revision uint64
	Created  time.Time
	Value    []byte
}

// getEntry reads an entry with its revision from the bucket's stream leader: the bucket's
// own Get may be answered by any replica, one that has not yet seen a namespace created a
// moment ago on another node.
func (n *Node) getEntry(ctx context.Context, ns string) (entryValue, storedEntry, error) {
	var v entryValue
	var se storedEntry
	err := n.read(ctx, "reading a namespace entry", func(ctx context.Context, r *resources) error {
		var err error
		if se, err = n.leaderGet(ctx, "KV_"+EntriesBucket, "$KV."+EntriesBucket+"."+ns); err != nil {
			return err
		}
		return json.Unmarshal(se.Value, &v)
	})
	if err == nil {
		n.noteLogStream(ns, v.Log)
	}
	return v, se, err
}

// leaderGet reads the last message of subject from stream's leader (the JetStream API's
// message get, not the direct get replicas answer). No message, or a deleted or purged
// key, is persistence.ErrNotFound; any other error answer (a stream this node's server does
// not know yet among them) is the *jetstream.APIError, for classify.
func (n *Node) leaderGet(ctx context.Context, stream, subject string) (storedEntry, error) {
	req, _ := json.Marshal(map[string]string{"last_by_subj": subject})
	msg, err := n.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, req)
	if err != nil {
		return storedEntry{}, err
	}
	var resp struct {
		Error   *apiError `json:"error"`
		Message *struct {
			Seq    uint64    `json:"seq"`
			Header []byte    `json:"hdrs"`
			Data   []byte    `json:"data"`
			Time   time.Time `json:"time"`
		} `json:"message"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return storedEntry{}, fmt.Errorf("reading %s: %w", subject, err)
	}
	switch {
	case resp.Error != nil && jetstream.ErrorCode(resp.Error.ErrCode) == errNoMessageFound:
		return storedEntry{}, persistence.ErrNotFound
	case resp.Error != nil:
		return storedEntry{}, resp.Error.err()
	case resp.Message == nil:
		return storedEntry{}, fmt.Errorf("reading %s: an empty answer", subject)
	}
	if len(resp.Message.Header) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Message.Header)
		if err != nil {
			return storedEntry{}, fmt.Errorf("reading %s: %w", subject, err)
		}
		if op := h.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
			return storedEntry{}, persistence.ErrNotFound
		}
	}
	return storedEntry{Revision: resp.Message.Seq, Created: resp.Message.Time, Value: resp.Message.Data}, nil
}

// CreateEntry stores a new entry with snapshot as the namespace's first document (create
// if absent: ErrExists when the id is taken anywhere in the cluster).
func (s *Store) CreateEntry(ctx context.Context, e persistence.Entry, snapshot []byte) error {
	if e.NamespaceID == "" || len(e.NamespaceID) > persistence.MaxNameBytes || e.Owner == "" || len(e.Owner) > persistence.MaxNameBytes {
		return persistence.ErrInvalid
	}
	if err := errors.Join(persistence.CheckEntryName(e.Name), persistence.CheckLabels(e.Labels)); err != nil {
		return err
	}
	v := entryValue{Owner: e.Owner, State: e.State, CreatedAt: e.CreatedAt.UTC(), Meta: e.Meta, Name: e.Name, Labels: e.Labels, Genesis: snapshot, Epoch: 1,
		Log: placeLog(e.NamespaceID, s.n.cfg.LogStreams)}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if e.Name != "" {
		if err := s.claimName(ctx, e.Owner, e.Name, e.NamespaceID); err != nil {
			return err
		}
	}
	err = s.n.op(ctx, "creating a namespace entry", func(ctx context.Context, r *resources) error {
		_, err := r.entries.Create(ctx, e.NamespaceID, b)
		if errors.Is(err, jetstream.ErrKeyExists) {
			return persistence.ErrExists
		}
		return err
	})
	if err == nil {
		s.remember(e.NamespaceID, v.entry(e.NamespaceID))
		s.n.recordCreated(ctx, e.Owner, e.NamespaceID, snapshot)
	} else if e.Name != "" {
		s.releaseName(ctx, e.Owner, e.Name, e.NamespaceID)
	}
	return err
}

func (s *Store) remember(ns string, e persistence.Entry) {
	s.mu.Lock()
	s.cache[ns] = e
	s.mu.Unlock()
}

// Entry returns the entry of namespaceID. Without quorum it answers from the entries this
// node has read before.
func (s *Store) Entry(ctx context.Context, namespaceID string) (persistence.Entry, error) {
	if !s.n.Healthy() {
		s.mu.Lock()
		e, ok := s.cache[namespaceID]
		s.mu.Unlock()
		if ok {
			return e, nil
		}
	}
	v, err := s.n.openEntry(ctx, namespaceID)
	if errors.Is(err, persistence.ErrUnavailable) {
		s.mu.Lock()
		e, ok := s.cache[namespaceID]
		s.mu.Unlock()
		if ok {
			return e, nil
		}
	}
	if err != nil {
		return persistence.Entry{}, err
	}
	e := v.entry(namespaceID)
	s.remember(namespaceID, e)
	return e, nil
}

// Entries lists the entries of owner ("" for all), by namespace id.
func (s *Store) Entries(ctx context.Context, owner string) ([]persistence.Entry, error) {
	var out []persistence.Entry
	err := s.n.op(ctx, "listing namespace entries", func(ctx context.Context, r *resources) error {
		w, err := r.entries.WatchAll(ctx, jetstream.IgnoreDeletes())
		if err != nil {
			return err
		}
		defer w.Stop()
		for {
			select {
			case kve, ok := <-w.Updates():
				if !ok {
					return ctx.Err()
				}
				if kve == nil {
					return nil // every current value was delivered
				}
				var v entryValue
				if !strings.HasPrefix(kve.Key(), "ns-") || json.Unmarshal(kve.Value(), &v) != nil {
					continue // a name claim (names.go), or not an entry
				}
				if v.State == persistence.StateDeleted {
					continue
				}
				if owner == "" || v.Owner == owner {
					out = append(out, v.entry(kve.Key()))
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NamespaceID < out[j].NamespaceID })
	s.mu.Lock()
	for _, e := range out {
		s.cache[e.NamespaceID] = e
	}
	s.mu.Unlock()
	return out, nil
}

// configKey maps a configuration key (any UTF-8) to a bucket key.
func configKey(key string) string { return "k" + base64.RawURLEncoding.EncodeToString([]byte(key)) }

func checkConfigKey(key string) error {
	if key == "" || len(key) > persistence.MaxNameBytes {
		return persistence.ErrInvalid
	}
	return nil
}

// PutConfig stores value under key in ConfigBucket.
func (s *Store) PutConfig(ctx context.Context, key string, value []byte) error {
	if err := checkConfigKey(key); err != nil {
		return err
	}
	return s.n.op(ctx, "writing the configuration", func(ctx context.Context, r *resources) error {
		_, err := r.config.Put(ctx, configKey(key), value)
		return err
	})
}

// Config returns the value of key, or ErrNotFound.
func (s *Store) Config(ctx context.Context, key string) ([]byte, error) {
	if err := checkConfigKey(key); err != nil {
		return nil, err
	}
	var v []byte
	err := s.n.op(ctx, "reading the configuration", func(ctx context.Context, r *resources) error {
		kve, err := r.config.Get(ctx, configKey(key))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return persistence.ErrNotFound
		}
		if err == nil {
			v = kve.Value()
		}
		return err
	})
	return v, err
}

// DeleteConfig removes key (an absent key is not an error).
func (s *Store) DeleteConfig(ctx context.Context, key string) error {
	if err := checkConfigKey(key); err != nil {
		return err
	}
	return s.n.op(ctx, "deleting from the configuration", func(ctx context.Context, r *resources) error {
		err := r.config.Delete(ctx, configKey(key))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		return err
	})
}

// ConfigKeys lists the keys that start with prefix, in byte order.
func (s *Store) ConfigKeys(ctx context.Context, prefix string) ([]string, error) {
	var out []string
	err := s.n.op(ctx, "listing the configuration", func(ctx context.Context, r *resources) error {
		l, err := r.config.ListKeys(ctx)
		if err != nil {
			return err
		}
		defer l.Stop()
		for k := range l.Keys() {
			b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(k, "k"))
			if err != nil {
				continue
			}
			if strings.HasPrefix(string(b), prefix) {
				out = append(out, string(b))
			}
		}
		return ctx.Err()
	})
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		err = nil
	}
	sort.Strings(out)
	return out, err
}

// WatchConfig calls changed whenever a key of ConfigBucket that starts with prefix is put
// or deleted, from any node, until ctx ends or the node closes: how every node learns of a
// change another node made (the editors' revocation list). It returns once the watch is
// set up (that waits for the node's resources, within ctx).
func (s *Store) WatchConfig(ctx context.Context, prefix string, changed func()) error {
	r, err := s.n.resources(ctx)
	if err != nil {
		return err
	}
	w, err := r.config.WatchAll(ctx, jetstream.UpdatesOnly(), jetstream.MetaOnly())
	if err != nil {
		return classify("watching the configuration", s.n.cfg.OpTimeout, err)
	}
	go func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil {
					continue
				}
				b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(e.Key(), "k"))
				if err == nil && strings.HasPrefix(string(b), prefix) {
					changed()
				}
			}
		}
	}()
	return nil
}

// Healthy reports the node's quorum (without it writes are refused).
func (s *Store) Healthy() bool { return s.n.Healthy() }

// Stats has nothing of a local store to count; Resident is the namespaces this node
// follows.
func (s *Store) Stats() persistence.Stats {
	s.n.logsMu.Lock()
	defer s.n.logsMu.Unlock()
	return persistence.Stats{Resident: len(s.n.logs), Compactions: s.n.metrics.done.Load()}
}

// Close has nothing to close: the node is closed by its owner (Node.Close) after the
// registry.
func (s *Store) Close(context.Context) error { return nil }

// apiError is the error of a JetStream API answer read without the client's helpers.
type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

// err is the error as the client's helpers report it.
func (e *apiError) err() error {
	return &jetstream.APIError{Code: e.Code, ErrorCode: jetstream.ErrorCode(e.ErrCode), Description: e.Description}
}
