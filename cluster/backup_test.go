package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/nomicore/nomicore/backup"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
)

// A backup of a cluster — a namespace whose log was compacted into a snapshot and whose
// epoch was bumped, one with only its first document and a few records, a configuration
// key — taken from one node, loaded into a new cluster from another: every node of the new
// cluster serves both namespaces with their content and identity, takes writes on them, and
// has the configuration; a second load is refused.
func TestCluster_BackupAndRestore(t *testing.T) {
	t.Parallel()
	const every = 20
	a := newTestCluster(t, 3, func(c *Config) { c.CompactAfterRecords = every })
	ns1 := a.nodes[0].create(t)
	ns2 := a.nodes[1].create(t)
	l1 := a.nodes[0].open(t, ns1)
	for i := range 120 {
		if _, err := l1.WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, fmt.Sprintf("k%d", i), float64(i))); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	bumped, err := l1.BumpEpoch(ctxT(t, 20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l1.WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, "after", "the bump")); err != nil {
		t.Fatal(err)
	}
	l2 := a.nodes[1].open(t, ns2)
	for i := range 3 {
		if _, err := l2.WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, fmt.Sprintf("few%d", i), float64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.nodes[0].store.PutConfig(ctxT(t, 5*time.Second), "some/key", []byte("value")); err != nil {
		t.Fatal(err)
	}
	versionState := mapUpdate(t, nil, "saved", "as a version")
	saved, err := a.nodes[1].node.Versions().PutVersion(ctxT(t, 10*time.Second),
		persistence.Version{NamespaceID: ns1, Kind: persistence.VersionManual, Label: "before the backup", CreatedAt: time.Now()}, versionState)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "a snapshot of the first namespace", func() error {
		_, err := a.nodes[0].node.res.snaps.GetInfo(ctxT(t, 5*time.Second), ns1)
		return err
	})
	want1, want2 := notes(t, l1), notes(t, l2)

	var buf bytes.Buffer
	bw, err := backup.NewWriter(&buf, backup.Header{Kind: backup.KindHubCluster, CreatedAt: time.Now(), InstanceID: "hub", Node: "n3"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.nodes[2].node.Backup(ctxT(t, 30*time.Second), bw); err != nil {
		t.Fatal(err)
	}
	if err := bw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := backup.Verify(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}

	b := newTestCluster(t, 3, nil)
	r, err := backup.NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := b.nodes[1].node.Restore(ctxT(t, 60*time.Second), r, slog.New(slog.DiscardHandler))
	if err != nil || loaded != 2 {
		t.Fatalf("Restore = %d, %v", loaded, err)
	}
	for _, tn := range b.nodes {
		m1 := tn.open(t, ns1)
		if got := notes(t, m1); !reflect.DeepEqual(got, want1) {
			t.Fatalf("%s: the compacted namespace: %d keys, want %d", tn.name, len(got), len(want1))
		}
		if id := m1.Identity(); id != bumped {
			t.Fatalf("%s: identity %v, want %v", tn.name, id, bumped)
		}
		if got := notes(t, tn.open(t, ns2)); !reflect.DeepEqual(got, want2) {
			t.Fatalf("%s: the small namespace: %v, want %v", tn.name, got, want2)
		}
		if v, err := tn.store.Config(ctxT(t, 5*time.Second), "some/key"); err != nil || string(v) != "value" {
			t.Fatalf("%s: config: %q %v", tn.name, v, err)
		}
		v, state, err := tn.node.Versions().VersionState(ctxT(t, 5*time.Second), ns1, saved.ID)
		if err != nil || v.Label != "before the backup" || !bytes.Equal(state, versionState) {
			t.Fatalf("%s: the saved version: %+v, %d bytes (want %d), %v", tn.name, v, len(state), len(versionState), err)
		}
	}
	m := b.nodes[2].open(t, ns1)
	if _, err := m.WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, "in the new", "cluster")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the new write on another node", func() error {
		if n := notes(t, b.nodes[0].open(t, ns1)); n["in the new"] != "cluster" {
			return fmt.Errorf("not there")
		}
		return nil
	})
	r, _ = backup.NewReader(bytes.NewReader(buf.Bytes()))
	if _, err := b.nodes[0].node.Restore(ctxT(t, 30*time.Second), r, slog.New(slog.DiscardHandler)); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("a second restore: %v", err)
	}
}

// A backup of a cluster in which a namespace was deleted: the tombstone goes with it, so in
// the new cluster the namespace is deleted too (its id not served again), and the backup of
// the other namespace loads as usual.
func TestCluster_BackupKeepsADeletedNamespaceDeleted(t *testing.T) {
	t.Parallel()
	a := newTestCluster(t, 3, nil)
	kept, gone := a.nodes[0].create(t), a.nodes[1].create(t)
	for _, ns := range []string{kept, gone} {
		l := a.nodes[0].open(t, ns)
		if _, err := l.WriteLocal(ctxT(t, 10*time.Second), mapUpdate(t, nil, "k", ns)); err != nil {
			t.Fatal(err)
		}
		l.Release()
	}
	if err := a.nodes[1].reg.Delete(ctxT(t, 30*time.Second), "default", gone, 1); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	bw, err := backup.NewWriter(&buf, backup.Header{Kind: backup.KindHubCluster, CreatedAt: time.Now(), InstanceID: "hub", Node: "n3"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.nodes[2].node.Backup(ctxT(t, 30*time.Second), bw); err != nil {
		t.Fatal(err)
	}
	if err := bw.Close(); err != nil {
		t.Fatal(err)
	}
	b := newTestCluster(t, 3, nil)
	r, err := backup.NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.nodes[1].node.Restore(ctxT(t, 60*time.Second), r, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	for _, tn := range b.nodes {
		if got := notes(t, tn.open(t, kept)); got["k"] != kept {
			t.Fatalf("%s: the kept namespace: %v", tn.name, got)
		}
		if l, err := tn.reg.Open(ctxT(t, 20*time.Second), "default", gone); !errors.Is(err, registry.ErrDeleted) {
			if err == nil {
				l.Release()
			}
			t.Fatalf("%s: opening the deleted namespace: %v, want it deleted", tn.name, err)
		}
	}
}
