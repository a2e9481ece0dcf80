package auth

import (
	"context"
	"errors"
)

// ClientChain is the ClientAuthenticator of a node's client listener: the checks it is
// configured with, tried in turn. A token with the shape of a signed token (LooksLikeJWT) is
// decided by Signed when there is one; any other token by Static first (the tokens file's
// client tokens), then, when Static does not know it, by Webhook. Each grant is re-checked
// by the check that gave it. Any field may be nil.
type ClientChain struct {
	Static  ClientAuthenticator // the static client tokens (Reloader)
	Signed  *JWTVerifier
	Webhook *Webhook
}

// AuthenticateClient tries the checks in turn; see ClientChain.
func (ch *ClientChain) AuthenticateClient(ctx context.Context, c ClientCredential) (ClientGrant, error) {
	if c.Token == "" {
		return ClientGrant{}, ErrUnauthenticated
	}
	if ch.Signed != nil && LooksLikeJWT(c.Token) {
		return ch.Signed.AuthenticateClient(ctx, c)
	}
	err := error(ErrUnauthenticated)
	if ch.Static != nil {
		var g ClientGrant
		if g, err = ch.Static.AuthenticateClient(ctx, c); err == nil || !errors.Is(err, ErrUnauthenticated) {
			return g, err
		}
		var r *ClientRefusal
		if errors.As(err, &r) {
			return g, err // a known token that expired
		}
	}
	if ch.Webhook != nil {
		return ch.Webhook.AuthenticateClient(ctx, c)
	}
	if err == ErrUnauthenticated {
		return ClientGrant{}, refuse(CheckUnknownToken, "the client token is not known to this node")
	}
	return ClientGrant{}, err
}

// RecheckClient asks the check that gave g.
func (ch *ClientChain) RecheckClient(g ClientGrant) (ClientGrant, error) {
	switch {
	case g.Kind == CredentialJWT && ch.Signed != nil:
		return ch.Signed.RecheckClient(g)
	case g.Kind == CredentialWebhook && ch.Webhook != nil:
		return ch.Webhook.RecheckClient(g)
	case g.Kind == CredentialClientToken && ch.Static != nil:
		return ch.Static.RecheckClient(g)
	}
	return ClientGrant{}, ErrUnauthenticated
}
