// Package accesslog is the access log of the binaries' HTTP listeners: Handler wraps a
// listener's handler and writes one line per request when it ends — the method, the route
// pattern, the status, the duration, the bytes of the answer and the remote address.
// Answers with an error status (4xx, 5xx) are logged at INFO, the others at DEBUG, so a
// normally configured process logs its refusals and --log-level debug shows everything.
//
// It never logs a request's body, query string, headers or path (a route pattern such as
// /v1/namespaces/{id}/doc carries no token and no document content); a request that no
// route matched is logged with the route "-".
package accesslog

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Handler returns next with an access log written to log. listener names the listener in
// each line ("admin", "client").
func Handler(next http.Handler, log *slog.Logger, listener string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{w: w}
		defer func() {
			status := rec.status
			if status == 0 {
				status = http.StatusOK // nothing written: net/http answers 200
			}
			level := slog.LevelDebug
			if status >= 400 {
				level = slog.LevelInfo
			}
			if !log.Enabled(context.Background(), level) {
				return
			}
			route := r.Pattern
			if route == "" {
				route = "-"
			}
			log.LogAttrs(context.Background(), level, "http request",
				slog.String("listener", listener), slog.String("method", r.Method), slog.String("route", route),
				slog.Int("status", status), slog.Float64("durationMs", float64(time.Since(start).Microseconds())/1000),
				slog.Int64("bytes", rec.bytes), slog.String("remote", r.RemoteAddr))
		}()
		next.ServeHTTP(rec, r)
	})
}

// recorder is the ResponseWriter the wrapped handler sees: it notes the status and counts
// the bytes of the body, and passes flushes, write deadlines (through Unwrap, for
// http.ResponseController) and hijacks (WebSocket upgrades) on.
type recorder struct {
	w      http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) Header() http.Header { return r.w.Header() }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 && code >= 200 {
		r.status = code
	}
	r.w.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.w.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Flush passes a flush on (event streams need one after each event).
func (r *recorder) Flush() {
	if f, ok := r.w.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack passes a hijack on; the request is logged with status 101 (a WebSocket upgrade).
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := r.w.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("accesslog: the underlying ResponseWriter cannot hijack")
	}
	c, rw, err := h.Hijack()
	if err == nil && r.status == 0 {
		r.status = http.StatusSwitchingProtocols
	}
	return c, rw, err
}

// Unwrap gives http.ResponseController the underlying writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.w }
