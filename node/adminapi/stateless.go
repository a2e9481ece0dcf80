package adminapi

import (
	"fmt"
	"io"
	"net/http"
	"unicode/utf8"
)

// DefaultMaxStatelessBytes bounds the body of POST …/stateless.
const DefaultMaxStatelessBytes = 256 << 10

// Stateless sends an application's stateless message to the editors of a namespace on
// this node (yws.Server.BroadcastStateless) and returns how many it reached.
type Stateless func(namespaceID, payload string) int

// POST /v1/namespaces/{id}/stateless: the body (UTF-8 text, typically JSON) goes to the
// namespace's editors connected to this node as a stateless message — every Hocuspocus
// provider (onStateless) and the y-websocket connections that take them. Nothing is
// stored or replicated: editors on other nodes, or not connected now, never hear it.
// 200 {"delivered": N}; 404 for a namespace this node does not know; 501 without a client
// listener.
func (a *API) postStateless(w http.ResponseWriter, r *http.Request) {
	if a.opts.Stateless == nil {
		writeError(w, &Error{http.StatusNotImplemented, CodeNotFound, "this process serves no editors (--client-listen off)"})
		return
	}
	ns, e := a.lookup(r)
	if e != nil {
		writeError(w, e)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, DefaultMaxStatelessBytes+1))
	switch {
	case err != nil:
		writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, "reading the body: " + err.Error()})
		return
	case len(body) > DefaultMaxStatelessBytes:
		writeError(w, &Error{http.StatusRequestEntityTooLarge, CodeRequestTooLarge,
			fmt.Sprintf("a stateless message is at most %d bytes", DefaultMaxStatelessBytes)})
		return
	case !utf8.Valid(body):
		writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, "a stateless message is text: the body must be UTF-8"})
		return
	}
	n := a.opts.Stateless(ns.id, string(body))
	writeJSON(w, http.StatusOK, struct {
		Delivered int `json:"delivered"`
	}{n})
}
