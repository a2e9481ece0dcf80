package ws_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/nomicore/nomicore/replication/ws"
)

func TestTokenSources(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("  tok-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, err := ws.TokenFromFile(path)(); err != nil || tok != "tok-file" {
		t.Fatalf("file: %q %v", tok, err)
	}
	if _, err := ws.TokenFromFile(filepath.Join(t.TempDir(), "missing"))(); err == nil {
		t.Fatal("missing file accepted")
	}
	t.Setenv("NOMICORE_TEST_TOKEN", "tok-env")
	if tok, err := ws.TokenFromEnv("NOMICORE_TEST_TOKEN")(); err != nil || tok != "tok-env" {
		t.Fatalf("env: %q %v", tok, err)
	}
	t.Setenv("NOMICORE_TEST_TOKEN", "")
	if _, err := ws.TokenFromEnv("NOMICORE_TEST_TOKEN")(); err == nil {
		t.Fatal("empty env accepted")
	}
}

func TestTokenTable(t *testing.T) {
	table := &ws.TokenTable{}
	if _, err := table.Authenticate(context.Background(), "x"); !errors.Is(err, ws.ErrVerifierMissing) {
		t.Fatalf("empty table: %v", err)
	}
	if err := table.Replace([]ws.TokenEntry{{PeerInstanceID: "Bad ID"}}); err == nil {
		t.Fatal("invalid entry accepted")
	}
	h, err := ws.ParseTokenSHA256("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08") // sha256("test")
	if err != nil || h != ws.HashToken("test") {
		t.Fatalf("parse: %v", err)
	}
	if err := table.Replace([]ws.TokenEntry{
		{PeerInstanceID: "peer-a", TokenSHA256: h, Namespaces: []string{ns1.String()}, Read: true},
		{PeerInstanceID: "peer-b", TokenSHA256: ws.HashToken("b"), Namespaces: nil, Read: true},
	}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tok  string
		id   string
		want error
	}{
		{"test", "peer-a", nil}, {"", "", ws.ErrUnauthenticated}, {"nope", "", ws.ErrUnauthenticated}, {"b", "", ws.ErrForbidden},
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
