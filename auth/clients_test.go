package auth

import (
	"context"
	"path/filepath"
	"testing"
)

// The static client table: a token's grant, ErrUnauthenticated for an unknown or empty
// token; RecheckClient follows the table (the grant after Replace, ErrUnauthenticated once
// the token is gone) and knows no credential for a grant made by hand.
func TestClientTable(t *testing.T) {
	ctx := context.Background()
	var empty ClientTable
	if _, err := empty.AuthenticateClient(ctx, ClientCredential{Token: "a"}); err != ErrUnauthenticated {
		t.Fatalf("the zero table: %v", err)
	}
	table := NewClientTable([]ClientEntry{
		{Name: "alice", TokenSHA256: HashToken("a"), Namespaces: []string{AllNamespaces}},
		{Name: "bob", TokenSHA256: HashToken("b"), Namespaces: []string{nsA}, ReadOnly: true},
	})
	if table.Len() != 2 {
		t.Fatalf("Len %d", table.Len())
	}
	alice, err := table.AuthenticateClient(ctx, ClientCredential{Token: "a", NamespaceID: nsB})
	if err != nil || alice.Name != "alice" || alice.ReadOnly || !alice.Allows(nsA) || !alice.Allows(nsB) {
		t.Fatalf("alice: %+v %v", alice, err)
	}
	bob, err := table.AuthenticateClient(ctx, ClientCredential{Token: "b"})
	if err != nil || bob.Name != "bob" || !bob.ReadOnly || !bob.Allows(nsA) || bob.Allows(nsB) {
		t.Fatalf("bob: %+v %v", bob, err)
	}
	for _, tok := range []string{"", "c", "ab"} {
		if _, err := table.AuthenticateClient(ctx, ClientCredential{Token: tok}); err != ErrUnauthenticated {
			t.Errorf("token %q: %v", tok, err)
		}
	}
	table.Replace([]ClientEntry{{Name: "alice", TokenSHA256: HashToken("a"), Namespaces: []string{nsA}, ReadOnly: true}})
	now, err := table.RecheckClient(alice)
	if err != nil || now.Name != "alice" || !now.ReadOnly || !now.Allows(nsA) || now.Allows(nsB) {
		t.Fatalf("alice narrowed: %+v %v", now, err)
	}
	if _, err := table.RecheckClient(bob); err != ErrUnauthenticated {
		t.Fatalf("bob removed: %v", err)
	}
	if _, err := table.RecheckClient(ClientGrant{Name: "alice", Namespaces: []string{AllNamespaces}}); err != ErrUnauthenticated {
		t.Fatalf("a grant made by hand: %v", err)
	}
}

// The Reloader's RecheckClient answers from the file as last reloaded: a client token
// removed from the file stops authenticating an open connection once the reload ran (the
// client listener re-checks its editors from OnChange).
func TestReloaderRecheckClient(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	tok, err := AddClient(path, ClientGrant{Name: "alice", Namespaces: []string{AllNamespaces}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var rechecked []error
	var r *Reloader
	var g ClientGrant
	r, err = NewReloader(ReloaderOptions{Path: path, OnChange: func() {
		_, err := r.RecheckClient(g)
		rechecked = append(rechecked, err)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if g, err = r.AuthenticateClient(context.Background(), ClientCredential{Token: tok}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.RecheckClient(g); err != nil {
		t.Fatalf("recheck of a token in the file: %v", err)
	}
	if _, err := RemoveClient(path, "alice", ""); err != nil {
		t.Fatal(err)
	}
	if changed, err := r.Reload(context.Background()); !changed || err != nil {
		t.Fatalf("reload: %v %v", changed, err)
	}
	if len(rechecked) != 1 || rechecked[0] != ErrUnauthenticated {
		t.Fatalf("rechecks from OnChange: %v", rechecked)
	}
}
