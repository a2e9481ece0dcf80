// Package auth decides who may use a node: which peers may replicate with a hub, and which
// editors may open documents on a node's client listener, with what. It is the one home of
// authentication; the transports consult it and know nothing of how a credential is checked.
//
// # What it answers
//
// The replication listener (package ws) asks it two questions about a peer: who presents
// this bearer token (Authenticate: a PeerIdentity, or ErrUnauthenticated, ErrForbidden,
// ErrVerifierMissing), and what may that peer do with one namespace (AuthorizeNamespace: a
// NamespaceGrant). It subscribes to the PeerRevocations a change of the tokens file issues.
// ws declares those methods as its Authenticator and RevocationSource interfaces; PeerTable
// and Reloader implement them.
//
// The client listener (package yws) asks about an editor: what does the credential it
// presented allow (ClientAuthenticator.AuthenticateClient: a ClientGrant), and what does
// the credential of an open connection allow now (RecheckClient, after the tokens changed).
// A ClientAuthenticator is declared here, not in yws, because checks of several kinds
// compose behind it: a node answers from its static client tokens today (ClientTable,
// Reloader), and signed tokens or an application's webhook are further implementations of
// the same interface, tried in turn by one that chains them: ClientChain over the
// static tokens (Reloader), the signed tokens (JWTVerifier: JWT checked with an HS256
// secret or public keys, each key pinned to its algorithm) and the application's webhook
// (Webhook), with a RevocationList they share (revoked users and token ids, kept in the
// node's store). A refusal is a ClientRefusal naming the check that failed; a credential
// that cannot be checked now is an UnavailableError.
//
// # The tokens file
//
// A node's tokens file holds, for each peer, the SHA-256 of one bearer token (never the
// token itself), the peer's instance id, the hub's local owner (storage partition) of its
// namespaces, the namespaces it may replicate ("*" for all) and whether it may read and
// submit updates; for each editor, the SHA-256 of its client token, the name logs show, the
// namespaces it may open and whether it is read-only. A peer has a tokens file of its own
// for its editors. The file is JSON,
//
//	{"peers":[{"instanceId":"peer-a","tokenSha256":"<64 hex>","owner":"default",
//	           "namespaces":["*"],"read":true,"submit":true}],
//	 "clients":[{"name":"alice","tokenSha256":"<64 hex>","namespaces":["*"],"readOnly":false}]}
//
// written atomically (a temporary file, fsync, rename, mode 0600) under an advisory lock, so
// `hub token add|rotate|remove` can run while the hub is serving. Add draws a token, stores
// its hash and returns it once; a peer has one token unless AddAnother gives it a second on
// purpose; Rotate replaces a peer's token in one write. The running node re-reads the file
// (Reloader) and revokes what a change removed or narrowed: a removed token ends its peer's
// connections, a narrowed grant the namespaces it no longer covers, and the client listener
// re-checks its editors.
package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"time"

	"github.com/nomicore/nomicore/replication/protocol"
)

// Errors of a credential check. The listeners answer them before the WebSocket upgrade.
var (
	// ErrUnauthenticated: a missing or unknown token (HTTP 401).
	ErrUnauthenticated = errors.New("auth: missing or invalid token")
	// ErrForbidden: a peer's known token that may not replicate anything (HTTP 403).
	ErrForbidden = errors.New("auth: token not allowed to replicate")
	// ErrVerifierMissing: nothing to check a peer's token against (HTTP 503).
	ErrVerifierMissing = errors.New("auth: no token verifier is configured")
)

// PeerIdentity is what a peer's successful authentication yields: the trusted peer instance
// id. The HELLO's self-declared id must equal it.
type PeerIdentity struct {
	PeerInstanceID string
}

// NamespaceGrant is a peer's authorization for one namespace: the hub's local owner of the
// namespace (never on the wire) and what the peer may do with it.
type NamespaceGrant struct {
	Owner  string
	Read   bool
	Submit bool
}

// PeerRevocation withdraws authorization from a connected peer: for the listed namespaces
// (the namespace layer ends them with NAMESPACE_UNAUTHORIZED), or, when Namespaces is empty,
// for the peer as a whole (its connections drain with GOAWAY REAUTH_REQUIRED).
type PeerRevocation struct {
	PeerInstanceID string
	Namespaces     []protocol.NamespaceID
}

// ClientCredential is what an editor presented to a client listener, with the request it
// came in: the namespace it asks for and where it comes from. A check may weigh them (a
// static token does not).
type ClientCredential struct {
	Token       string // from ?token= or Authorization: Bearer; never logged
	NamespaceID string // the namespace the editor asks to open
	RemoteAddr  string // the connection's remote address
}

// ClientGrant is what an editor's credential allows: the namespaces it may open and whether
// it may change them. It also remembers which credential it was given for, never the
// credential itself, so that RecheckClient can say what that credential allows later.
type ClientGrant struct {
	Name       string   // who, for logs (never the token): a client token's name, a signed token's sub, the webhook's user
	Namespaces []string // namespace ids, or AllNamespaces
	ReadOnly   bool
	// Kind says which check gave the grant: CredentialClientToken, CredentialJWT or
	// CredentialWebhook (empty for a grant made by hand).
	Kind string
	// User is the application's user the credential stands for (a signed token's sub, the
	// webhook's user); empty for a static client token, whose Name says who.
	User string
	// Expires is when the credential stops being valid (zero: never); the client listener
	// closes an open connection then.
	Expires time.Time

	tokenSHA256 [sha256.Size]byte // the static client token the grant was found by
	jti         string            // a signed token's id, when it has one
	issued      time.Time         // when the credential was issued (a signed token) or checked (a webhook's answer)
}

// Kinds of credential, as ClientGrant.Kind names them.
const (
	CredentialClientToken = "client-token" // a static (opaque) client token of the tokens file
	CredentialJWT         = "jwt"          // a signed token (JWT)
	CredentialWebhook     = "webhook"      // a token the application's auth webhook allowed
)

// Allows reports whether the grant covers namespace ns.
func (g ClientGrant) Allows(ns string) bool {
	for _, n := range g.Namespaces {
		if n == AllNamespaces || n == ns {
			return true
		}
	}
	return false
}

// ClientAuthenticator checks editors' credentials for a client listener. Its methods may
// be called from many goroutines at once and must never log a token.
type ClientAuthenticator interface {
	// AuthenticateClient checks a credential before the WebSocket upgrade and returns what
	// it allows, or ErrUnauthenticated for an unknown token. It must honour ctx. Whether the
	// grant covers the namespace asked for is the caller's check (ClientGrant.Allows).
	AuthenticateClient(ctx context.Context, c ClientCredential) (ClientGrant, error)
	// RecheckClient returns what the credential of a grant AuthenticateClient gave earlier
	// allows now (the tokens changed), or ErrUnauthenticated when it no longer authenticates
	// (its token was removed). It answers from what the authenticator holds and does not
	// wait on the network.
	RecheckClient(g ClientGrant) (ClientGrant, error)
}
