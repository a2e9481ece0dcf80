package auth

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	jose "github.com/go-jose/go-jose/v4"
)

// The algorithms a signed client token may use, each pinned to one kind of key: a token is
// verified only with a key of its algorithm's kind, so an HS256 token is never checked with
// an RSA public key's bytes as the secret, and alg "none" matches no key at all.
const (
	AlgHS256 = jose.HS256 // the shared secret (--client-jwt-secret-file), at least MinSecretBytes
	AlgES256 = jose.ES256 // an ECDSA P-256 public key
	AlgEdDSA = jose.EdDSA // an Ed25519 public key
	AlgRS256 = jose.RS256 // an RSA public key of at least MinRSABits
)

// acceptedAlgs lists them for the JWS parser.
var acceptedAlgs = []jose.SignatureAlgorithm{AlgHS256, AlgES256, AlgEdDSA, AlgRS256}

// Bounds of the keys.
const (
	MinSecretBytes = 32   // an HS256 secret: 256 bits, the hash's size
	MinRSABits     = 2048 // an RSA key
	maxKeysBytes   = 1 << 20
)

// verifyKey is one key a signed token may be checked with: its kid, the one algorithm its
// kind allows, and the key itself ([]byte, *ecdsa.PublicKey, ed25519.PublicKey or
// *rsa.PublicKey).
type verifyKey struct {
	kid string
	alg jose.SignatureAlgorithm
	key any
}

// pinnedAlg returns the algorithm a public key's kind allows, or an error for a kind or size
// that is not accepted.
func pinnedAlg(k any) (jose.SignatureAlgorithm, error) {
	switch k := k.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return "", fmt.Errorf("an ECDSA key on %s: only P-256 (ES256) is accepted", k.Curve.Params().Name)
		}
		return AlgES256, nil
	case ed25519.PublicKey:
		return AlgEdDSA, nil
	case *rsa.PublicKey:
		if k.N.BitLen() < MinRSABits {
			return "", fmt.Errorf("an RSA key of %d bits: at least %d are required", k.N.BitLen(), MinRSABits)
		}
		return AlgRS256, nil
	case *ecdsa.PrivateKey, ed25519.PrivateKey, *rsa.PrivateKey:
		return "", errors.New("a private key: give the node the public key only (the application keeps the private key)")
	}
	return "", fmt.Errorf("a key of type %T: want ES256 (ECDSA P-256), EdDSA (Ed25519) or RS256 (RSA) public keys", k)
}

// secretKey is the HS256 key of a shared secret, refused under MinSecretBytes.
func secretKey(secret []byte) (verifyKey, error) {
	secret = bytes.TrimRight(secret, "\r\n")
	if len(secret) < MinSecretBytes {
		return verifyKey{}, fmt.Errorf("the secret has %d bytes: HS256 needs at least %d (openssl rand -base64 48 > FILE makes one)", len(secret), MinSecretBytes)
	}
	return verifyKey{alg: AlgHS256, key: bytes.Clone(secret)}, nil
}

// ParseVerificationKeys reads public keys from data: a JWKS document ({"keys":[…]}) or PEM
// blocks (PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE). A JWKS key's kid is its own; a PEM
// key's kid is a "kid:" header of its block when it has one, else its RFC 7638 thumbprint
// (SHA-256, base64url). A JWKS key whose "alg" differs from the one its kind allows, a
// private key, an RSA key under MinRSABits and an ECDSA key not on P-256 are refused.
func ParseVerificationKeys(data []byte) ([]verifyKey, error) {
	if len(data) > maxKeysBytes {
		return nil, fmt.Errorf("%d bytes of keys: at most %d are read", len(data), maxKeysBytes)
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, errors.New("no keys: the file is empty")
	}
	var keys []verifyKey
	if trimmed[0] == '{' {
		var set struct {
			Keys []json.RawMessage `json:"keys"`
		}
		if err := json.Unmarshal(trimmed, &set); err != nil {
			return nil, fmt.Errorf("not a JWKS document: %v", err)
		}
		for i, raw := range set.Keys {
			var jwk jose.JSONWebKey
			if err := jwk.UnmarshalJSON(raw); err != nil {
				return nil, fmt.Errorf("JWKS key %d: %v", i, err)
			}
			if jwk.Use != "" && jwk.Use != "sig" {
				continue // an encryption key of the same set
			}
			if _, ok := jwk.Key.([]byte); ok {
				return nil, fmt.Errorf("JWKS key %d (%s): a symmetric key does not belong in a key set the node may fetch; give HS256 secrets with --client-jwt-secret-file", i, jwk.KeyID)
			}
			alg, err := pinnedAlg(jwk.Key)
			if err != nil {
				return nil, fmt.Errorf("JWKS key %d (%s): %v", i, jwk.KeyID, err)
			}
			if jwk.Algorithm != "" && jwk.Algorithm != string(alg) {
				return nil, fmt.Errorf("JWKS key %d (%s): its alg is %s but a key of its kind signs %s only", i, jwk.KeyID, jwk.Algorithm, alg)
			}
			kid := jwk.KeyID
			if kid == "" {
				if kid, err = thumbprint(jwk.Key); err != nil {
					return nil, fmt.Errorf("JWKS key %d: %v", i, err)
				}
			}
			keys = append(keys, verifyKey{kid: kid, alg: alg, key: jwk.Key})
		}
	} else {
		rest := trimmed
		for n := 0; ; n++ {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				if len(bytes.TrimSpace(rest)) > 0 && n == 0 {
					return nil, errors.New("neither PEM public keys nor a JWKS document")
				}
				break
			}
			var pub any
			var err error
			switch block.Type {
			case "PUBLIC KEY":
				pub, err = x509.ParsePKIXPublicKey(block.Bytes)
			case "RSA PUBLIC KEY":
				pub, err = x509.ParsePKCS1PublicKey(block.Bytes)
			case "CERTIFICATE":
				var cert *x509.Certificate
				if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
					pub = cert.PublicKey
				}
			default:
				if strings.Contains(block.Type, "PRIVATE KEY") {
					return nil, fmt.Errorf("PEM block %d is a %s: give the node the public key only (openssl pkey -pubout)", n+1, block.Type)
				}
				return nil, fmt.Errorf("PEM block %d is a %s: want PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE", n+1, block.Type)
			}
			if err != nil {
				return nil, fmt.Errorf("PEM block %d (%s): %v", n+1, block.Type, err)
			}
			alg, err := pinnedAlg(pub)
			if err != nil {
				return nil, fmt.Errorf("PEM block %d: %v", n+1, err)
			}
			kid := block.Headers["kid"]
			if kid == "" {
				if kid, err = thumbprint(pub); err != nil {
					return nil, fmt.Errorf("PEM block %d: %v", n+1, err)
				}
			}
			keys = append(keys, verifyKey{kid: kid, alg: alg, key: pub})
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("no signing keys found")
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k.kid] {
			return nil, fmt.Errorf("two keys have the kid %q: a token names its key by kid, so each must be unique", k.kid)
		}
		seen[k.kid] = true
	}
	return keys, nil
}

// thumbprint is a public key's RFC 7638 thumbprint (SHA-256), base64url: the kid of a key
// that has none.
func thumbprint(k any) (string, error) {
	sum, err := (&jose.JSONWebKey{Key: k}).Thumbprint(crypto.SHA256)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(sum), nil
}
