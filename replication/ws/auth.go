package ws

import (
	"context"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/replication/protocol"
)

// Authenticator is what the hub asks of authentication
// (docs/protocol.md#transport-and-authentication, docs/protocol.md#authorization); package
// auth implements it (auth.PeerTable, auth.Reloader). The hub calls Authenticate before the
// WebSocket upgrade; the namespace layer calls AuthorizeNamespace at each OPEN_NAMESPACE.
// Both may be called from many goroutines at once.
type Authenticator interface {
	// Authenticate verifies a bearer token and returns the trusted peer instance id. It
	// returns auth.ErrUnauthenticated for a missing or unknown token (HTTP 401),
	// auth.ErrForbidden for a known token that may not connect (HTTP 403),
	// auth.ErrVerifierMissing when it has nothing to verify against (HTTP 503). It must
	// honour ctx (the hub's authTimeoutMs). It must never log the token.
	Authenticate(ctx context.Context, token string) (auth.PeerIdentity, error)
	// AuthorizeNamespace decides whether the authenticated peer may replicate ns: denied,
	// or allowed with the hub's local owner and the peer's permissions.
	AuthorizeNamespace(peer string, ns protocol.NamespaceID) (auth.NamespaceGrant, bool)
}

// RevocationSource is implemented by authenticators that report revocations. The hub
// subscribes once at construction and unsubscribes at Shutdown; f is called from the
// revoking goroutine and must not block.
type RevocationSource interface {
	SubscribeRevocations(f func(auth.PeerRevocation)) (unsubscribe func())
}
