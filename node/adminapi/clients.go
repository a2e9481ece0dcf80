package adminapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/nomicore/nomicore/auth"
)

// Clients manages editors' credentials through the API: the static client tokens of the
// node's tokens file, and the revocation list of signed tokens and webhook answers.
type Clients interface {
	// AddClient draws a client token for g (name, namespaces, read-only, expiry), stores
	// its hash and returns the token, once. *auth.ExistingClientError: the name has a token.
	AddClient(ctx context.Context, g auth.ClientGrant) (string, auth.ClientEntry, error)
	// ListClients lists the client tokens (never a token; its hash's short form).
	ListClients(ctx context.Context) ([]auth.ClientEntry, error)
	// UpdateClient changes a client token's namespaces and read-only flag, keeping the
	// token; auth.ErrNoToken when the name has none.
	UpdateClient(ctx context.Context, name string, namespaces []string, readOnly *bool) (auth.ClientEntry, error)
	// RemoveClient deletes the client tokens of name (its editors are closed) and says how
	// many there were.
	RemoveClient(ctx context.Context, name string) (int, error)
	// Revoke revokes a user (sub) or a signed token's id (jti) and closes their editors.
	Revoke(ctx context.Context, sub, jti string) (auth.Revocation, error)
	// Revocations lists the revocations in force.
	Revocations() []auth.Revocation
}

// ClientJSON is a client token as the API shows it.
type ClientJSON struct {
	Name         string     `json:"name"`
	TokenSHA256  string     `json:"tokenSha256Prefix"`
	Namespaces   []string   `json:"namespaces"`
	ReadOnly     bool       `json:"readOnly"`
	ExpiresAt    *time.Time `json:"expiresAt,omitempty"`
	Expired      bool       `json:"expired,omitempty"`
	Token        string     `json:"token,omitempty"` // only in the answer that created it
	ConnectsWith string     `json:"connectsWith,omitempty"`
}

func (a *API) clientJSON(e auth.ClientEntry) ClientJSON {
	c := ClientJSON{Name: e.Name, TokenSHA256: auth.HashPrefix(e.TokenSHA256), Namespaces: e.Namespaces, ReadOnly: e.ReadOnly}
	if !e.ExpiresAt.IsZero() {
		c.ExpiresAt = timePtr(e.ExpiresAt)
		c.Expired = !a.opts.Clock.Now().Before(e.ExpiresAt)
	}
	return c
}

// Longest expiry POST /v1/clients takes (a token for a year is a static credential: give
// none).
const maxClientExpiry = 366 * 24 * time.Hour

// POST /v1/clients {"name","namespaces":[…],"readOnly","expiresIn":"24h"}: a client token,
// returned once (201). The name must be free (409 CLIENT_EXISTS) unless its token expired.
func (a *API) addClient(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name       string   `json:"name"`
		Namespaces []string `json:"namespaces"`
		ReadOnly   bool     `json:"readOnly"`
		ExpiresIn  string   `json:"expiresIn"`
	}
	if e := readJSON(r, &body); e != nil {
		writeError(w, e)
		return
	}
	if body.Name == "" {
		writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, `the body names the client: {"name":"alice","namespaces":["ns-…"],"expiresIn":"24h"}`})
		return
	}
	if len(body.Namespaces) == 0 {
		body.Namespaces = []string{auth.AllNamespaces}
	}
	g := auth.ClientGrant{Name: body.Name, Namespaces: body.Namespaces, ReadOnly: body.ReadOnly}
	if body.ExpiresIn != "" {
		d, err := time.ParseDuration(body.ExpiresIn)
		if err != nil || d <= 0 || d > maxClientExpiry {
			writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, `expiresIn must be a positive duration of at most 8784h, like "24h" or "90m"`})
			return
		}
		g.Expires = a.opts.Clock.Now().Add(d)
	}
	tok, entry, err := a.opts.Clients.AddClient(r.Context(), g)
	var exists *auth.ExistingClientError
	switch {
	case errors.As(err, &exists):
		writeError(w, &Error{http.StatusConflict, CodeClientExists, err.Error() + ": a name has one token; DELETE /v1/clients/" + body.Name + " first, or pick another name"})
		return
	case err != nil:
		writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, err.Error()})
		return
	}
	a.audit(r, "client-token-added", slog.String("client", entry.Name), slog.Any("namespaces", entry.Namespaces),
		slog.Bool("readOnly", entry.ReadOnly), slog.String("sha256", auth.HashPrefix(entry.TokenSHA256)))
	c := a.clientJSON(entry)
	c.Token = tok
	if u := a.opts.Listeners["client"]; u != "" {
		c.ConnectsWith = "ws://" + u + "/v1/yjs/{namespaceId}?token=TOKEN"
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, c)
}

// GET /v1/clients: the client tokens (their hashes' short form, never a token).
func (a *API) listClients(w http.ResponseWriter, r *http.Request) {
	entries, err := a.opts.Clients.ListClients(r.Context())
	if err != nil {
		writeError(w, &Error{http.StatusInternalServerError, CodeInternal, err.Error()})
		return
	}
	out := make([]ClientJSON, 0, len(entries))
	for _, e := range entries {
		out = append(out, a.clientJSON(e))
	}
	writeJSON(w, http.StatusOK, map[string]any{"clients": out})
}

// PATCH /v1/clients/{name} {"namespaces":[…],"readOnly":bool}: another grant for the same
// token (a namespace more keeps the editor's token; a narrowed grant closes what it no
// longer covers).
func (a *API) updateClient(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Namespaces []string `json:"namespaces"`
		ReadOnly   *bool    `json:"readOnly"`
	}
	if e := readJSON(r, &body); e != nil {
		writeError(w, e)
		return
	}
	if body.Namespaces == nil && body.ReadOnly == nil {
		writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, `give what changes: {"namespaces":["ns-…"]} and/or {"readOnly":true}`})
		return
	}
	name := r.PathValue("name")
	entry, err := a.opts.Clients.UpdateClient(r.Context(), name, body.Namespaces, body.ReadOnly)
	switch {
	case errors.Is(err, auth.ErrNoToken):
		writeError(w, &Error{http.StatusNotFound, CodeNotFound, "no client token is named " + name})
		return
	case err != nil:
		writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, err.Error()})
		return
	}
	a.audit(r, "client-token-changed", slog.String("client", name), slog.Any("namespaces", entry.Namespaces), slog.Bool("readOnly", entry.ReadOnly))
	writeJSON(w, http.StatusOK, a.clientJSON(entry))
}

// DELETE /v1/clients/{name}: the name's client tokens are removed and its editors closed.
func (a *API) removeClient(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	n, err := a.opts.Clients.RemoveClient(r.Context(), name)
	if err != nil {
		writeError(w, &Error{http.StatusInternalServerError, CodeInternal, err.Error()})
		return
	}
	if n == 0 {
		writeError(w, &Error{http.StatusNotFound, CodeNotFound, "no client token is named " + name})
		return
	}
	a.audit(r, "client-token-removed", slog.String("client", name), slog.Int("tokens", n))
	writeJSON(w, http.StatusOK, map[string]any{"removed": n})
}

// POST /v1/clients/revoke {"sub":"…"} or {"jti":"…"}: the user's credentials issued before
// now (or that signed token) are refused from now on and their editors closed.
func (a *API) revokeClient(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Sub string `json:"sub"`
		JTI string `json:"jti"`
	}
	if e := readJSON(r, &body); e != nil {
		writeError(w, e)
		return
	}
	rv, err := a.opts.Clients.Revoke(r.Context(), body.Sub, body.JTI)
	switch {
	case errors.Is(err, auth.ErrTooManyRevocations):
		writeError(w, &Error{http.StatusServiceUnavailable, CodeUnavailable, err.Error()})
		return
	case errors.Is(err, auth.ErrInvalidRevocation):
		writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, strings.TrimPrefix(err.Error(), auth.ErrInvalidRevocation.Error()+": ") +
			`: {"sub":"alice"} or {"jti":"…"}`})
		return
	case err != nil:
		writeError(w, a.fromErr(err))
		return
	}
	attrs := []slog.Attr{slog.Time("until", rv.Until)}
	if rv.Sub != "" {
		attrs = append(attrs, slog.String("user", rv.Sub))
	} else {
		attrs = append(attrs, slog.String("jti", rv.JTI))
	}
	a.audit(r, "client-revoked", attrs...)
	writeJSON(w, http.StatusOK, rv)
}

// withClients serves a /v1/clients route on a node whose editors present credentials, and
// answers 404 on one that has none.
func (a *API) withClients(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a.opts.Clients == nil {
			writeError(w, &Error{http.StatusNotFound, CodeNotFound, "this node checks no editor credentials (--client-listen off, or --client-auth none)"})
			return
		}
		h(w, r)
	}
}

// GET /v1/clients/revocations: the revocations in force, oldest first.
func (a *API) listRevocations(w http.ResponseWriter, r *http.Request) {
	list := a.opts.Clients.Revocations()
	if list == nil {
		list = []auth.Revocation{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"revocations": list})
}

// EditorJSON is one editor connected to a namespace: its credential's name (a client
// token's name, a signed token's sub, the webhook's user), the user when the credential
// names one, the kind of credential, whether it may write, since when and until when.
type EditorJSON struct {
	Name           string     `json:"name"`
	User           string     `json:"user,omitempty"`
	Credential     string     `json:"credential,omitempty"`
	ReadOnly       bool       `json:"readOnly"`
	Remote         string     `json:"remote,omitempty"`
	ConnectedSince *time.Time `json:"connectedSince,omitempty"`
	ExpiresAt      *time.Time `json:"expiresAt,omitempty"`
}
