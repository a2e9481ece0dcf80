package adminapi

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/nomicore/nomicore/changefeed"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/webhook"
)

// The change feed routes (hub): GET /v1/changes and GET /v1/changes/latest.
const (
	// DefaultChangesLimit and MaxChangesLimit bound the changes of one answer (?limit=).
	DefaultChangesLimit = 1000
	MaxChangesLimit     = 10000
	// MaxChangesWait bounds ?wait= of a long poll.
	MaxChangesWait = 5 * time.Minute
)

// ChangeJSON is one change of the feed as the API shows it (and a webhook delivers it).
type ChangeJSON struct {
	Cursor      string `json:"cursor"`
	NamespaceID string `json:"namespaceId"`
	Kind        string `json:"kind"`
	StateVector string `json:"stateVector"` // hex; "" for a deletion or when not known
	At          string `json:"at"`          // RFC 3339, milliseconds
}

// ChangeOf renders an event.
func ChangeOf(e changefeed.Event) ChangeJSON {
	j := ChangeJSON{Cursor: string(e.Cursor), NamespaceID: e.NamespaceID, Kind: e.Kind.String(), StateVector: hex.EncodeToString(e.StateVector)}
	if !e.At.IsZero() {
		j.At = e.At.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	return j
}

// changesQuery is what GET /v1/changes asks for.
type changesQuery struct {
	after    changefeed.Cursor // the cursor given, as the feed reads it
	hasAfter bool
	limit    int
	wait     time.Duration
	longPoll bool // ?wait= or Accept: application/json: one JSON answer, not a stream
}

func parseChangesQuery(r *http.Request, src changefeed.Source) (changesQuery, *Error) {
	q := changesQuery{limit: DefaultChangesLimit}
	// Last-Event-ID is what an EventSource sends when it reconnects: it is newer than the
	// ?after= of the URL it reconnects to.
	after := r.Header.Get("Last-Event-ID")
	if after == "" {
		after = r.URL.Query().Get("after")
	}
	if after != "" {
		c, err := src.ParseCursor(after)
		if err != nil {
			return q, &Error{http.StatusBadRequest, CodeBadRequest, badCursorMessage(after, err)}
		}
		q.after, q.hasAfter = c, true
	}
	var e *Error
	if q.limit, e = intParam(r, "limit", DefaultChangesLimit, MaxChangesLimit); e != nil {
		return q, e
	}
	if q.limit < 1 {
		return q, &Error{http.StatusBadRequest, CodeBadRequest, "?limit= must be at least 1"}
	}
	if w := r.URL.Query().Get("wait"); w != "" {
		d, err := time.ParseDuration(w)
		if err != nil || d < 0 || d > MaxChangesWait {
			return q, &Error{http.StatusBadRequest, CodeBadRequest, "?wait= must be a duration from 0s to " + MaxChangesWait.String() + ", e.g. 30s"}
		}
		q.wait, q.longPoll = d, true
	}
	if r.Header.Get("Accept") == "application/json" {
		q.longPoll = true
	}
	return q, nil
}

// GET /v1/changes: the change feed after ?after=CURSOR (or Last-Event-ID), as Server-Sent
// Events — each change one event, its cursor as the event id, its ChangeJSON as data — or,
// with ?wait=DURATION (or Accept: application/json), as one JSON answer
// {"changes":[…],"cursor"} given as soon as there are changes, or after the wait with none.
// Without a cursor the feed starts with the changes made from now on. A cursor the feed
// cannot resume after is 410 CURSOR_EXPIRED with the list to start over from (as GET
// /v1/changes/latest).
func (a *API) getChanges(w http.ResponseWriter, r *http.Request) {
	q, e := parseChangesQuery(r, a.opts.Changes)
	if e != nil {
		writeError(w, e)
		return
	}
	src := a.opts.Changes
	ctx := r.Context()
	after := q.after
	if !q.hasAfter { // from now on
		head, err := src.Head(ctx)
		if err != nil {
			writeError(w, a.fromErr(err))
			return
		}
		after = head
	}
	if !q.longPoll {
		select {
		case a.streams <- struct{}{}:
			defer func() { <-a.streams }()
		default:
			writeError(w, &Error{http.StatusServiceUnavailable, CodeTooManyStreams, "too many event streams; retry later"})
			return
		}
	}
	rd, err := src.Open(ctx, after)
	if errors.Is(err, changefeed.ErrExpired) {
		a.writeExpired(w, r, err)
		return
	}
	if err != nil {
		writeError(w, a.fromErr(err))
		return
	}
	defer rd.Close()
	if q.longPoll {
		a.pollChanges(w, r, rd, q, after)
		return
	}
	a.streamChanges(w, r, rd, q)
}

// badCursorMessage is the 400's message for a cursor the feed does not read.
func badCursorMessage(after string, err error) string {
	var bad *changefeed.BadCursorError
	if errors.As(err, &bad) {
		return "the cursor (?after= or Last-Event-ID) must be a cursor the feed gave, " + bad.Want + "; got " + strconv.Quote(after)
	}
	return "the cursor (?after= or Last-Event-ID): " + err.Error()
}

// changesPage is the JSON answer of a long poll.
type changesPage struct {
	Changes []ChangeJSON `json:"changes"`
	// Cursor is where to ask from next (?after=): the last change's, or the one asked
	// after when there is none.
	Cursor string `json:"cursor"`
}

func (a *API) pollChanges(w http.ResponseWriter, r *http.Request, rd changefeed.Reader, q changesQuery, after changefeed.Cursor) {
	ctx := r.Context()
	deadline := a.opts.Clock.Now().Add(q.wait)
	for {
		wake := rd.Wake()
		events, err := rd.Next(ctx, q.limit)
		if errors.Is(err, changefeed.ErrExpired) {
			a.writeExpired(w, r, err)
			return
		}
		if err != nil {
			writeError(w, a.fromErr(err))
			return
		}
		left := deadline.Sub(a.opts.Clock.Now())
		if len(events) > 0 || left <= 0 {
			page := changesPage{Changes: make([]ChangeJSON, 0, len(events)), Cursor: string(after)}
			for _, e := range events {
				page.Changes = append(page.Changes, ChangeOf(e))
			}
			if len(events) > 0 {
				page.Cursor = page.Changes[len(page.Changes)-1].Cursor
			}
			writeJSON(w, http.StatusOK, page)
			return
		}
		fired := make(chan struct{})
		timer := a.opts.Clock.AfterFunc(left, func() { close(fired) })
		select {
		case <-wake:
		case <-fired:
		case <-ctx.Done():
			timer.Stop()
			return
		case <-a.stop:
			timer.Stop()
			writeError(w, &Error{http.StatusServiceUnavailable, CodeUnavailable, "shutting down"})
			return
		}
		timer.Stop()
	}
}

func (a *API) streamChanges(w http.ResponseWriter, r *http.Request, rd changefeed.Reader, q changesQuery) {
	ctx := r.Context()
	rc := startEventStream(w)
	if !a.write(w, rc, []byte(": nomicore changes\n\n")) {
		return
	}
	keepAlive := clock.NewTicker(a.opts.Clock, a.opts.EventsKeepAlive)
	defer keepAlive.Stop()
	var buf []byte
	for {
		wake := rd.Wake()
		events, err := rd.Next(ctx, q.limit)
		if err != nil {
			// The feed dropped what the stream had not sent yet (retention), or the node
			// cannot read it: end the stream saying why; the client resumes or starts over.
			body, _ := json.Marshal(map[string]string{"code": CodeCursorExpired, "message": err.Error()})
			if !errors.Is(err, changefeed.ErrExpired) {
				body, _ = json.Marshal(map[string]string{"code": CodeUnavailable, "message": err.Error()})
			}
			a.write(w, rc, append(append([]byte("event: error\ndata: "), body...), "\n\n"...))
			return
		}
		if len(events) > 0 {
			buf = buf[:0]
			for _, e := range events {
				b, _ := json.Marshal(ChangeOf(e))
				buf = append(buf, "id: "...)
				buf = append(buf, e.Cursor...)
				buf = append(buf, "\ndata: "...)
				buf = append(buf, b...)
				buf = append(buf, "\n\n"...)
			}
			if !a.write(w, rc, buf) {
				return
			}
			if f := a.opts.ChangesServed; f != nil {
				f(len(events))
			}
			if len(events) == q.limit {
				continue
			}
		}
		select {
		case <-wake:
		case <-keepAlive.C:
			if !a.write(w, rc, []byte(": keep-alive\n\n")) {
				return
			}
		case <-ctx.Done():
			return
		case <-a.stop:
			a.write(w, rc, []byte("event: closed\ndata: {}\n\n"))
			return
		}
	}
}

// latestJSON is the list to start over from: the newest change of every namespace the feed
// knows, and the cursor to follow the feed after.
type latestJSON struct {
	Cursor     string       `json:"cursor"`
	Namespaces []ChangeJSON `json:"namespaces"`
}

func (a *API) latest(ctx context.Context) (latestJSON, error) {
	out := latestJSON{Namespaces: []ChangeJSON{}}
	cursor, err := a.opts.Changes.Latest(ctx, func(e changefeed.Event) error {
		out.Namespaces = append(out.Namespaces, ChangeOf(e))
		return nil
	})
	out.Cursor = string(cursor)
	return out, err
}

// GET /v1/changes/latest: the newest change of every namespace and the cursor to follow
// the feed from (?after=) — where a reader without a cursor, or with an expired one,
// starts.
func (a *API) getLatestChanges(w http.ResponseWriter, r *http.Request) {
	l, err := a.latest(r.Context())
	if err != nil {
		writeError(w, a.fromErr(err))
		return
	}
	writeJSON(w, http.StatusOK, l)
}

// writeExpired answers 410 CURSOR_EXPIRED with the list to start over from.
func (a *API) writeExpired(w http.ResponseWriter, r *http.Request, cause error) {
	l, err := a.latest(r.Context())
	if err != nil {
		writeError(w, a.fromErr(err))
		return
	}
	writeJSON(w, http.StatusGone, struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		latestJSON
	}{CodeCursorExpired, cause.Error() + "; start over: read the namespaces below (each as of its newest change), then follow the feed after the cursor given here", l})
}

// GET /v1/webhooks (hub): each --webhook-url endpoint's delivery state ([] without any).
func (a *API) getWebhooks(w http.ResponseWriter, _ *http.Request) {
	out := struct {
		Webhooks []webhook.Status `json:"webhooks"`
	}{Webhooks: []webhook.Status{}}
	if a.opts.Webhooks != nil {
		out.Webhooks = append(out.Webhooks, a.opts.Webhooks()...)
	}
	writeJSON(w, http.StatusOK, out)
}
