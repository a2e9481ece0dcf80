package auth_test

import (
	"context"
	"errors"
	"testing"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/replication/protocol"
)

var (
	ns1 = protocol.MustNamespaceID("ns-00000000000000000000000000000001")
	ns2 = protocol.MustNamespaceID("ns-00000000000000000000000000000002")
)

func TestPeerTable(t *testing.T) {
	table := &auth.PeerTable{}
	if _, err := table.Authenticate(context.Background(), "x"); !errors.Is(err, auth.ErrVerifierMissing) {
		t.Fatalf("empty table: %v", err)
	}
	if err := table.Replace([]auth.PeerEntry{{PeerInstanceID: "Bad ID"}}); err == nil {
		t.Fatal("invalid entry accepted")
	}
	h, err := auth.ParseTokenSHA256("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08") // sha256("test")
	if err != nil || h != auth.HashToken("test") {
		t.Fatalf("parse: %v", err)
	}
	if err := table.Replace([]auth.PeerEntry{
		{PeerInstanceID: "peer-a", TokenSHA256: h, Namespaces: []string{ns1.String()}, Read: true},
		{PeerInstanceID: "peer-b", TokenSHA256: auth.HashToken("b"), Namespaces: nil, Read: true},
	}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tok  string
		id   string
		want error
	}{
		{"test", "peer-a", nil}, {"", "", auth.ErrUnauthenticated}, {"nope", "", auth.ErrUnauthenticated}, {"b", "", auth.ErrForbidden},
	} {
		id, err := table.Authenticate(context.Background(), tc.tok)
		if err != tc.want || id.PeerInstanceID != tc.id {
			t.Errorf("%q: %v %v", tc.tok, id, err)
		}
	}
	if _, ok := table.AuthorizeNamespace("peer-a", ns1); !ok {
		t.Error("ns1 not authorized")
	}
	if _, ok := table.AuthorizeNamespace("peer-a", ns2); ok {
		t.Error("ns2 authorized")
	}
}
