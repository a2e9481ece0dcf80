package auth

import (
	"fmt"
	"time"
)

// Checks an editor's credential can fail, as a ClientRefusal names them (and the client
// listener's JSON body and refusal metrics repeat them).
const (
	CheckUnknownToken = "unknown-token" // no check knows the token (a static token not in the file)
	CheckMalformed    = "malformed"     // not a signed token that can be decoded
	CheckAlgorithm    = "algorithm"     // an algorithm that is not accepted, or not the key's
	CheckUnknownKey   = "unknown-key"   // no key of the node has the token's kid
	CheckSignature    = "bad-signature" // the signature does not verify
	CheckExpired      = "expired"       // past exp (or a static token's expiry)
	CheckNotYetValid  = "not-yet-valid" // before nbf or iat (beyond the skew)
	CheckIssuer       = "issuer"        // iss is not --client-jwt-issuer
	CheckAudience     = "audience"      // aud does not name --client-jwt-audience
	CheckClaims       = "claims"        // a required claim missing or malformed, or a lifetime over the bound
	CheckRevoked      = "revoked"       // its user or its jti was revoked
	CheckDenied       = "denied"        // the application's webhook refused it
)

// ClientRefusal is a classified refusal of an editor's credential: which check failed, and
// why in the user's words. It never carries the token. It matches ErrUnauthenticated
// (errors.Is), except a webhook's refusal (CheckDenied), which matches ErrForbidden: the
// application knows the token and refuses it.
type ClientRefusal struct {
	Check  string // one of the Check constants
	Reason string
}

func (e *ClientRefusal) Error() string { return "auth: " + e.Reason }

// Unwrap lets errors.Is match ErrUnauthenticated (or ErrForbidden for a webhook's denial).
func (e *ClientRefusal) Unwrap() error {
	if e.Check == CheckDenied {
		return ErrForbidden
	}
	return ErrUnauthenticated
}

func refuse(check, format string, args ...any) *ClientRefusal {
	return &ClientRefusal{Check: check, Reason: fmt.Sprintf(format, args...)}
}

// UnavailableError says a credential cannot be checked now (the webhook did not answer, the
// signing keys could not be fetched): the client listener answers 503 with Retry-After, and
// the editor retries. Nothing is allowed meanwhile (fail closed).
type UnavailableError struct {
	What       string        // what could not be reached, in the user's words
	RetryAfter time.Duration // when to try again
	Err        error         // the cause, for the node's log (never the token)
}

func (e *UnavailableError) Error() string {
	if e.Err == nil {
		return "auth: " + e.What
	}
	return "auth: " + e.What + ": " + e.Err.Error()
}

func (e *UnavailableError) Unwrap() error { return e.Err }
