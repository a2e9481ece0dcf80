package node

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nomicore/nomicore/persistence"
)

// ledgerKeyPrefix is where a peer keeps, in its store's configuration map, each target's
// count of local write bytes the hub has not confirmed: peer/unreplicated/<namespaceId>,
// value {"bytes": N}; no key means none.
const ledgerKeyPrefix = "peer/unreplicated/"

// configQueue is the store's group-committed configuration write (persistence's
// QueueConfig), which both local stores have.
type configQueue interface {
	QueueConfig(key string, value []byte) (*persistence.ConfigWrite, error)
}

// DurableLedger is the peer's namespace.LocalWriteLedger: it writes each change of a
// target's count into the store with the group commit, behind the write that changed it,
// so that after a restart — a kill -9 included — /readyz, the metrics and the dashboard
// still count the local writes the hub does not hold.
type DurableLedger struct {
	store configQueue
	log   *slog.Logger

	mu   sync.Mutex                          // guards last
	last map[string]*persistence.ConfigWrite // the last value queued per namespace
}

// NewDurableLedger returns the ledger kept in store, or nil when the store cannot queue
// configuration writes (then the counts live in memory only).
func NewDurableLedger(store persistence.Catalog, log *slog.Logger) *DurableLedger {
	q, ok := store.(configQueue)
	if !ok {
		return nil
	}
	return &DurableLedger{store: q, log: log, last: make(map[string]*persistence.ConfigWrite)}
}

type ledgerValue struct {
	Bytes int64 `json:"bytes"`
}

// Record queues a target's count (namespace.LocalWriteLedger). It never blocks.
func (l *DurableLedger) Record(namespaceID string, unreplicated int64) {
	var v []byte
	if unreplicated > 0 {
		v, _ = json.Marshal(ledgerValue{unreplicated})
	}
	w, err := l.store.QueueConfig(ledgerKeyPrefix+namespaceID, v)
	if err != nil {
		// A full queue or a closed store: the count on disk stays behind until the next
		// change; the replica itself still holds the writes.
		l.log.Warn("the count of local writes not on the hub could not be saved; it is saved with the next change",
			slog.String("namespaceId", namespaceID), slog.String("error", err.Error()))
		return
	}
	l.mu.Lock()
	l.last[namespaceID] = w
	l.mu.Unlock()
}

// Wait waits until the last count queued for namespaceID is on disk (or ctx ends).
func (l *DurableLedger) Wait(ctx context.Context, namespaceID string) error {
	if w := l.queued(namespaceID); w != nil {
		return w.Wait(ctx)
	}
	return nil
}

// queued is the last count queued for namespaceID (nil: none was).
func (l *DurableLedger) queued(namespaceID string) *persistence.ConfigWrite {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last[namespaceID]
}

// LoadLedger reads the counts a peer kept, for the targets it has; the counts of
// namespaces that are no longer targets are removed.
func LoadLedger(ctx context.Context, store persistence.Catalog, targets []string) (map[string]int64, error) {
	counts, err := loadLedger(ctx, store)
	if err != nil {
		return nil, err
	}
	keep := map[string]bool{}
	for _, t := range targets {
		keep[t] = true
	}
	for ns := range counts {
		if !keep[ns] {
			delete(counts, ns)
			if err := store.DeleteConfig(ctx, ledgerKeyPrefix+ns); err != nil {
				return nil, err
			}
		}
	}
	return counts, nil
}

// loadLedger reads every count kept in store.
func loadLedger(ctx context.Context, store persistence.Catalog) (map[string]int64, error) {
	keys, err := store.ConfigKeys(ctx, ledgerKeyPrefix)
	if err != nil {
		return nil, fmt.Errorf("reading the counts of local writes: %w", err)
	}
	out := make(map[string]int64, len(keys))
	for _, k := range keys {
		b, err := store.Config(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", k, err)
		}
		var v ledgerValue
		if err := json.Unmarshal(b, &v); err != nil || v.Bytes < 0 {
			return nil, fmt.Errorf("the count %s is malformed", k)
		}
		out[strings.TrimPrefix(k, ledgerKeyPrefix)] = v.Bytes
	}
	return out, nil
}

// ledgerWait bounds how long a local write's answer waits for its count to be on disk.
const ledgerWait = 10 * time.Second
