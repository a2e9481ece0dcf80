package node

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/namespace"
)

// targetKeyPrefix is where a peer remembers its replication targets in the store's
// configuration map (the host configuration restores the targets after a restart:
// docs/protocol.md#restart-and-shutdown): one key per target,
// peer/targets/<namespaceId>, value {"owner": …}.
const targetKeyPrefix = "peer/targets/"

// LoadTargets reads the targets a peer remembered.
func LoadTargets(ctx context.Context, store persistence.Catalog) ([]namespace.Target, error) {
	keys, err := store.ConfigKeys(ctx, targetKeyPrefix)
	if err != nil {
		return nil, fmt.Errorf("reading the remembered targets: %w", err)
	}
	out := make([]namespace.Target, 0, len(keys))
	for _, k := range keys {
		v, err := store.Config(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("reading target %s: %w", k, err)
		}
		var rec struct {
			Owner string `json:"owner"`
		}
		if err := json.Unmarshal(v, &rec); err != nil || rec.Owner == "" {
			return nil, fmt.Errorf("target record %s is malformed", k)
		}
		out = append(out, namespace.Target{NamespaceID: strings.TrimPrefix(k, targetKeyPrefix), Owner: rec.Owner})
	}
	return out, nil
}

// RememberTarget stores a target so that the next start restores it.
func RememberTarget(ctx context.Context, store persistence.Catalog, t namespace.Target) error {
	v, _ := json.Marshal(struct {
		Owner string `json:"owner"`
	}{t.Owner})
	return store.PutConfig(ctx, targetKeyPrefix+t.NamespaceID, v)
}

// ParseTarget reads a --target value: ns-<32 hex>, optionally followed by :OWNER (the local
// owner of the replica; defaultOwner otherwise).
func ParseTarget(v, defaultOwner string) (namespace.Target, error) {
	id, owner, _ := strings.Cut(v, ":")
	if owner == "" {
		owner = defaultOwner
	}
	if !registry.ValidNamespaceID(id) {
		return namespace.Target{}, fmt.Errorf("--target %q: want ns- and 32 lowercase hex digits, optionally :OWNER", v)
	}
	return namespace.Target{NamespaceID: id, Owner: owner}, nil
}

// ForgetTarget removes a target from the store's configuration (best effort: a target left
// behind is refused again by the hub at the next start, and forgotten then).
func ForgetTarget(ctx context.Context, store persistence.Catalog, namespaceID string) {
	_ = store.DeleteConfig(ctx, targetKeyPrefix+namespaceID)
}

// PersistentTargets is the peer's target list for the admin API: the namespace layer's
// TargetController, with every change remembered in the store first, so a restart resumes
// the same targets from their stored replicas (reconcile, not re-bootstrap).
type PersistentTargets struct {
	TC    *namespace.TargetController
	Store persistence.Catalog
	// Unload, when set, is called before a target's replica is dropped or reset: the
	// editors of the namespace are closed, so that nothing else holds it loaded.
	Unload func(namespaceID string)
	mu     sync.Mutex // serialises changes
}

// Targets lists the targets.
func (p *PersistentTargets) Targets() []namespace.TargetStatus { return p.TC.Targets() }

// Target returns one target.
func (p *PersistentTargets) Target(id string) (namespace.TargetStatus, bool) { return p.TC.Target(id) }

// AddTarget remembers and adds t; it reports whether it was new. A target the controller
// refuses is forgotten again; if the store fails to forget it, the error says so too (the
// next start would find it remembered).
func (p *PersistentTargets) AddTarget(ctx context.Context, t namespace.Target) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur, ok := p.TC.Target(t.NamespaceID); ok {
		if cur.Owner != t.Owner {
			return false, namespace.ErrTargetConflict
		}
		return false, nil
	}
	// A namespace the hub deleted stays deleted: its tombstone refuses it as a target.
	if e, err := p.Store.Entry(ctx, t.NamespaceID); err == nil && e.State == persistence.StateDeleted {
		return false, registry.ErrDeleted
	}
	if err := RememberTarget(ctx, p.Store, t); err != nil {
		return false, err
	}
	if err := p.TC.AddTarget(t); err != nil {
		if derr := p.Store.DeleteConfig(ctx, targetKeyPrefix+t.NamespaceID); derr != nil {
			return false, fmt.Errorf("%w; forgetting the refused target in the store failed too, so the next start finds it remembered: %w", err, derr)
		}
		return false, err
	}
	return true, nil
}

// RemoveTarget forgets the target first (a crash does not bring it back), then closes it.
func (p *PersistentTargets) RemoveTarget(ctx context.Context, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.TC.Target(id); !ok {
		return namespace.ErrUnknownTarget
	}
	if err := p.Store.DeleteConfig(ctx, targetKeyPrefix+id); err != nil {
		return err
	}
	if p.Unload != nil {
		p.Unload(id)
	}
	return p.TC.RemoveTarget(ctx, id)
}

// Reset archives the target's replica and bootstraps it again; the target stays.
func (p *PersistentTargets) Reset(ctx context.Context, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Unload != nil {
		p.Unload(id)
	}
	return p.TC.Reset(ctx, id)
}
