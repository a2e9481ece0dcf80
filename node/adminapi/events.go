package adminapi

import (
	"encoding/base64"
	"net/http"
	"time"

	"github.com/nomicore/nomicore/clock"
)

// GET /v1/namespaces/{id}/events: Server-Sent Events, one event per applied update (its
// bytes in base64 on one `data:` line), in the namespace's sequencer order. With ?state=1
// the stream starts with `event: state` carrying the whole document (updates already in it
// may be repeated after it; Yjs applies them idempotently).
//
// Bounded per client: the stream's queue holds EventsMaxQueuedBytes / EventsMaxQueuedCount;
// past them, and whenever a write to the client stalls beyond EventsWriteTimeout, the stream
// ends — with `event: overflow` when the queue overflowed — and the client reconnects and
// catches up from the state. The stream also ends with `event: closed` when the namespace
// unloads (shutdown), breaks, or is reset.
func (a *API) events(w http.ResponseWriter, r *http.Request) {
	select {
	case a.streams <- struct{}{}:
		defer func() { <-a.streams }()
	default:
		writeError(w, &Error{http.StatusServiceUnavailable, CodeTooManyStreams, "too many event streams; retry later"})
		return
	}
	st := a.addStream(r.PathValue("id"))
	defer a.removeStream(r.PathValue("id"), st) // after the lease is released
	_, l, ok := a.lookupOpen(w, r)
	if !ok {
		return
	}
	defer a.release(l)
	watch, err := l.Watch(a.opts.EventsMaxQueuedBytes, a.opts.EventsMaxQueuedCount)
	if err != nil {
		writeError(w, a.fromErr(err))
		return
	}
	defer watch.Close()
	var state []byte
	if r.URL.Query().Get("state") == "1" {
		// After Watch: every update is in the state, in the stream, or both.
		if state, err = l.EncodeState(r.Context(), nil); err != nil {
			writeError(w, a.fromErr(err))
			return
		}
	}

	rc := startEventStream(w)
	var buf []byte
	send := func(event string, data []byte) bool {
		buf = buf[:0]
		if event != "" {
			buf = append(buf, "event: "+event+"\n"...)
		}
		buf = append(buf, "data: "...)
		buf = base64.StdEncoding.AppendEncode(buf, data)
		buf = append(buf, "\n\n"...)
		return a.write(w, rc, buf)
	}
	if !a.write(w, rc, []byte(": nomicore events\n\n")) {
		return
	}
	if state != nil && !send("state", state) {
		return
	}

	keepAlive := clock.NewTicker(a.opts.Clock, a.opts.EventsKeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-a.stop:
			send("closed", nil)
			return
		case <-st.stop:
			send("closed", nil)
			return
		case <-keepAlive.C:
			if !a.write(w, rc, []byte(": keep-alive\n\n")) {
				return
			}
			continue
		case <-watch.Wake():
		}
		p := watch.Poll()
		for _, u := range p.Updates {
			if !send("", u.Bytes()) {
				return
			}
		}
		switch {
		case p.NeedsResync:
			send("overflow", nil)
			return
		case p.Failed, p.Closed:
			send("closed", nil)
			return
		}
	}
}

// write writes and flushes one chunk of the stream within EventsWriteTimeout.
func (a *API) write(w http.ResponseWriter, rc *http.ResponseController, b []byte) bool {
	_ = rc.SetWriteDeadline(time.Now().Add(a.opts.EventsWriteTimeout))
	if _, err := w.Write(b); err != nil {
		return false
	}
	return rc.Flush() == nil
}

// startEventStream answers 200 with the headers of a Server-Sent Events stream (no caching,
// no buffering by a proxy in front) and returns the controller that flushes its events.
func startEventStream(w http.ResponseWriter) *http.ResponseController {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return http.NewResponseController(w)
}
