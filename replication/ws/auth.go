package ws

import (
	"context"
	"errors"

	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// Authenticator is the hub's authentication and authorization adapter (§2, §19). The hub
// calls Authenticate before the WebSocket upgrade; the namespace layer calls
// AuthorizeNamespace at each OPEN_NAMESPACE. Both may be called from many goroutines at
// once.
type Authenticator interface {
	// Authenticate verifies a bearer token and returns the trusted peer instance id. It
	// returns ErrUnauthenticated for a missing or unknown token (HTTP 401), ErrForbidden for
	// a known token that may not connect (HTTP 403), ErrVerifierMissing when it has nothing
	// to verify against (HTTP 503). It must honour ctx (the hub's authTimeoutMs). It must
	// never log the token.
	Authenticate(ctx context.Context, token string) (Identity, error)
	// AuthorizeNamespace decides whether the authenticated peer may replicate ns: denied,
	// or allowed with the hub's local owner and the peer's permissions.
	AuthorizeNamespace(peer string, ns protocol.NamespaceID) (seam.Grant, bool)
}

// Identity is what a successful authentication yields: the trusted peer instance id. The
// HELLO's self-declared id must equal it.
type Identity struct {
	PeerInstanceID string
}

// RevocationSource is implemented by authenticators that report revocations. The hub
// subscribes once at construction and unsubscribes at Shutdown; f is called from the
// revoking goroutine and must not block.
type RevocationSource interface {
	SubscribeRevocations(f func(seam.Revocation)) (unsubscribe func())
}

// Authentication errors. The hub maps them to HTTP statuses and to the reasons of the
// auth-upgrade-rejected event.
var (
	ErrUnauthenticated = errors.New("ws: missing or invalid token")        // 401
	ErrForbidden       = errors.New("ws: token not allowed to replicate")  // 403
	ErrVerifierMissing = errors.New("ws: no token verifier is configured") // 503
)
