package ws_test

import (
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
