package auth_test

import (
	"path/filepath"
	"testing"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/replication/ws"
)

// The tables answer the listeners' interfaces.
var (
	_ ws.Authenticator         = (*auth.PeerTable)(nil)
	_ ws.RevocationSource      = (*auth.PeerTable)(nil)
	_ auth.ClientAuthenticator = (*auth.ClientTable)(nil)
)

// The Reloader is the authenticator of both listeners: the hub's, offering the table's
// revocations, and the client listener's.
func TestReloaderIsTheListenersAuthenticator(t *testing.T) {
	r, err := auth.NewReloader(auth.ReloaderOptions{Path: filepath.Join(t.TempDir(), auth.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	var hub ws.Authenticator = r
	if _, ok := hub.(ws.RevocationSource); !ok {
		t.Fatal("the authenticator does not offer the table's revocations")
	}
	var _ auth.ClientAuthenticator = r
}
