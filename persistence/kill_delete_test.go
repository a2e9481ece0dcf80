package persistence_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/persistence/persistencetest"
)

// killDeleteChildEnv switches TestMain to the child of TestKillNineAfterDeleteKeepsDeleted (the data
// dir).
const killDeleteChildEnv = "NOMICORE_PERSISTENCE_KILL_DELETE_CHILD"

// killDeleteChild creates a namespace in a store with a change feed, writes to it, gives
// it a version, deletes it, says "deleted" once Delete returned, and then waits to be
// killed: nothing of the process runs after the delete's commit but the wait.
func killDeleteChild(dir string) int {
	st, err := persistence.OpenDataDir(dir, persistence.Options{
		LockTimeout: 10 * time.Second,
		ChangeFeed:  &persistence.ChangeFeedOptions{},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
	}
	ctx := context.Background()
	id := nsID(1)
	fail := func(what string, err error) int {
		fmt.Fprintln(os.Stderr, what+":", err)
		return 1
	}
	if err := st.CreateEntry(ctx, persistence.Entry{NamespaceID: id, Owner: owner}, nil); err != nil {
		return fail("create", err)
	}
	seq, err := st.AppendNoted(owner, id, persistencetest.Update(id, 1), []byte("sv-1"))
	if err != nil {
		return fail("append", err)
	}
	if err := st.WaitFlushed(ctx, owner, id, seq); err != nil {
		return fail("wait flushed", err)
	}
	if _, err := st.PutVersion(ctx, persistence.Version{NamespaceID: id, Kind: persistence.VersionManual, Label: "before", CreatedAt: time.Now()}, []byte("state")); err != nil {
		return fail("version", err)
	}
	if err := st.DeleteEntry(ctx, owner, id); err != nil {
		return fail("delete", err)
	}
	persistencetest.Say("deleted")
	time.Sleep(time.Minute)
	return 1
}

// TestKillNineAfterDeleteKeepsDeleted: a process killed with SIGKILL right after a
// namespace's delete committed — before anything else could record it — leaves a store
// whose change feed ends with the namespace's "deleted" change, and no versions of it.
func TestKillNineAfterDeleteKeepsDeleted(t *testing.T) {
	dir := t.TempDir()
	child := persistencetest.StartChild(t, killDeleteChildEnv+"="+dir)
	timeout := time.After(30 * time.Second)
wait:
	for {
		select {
		case line, ok := <-child.Lines:
			if !ok {
				break wait
			}
			if line == "deleted" {
				child.Kill()
			}
		case <-timeout:
			t.Fatal("the child did not delete the namespace in time")
		}
	}
	child.WaitKilled(t)

	st, err := persistence.OpenDataDir(dir, persistence.Options{ChangeFeed: &persistence.ChangeFeedOptions{}})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer checkFile(t, filepath.Join(dir, persistence.FileName))
	defer closeStore(t, st)
	ctx := context.Background()
	id := nsID(1)
	changes, _, err := st.Changes(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []persistence.ChangeKind
	for _, c := range changes {
		if c.NamespaceID != id || c.Owner != owner {
			t.Fatalf("a change of another namespace: %+v", c)
		}
		kinds = append(kinds, c.Kind)
	}
	want := []persistence.ChangeKind{persistence.ChangeCreated, persistence.ChangeUpdated, persistence.ChangeDeleted}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("the feed after the kill holds %v, want %v", kinds, want)
	}
	if last := changes[len(changes)-1]; last.StateVector != nil {
		t.Fatalf("the deleted change has a state vector: %+v", last)
	}
	var latest []persistence.Change
	if _, err := st.LatestChanges(ctx, func(c persistence.Change) error { latest = append(latest, c); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(latest) != 1 || latest[0].Kind != persistence.ChangeDeleted || latest[0].Cursor != changes[len(changes)-1].Cursor {
		t.Fatalf("the newest change of each namespace: %+v, want the deletion", latest)
	}
	if ent, err := st.Entry(ctx, id); err != nil || ent.State != persistence.StateDeleted {
		t.Fatalf("the entry after the kill: %+v, %v; want a tombstone", ent, err)
	}
	if list, err := st.Versions(ctx, id); err != nil || len(list) != 0 {
		t.Fatalf("the versions of the deleted namespace after the kill: %+v, %v; want none", list, err)
	}
	if _, err := st.Load(ctx, owner, id); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("Load of the deleted namespace: %v, want ErrNotFound", err)
	}
}
