package adminapi

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/node/timeline"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/webhook"
)

// The status routes tell an operator what the process is doing: GET /v1/status (the whole
// picture), GET /v1/connections (hub), GET /v1/events (the recent replication events) and
// GET /v1/status/stream, which sends all of it as Server-Sent Events — the dashboard's live
// feed. A field the process cannot know is left out, never shown as zero.

// Defaults and bounds of the status routes.
const (
	// DefaultStatusNamespaces is how many namespaces GET /v1/status lists unless asked
	// (?namespaces=N, at most MaxStatusNamespaces): the loaded ones first, then by id.
	DefaultStatusNamespaces = 200
	MaxStatusNamespaces     = 2000
	// DefaultStreamInterval paces GET /v1/status/stream (?interval=MS within the bounds).
	DefaultStreamInterval = time.Second
	MinStreamInterval     = 250 * time.Millisecond
	MaxStreamInterval     = time.Minute
	// StreamBacklog is how many past events a new status stream starts with.
	StreamBacklog = 50
	// RemeasureAfter bounds how often a namespace's document size is measured again
	// (registry.Registry.Activity) while status readers look at it and it changes.
	RemeasureAfter = 5 * time.Second
	// MaxDocMaxBytes bounds ?maxBytes= of GET …/doc.
	MaxDocMaxBytes = 64 << 20
)

// LinkInfo is a peer's connection to its hub as the connection layer and the diagnosis
// know it.
type LinkInfo struct {
	HubURL string
	State  observer.ConnectionState
	// Problem says why the connection is not ready, when known.
	Problem string
	// PingRTT is the last ping's round trip on the current connection (zero: none).
	PingRTT time.Duration
}

// NodeStatus is the answer of GET /v1/status.
type NodeStatus struct {
	Side          string     `json:"side"`
	InstanceID    string     `json:"instanceId,omitempty"`
	Version       string     `json:"version,omitempty"`
	StartedAt     *time.Time `json:"startedAt,omitempty"`
	Now           time.Time  `json:"now"`
	UptimeSeconds *float64   `json:"uptimeSeconds,omitempty"`
	Ready         bool       `json:"ready"`
	// NotReadyReason is /readyz's reason when not ready.
	NotReadyReason string `json:"notReadyReason,omitempty"`
	// Persistence is healthy or degraded (writes refused while the store fails to commit).
	Persistence string      `json:"persistence"`
	Store       StoreStatus `json:"store"`
	// Listeners are the process's listen addresses by name (admin, replication, client).
	Listeners map[string]string `json:"listeners,omitempty"`
	// Totals are counters since start: the dashboard computes rates from two readings.
	Totals *timeline.Totals `json:"totals,omitempty"`
	// Load is the outbound load of the replication connections.
	Load *LoadStatus `json:"load,omitempty"`
	// Connections (hub) are the peers' connections, [] when none.
	Connections []ConnectionStatus `json:"connections,omitzero"`
	// Webhooks (hub with --webhook-url) are the endpoints' delivery states.
	Webhooks []webhook.Status `json:"webhooks,omitempty"`
	// Hub (peer) is the connection to the hub.
	Hub *HubLinkStatus `json:"hub,omitempty"`
	// Namespaces are one page of the namespaces: of the NamespacesMatched that ?match=
	// selects (all NamespacesTotal without it), in order — the loaded ones first, then by
	// id —, at most ?namespaces=N from ?offset=K (NamespacesOffset).
	Namespaces        []NamespaceSummary `json:"namespaces"`
	NamespacesTotal   int                `json:"namespacesTotal"`
	NamespacesMatched int                `json:"namespacesMatched"`
	NamespacesOffset  int                `json:"namespacesOffset"`
	// Writes sums the Writes of every namespace, listed or not.
	Writes uint64 `json:"writes"`
}

// namespacePage is the part of the namespaces GET /v1/status lists: ?namespaces=N from
// ?offset=K of those whose id or owner contains ?match= (any case).
type namespacePage struct {
	limit, offset int
	match         string
}

// MaxStatusMatch bounds ?match= of the status routes.
const MaxStatusMatch = 100

// namespacePageParams reads ?namespaces=, ?offset= and ?match=.
func namespacePageParams(r *http.Request) (namespacePage, *Error) {
	limit, e := intParam(r, "namespaces", DefaultStatusNamespaces, MaxStatusNamespaces)
	if e != nil {
		return namespacePage{}, e
	}
	p := namespacePage{limit: limit, match: strings.ToLower(strings.TrimSpace(r.URL.Query().Get("match")))}
	if len(p.match) > MaxStatusMatch {
		return p, &Error{http.StatusBadRequest, CodeBadRequest, "match must be at most " + strconv.Itoa(MaxStatusMatch) + " bytes"}
	}
	if v := r.URL.Query().Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1<<30 {
			return p, &Error{http.StatusBadRequest, CodeBadRequest, "offset must be a whole number from 0"}
		}
		p.offset = n
	}
	return p, nil
}

// matches reports whether the page's ?match= selects s.
func (p namespacePage) matches(s *NamespaceSummary) bool {
	return p.match == "" || strings.Contains(s.NamespaceID, p.match) || strings.Contains(strings.ToLower(s.Owner), p.match)
}

// StoreStatus are the store's counters.
type StoreStatus struct {
	QueuedAppends int    `json:"queuedAppends"`
	QueuedBytes   int    `json:"queuedBytes"`
	Commits       uint64 `json:"commits"`
	CommitErrors  uint64 `json:"commitErrors"`
	Compactions   uint64 `json:"compactions"`
	// LoadedNamespaces are the documents in memory now.
	LoadedNamespaces int `json:"loadedNamespaces"`
}

// LoadStatus is the outbound load: bytes queued or being written, live updates sent and
// not yet acknowledged.
type LoadStatus struct {
	QueuedBytes     int64 `json:"queuedBytes"`
	InFlightUpdates int64 `json:"inFlightUpdates"`
}

// ConnectionStatus is one peer connection of the hub. LiveNamespaces counts its channels
// that are live; Namespaces all its channels.
type ConnectionStatus struct {
	PeerInstanceID string     `json:"peerInstanceId"`
	ConnectionID   string     `json:"connectionId"`
	State          string     `json:"state"`
	ConnectedSince *time.Time `json:"connectedSince,omitempty"`
	Namespaces     int        `json:"namespaces"`
	LiveNamespaces int        `json:"liveNamespaces"`
	// QueuedBytes are data bytes queued or being written; InFlightUpdates live UPDATEs
	// awaiting their acknowledgement; PingRTTMs the last ping's round trip (absent before
	// the first).
	QueuedBytes     int64    `json:"queuedBytes"`
	InFlightUpdates int64    `json:"inFlightUpdates"`
	PingRTTMs       *float64 `json:"pingRttMs,omitempty"`
}

// HubLinkStatus is a peer's connection to its hub.
type HubLinkStatus struct {
	URL   string     `json:"url,omitempty"`
	State string     `json:"state"`
	Since *time.Time `json:"since,omitempty"`
	// Backoff is the reconnect scheduled while the state is backoff.
	Backoff *BackoffStatus `json:"backoff,omitempty"`
	// Problem says why the connection is not ready and what to do, when known.
	Problem string `json:"problem,omitempty"`
	// LastFailure is the code of the last connection failure, and when.
	LastFailure   string     `json:"lastFailure,omitempty"`
	LastFailureAt *time.Time `json:"lastFailureAt,omitempty"`
	// PingRTTMs is the last ping's round trip on the current connection.
	PingRTTMs *float64 `json:"pingRttMs,omitempty"`
}

// BackoffStatus is a scheduled reconnect.
type BackoffStatus struct {
	Attempt int       `json:"attempt"`
	DelayMs float64   `json:"delayMs"`
	Reason  string    `json:"reason"`
	RetryAt time.Time `json:"retryAt"`
}

// NamespaceSummary is a namespace in GET /v1/status.
type NamespaceSummary struct {
	NamespaceID string `json:"namespaceId"`
	Owner       string `json:"owner"`
	// State: on the hub active or archived; on a peer its target's replication state
	// (closed for a local replica that is no longer a target).
	State  string `json:"state"`
	Loaded bool   `json:"loaded"`
	// ReplicationEpoch is the epoch (the last one known while not loaded).
	ReplicationEpoch uint64 `json:"replicationEpoch,omitempty"`
	// DocumentBytes is the document's size as one Yjs update, when it was measured.
	DocumentBytes *int `json:"documentBytes,omitempty"`
	// Writes and WriteBytes count the transactions that changed the document (every
	// origin), since the process started; LastWriteAt is the last one's time.
	Writes      uint64     `json:"writes"`
	WriteBytes  uint64     `json:"writeBytes"`
	LastWriteAt *time.Time `json:"lastWriteAt,omitempty"`
	// Peers (hub) counts the peers' channels on the namespace by state.
	Peers map[string]int `json:"peers,omitempty"`
	TargetFacts
}

// TargetFacts is what a node says of a namespace beyond its state, in GET /v1/status and
// GET /v1/namespaces/{id} alike: on a peer why its target is not replicating and what it is
// receiving; on any node with a client listener its editors.
type TargetFacts struct {
	// Code and Reason (peer) say why a target is not replicating.
	Code   string `json:"code,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Retry (peer) says when a target that failed is tried again.
	Retry *RetryJSON `json:"retry,omitempty"`
	// UnreplicatedBytes (peer) counts the bytes of local writes the hub has not confirmed.
	UnreplicatedBytes int64 `json:"unreplicatedBytes,omitempty"`
	// Progress (peer) is the snapshot, catch-up difference or live update being received
	// from the hub in chunks, while one is.
	Progress *ProgressJSON `json:"progress,omitempty"`
	// Editors counts the editors connected to the namespace, on a node with a client
	// listener.
	Editors *int `json:"editors,omitempty"`
}

// millis is d in milliseconds, nil for zero (not measured).
func millis(d time.Duration) *float64 {
	if d <= 0 {
		return nil
	}
	ms := float64(d.Microseconds()) / 1000
	return &ms
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// activity adds what the registry knows of a namespace's activity to s.
func (a *API) activity(s *NamespaceSummary) {
	act, ok := a.opts.Registry.Activity(s.NamespaceID, RemeasureAfter)
	if !ok {
		return
	}
	s.Loaded = act.Loaded
	s.Writes, s.WriteBytes, s.LastWriteAt = act.Writes, act.WriteBytes, timePtr(act.LastWrite)
	if act.Identity.Valid() {
		s.ReplicationEpoch = act.Identity.Epoch
	}
	if !act.DocumentMeasuredAt.IsZero() {
		n := act.DocumentBytes
		s.DocumentBytes = &n
	}
}

// peerExtras adds a namespace's transfer progress and editors, when the process knows them.
func (a *API) peerExtras(ns string, f *TargetFacts) {
	if a.opts.Targets != nil {
		if t, ok := a.opts.Targets.Target(ns); ok {
			f.Progress = progressJSON(t.Progress)
		}
	}
	if a.opts.Editors != nil {
		if n, ok := a.opts.Editors(ns); ok {
			f.Editors = &n
		}
	}
}

// status builds the answer of GET /v1/status, listing the namespaces of page.
func (a *API) status(ctx context.Context, page namespacePage) (NodeStatus, *Error) {
	now := a.opts.Clock.Now()
	st := NodeStatus{Side: string(a.opts.Side), InstanceID: a.opts.InstanceID, Version: a.opts.Version,
		Now: now.UTC(), Ready: true, Persistence: "healthy", Listeners: a.opts.Listeners}
	if !a.opts.StartedAt.IsZero() {
		st.StartedAt = timePtr(a.opts.StartedAt)
		up := now.Sub(a.opts.StartedAt).Seconds()
		st.UptimeSeconds = &up
	}
	if !a.opts.Store.Healthy() {
		st.Persistence = "degraded"
	}
	if a.opts.Ready != nil {
		if err := a.opts.Ready(); err != nil {
			st.Ready, st.NotReadyReason = false, err.Error()
		}
	}
	ss := a.opts.Store.Stats()
	st.Store = StoreStatus{QueuedAppends: ss.Queued, QueuedBytes: ss.QueuedBytes, Commits: ss.Commits,
		CommitErrors: ss.CommitErrors, Compactions: ss.Compactions, LoadedNamespaces: a.opts.Registry.Loaded()}
	if tl := a.opts.Timeline; tl != nil {
		t := tl.Totals()
		st.Totals = &t
	}
	if a.opts.Load != nil {
		l := a.opts.Load()
		st.Load = &LoadStatus{QueuedBytes: l.QueuedBytes, InFlightUpdates: l.InFlight}
	}

	entries, err := a.opts.Registry.Entries(ctx, "")
	if err != nil {
		return st, a.fromErr(err)
	}
	var list []NamespaceSummary
	if a.opts.Side == observer.SideHub {
		perConn := map[string]*ConnectionStatus{}
		st.Connections = []ConnectionStatus{}
		if a.opts.Webhooks != nil {
			st.Webhooks = a.opts.Webhooks()
		}
		if a.opts.Connections != nil {
			for _, c := range a.opts.Connections() {
				cs := ConnectionStatus{PeerInstanceID: c.PeerInstanceID, ConnectionID: c.ConnectionID, State: string(c.State),
					ConnectedSince: timePtr(c.ReadyAt), QueuedBytes: c.QueuedBytes, InFlightUpdates: c.InFlight, PingRTTMs: millis(c.PingRTT)}
				if cs.ConnectedSince == nil && a.opts.Timeline != nil {
					if since, ok := a.opts.Timeline.ConnectedSince(c.ConnectionID); ok {
						cs.ConnectedSince = timePtr(since)
					}
				}
				st.Connections = append(st.Connections, cs)
			}
			slices.SortFunc(st.Connections, func(x, y ConnectionStatus) int {
				if c := strings.Compare(x.PeerInstanceID, y.PeerInstanceID); c != 0 {
					return c
				}
				return strings.Compare(x.ConnectionID, y.ConnectionID)
			})
			for i := range st.Connections {
				perConn[st.Connections[i].ConnectionID] = &st.Connections[i]
			}
		}
		for _, e := range entries {
			s := NamespaceSummary{NamespaceID: e.NamespaceID, Owner: e.Owner, State: StateActive, Loaded: e.Loaded}
			if e.Archived {
				s.State = StateArchived
			}
			a.activity(&s)
			if a.opts.Sessions != nil && s.Loaded {
				for _, sess := range a.opts.Sessions(e.NamespaceID) {
					if s.Peers == nil {
						s.Peers = map[string]int{}
					}
					s.Peers[string(sess.State)]++
					if c := perConn[sess.ConnectionID]; c != nil {
						c.Namespaces++
						if sess.State == observer.ChannelLive {
							c.LiveNamespaces++
						}
					}
				}
			}
			if a.opts.Editors != nil {
				a.peerExtras(s.NamespaceID, &s.TargetFacts)
			}
			list = append(list, s)
		}
	} else {
		st.Hub = a.hubLink(now)
		seen := map[string]bool{}
		for _, t := range a.opts.Targets.Targets() {
			seen[t.NamespaceID] = true
			s := NamespaceSummary{NamespaceID: t.NamespaceID, Owner: t.Owner, State: string(t.State)}
			a.activity(&s)
			if t.Identity.Valid() {
				s.ReplicationEpoch = t.Identity.Epoch
			}
			tj := a.targetJSON(t)
			s.Code, s.Reason, s.Retry, s.UnreplicatedBytes = tj.Code, tj.Reason, tj.Retry, tj.UnreplicatedBytes
			a.peerExtras(s.NamespaceID, &s.TargetFacts)
			list = append(list, s)
		}
		for _, e := range entries {
			if seen[e.NamespaceID] || e.Archived {
				continue
			}
			s := NamespaceSummary{NamespaceID: e.NamespaceID, Owner: e.Owner, State: string(observer.ChannelClosed), Loaded: e.Loaded}
			a.activity(&s)
			list = append(list, s)
		}
	}
	st.NamespacesTotal = len(list)
	matched := list[:0]
	for i := range list {
		st.Writes += list[i].Writes
		if page.matches(&list[i]) {
			matched = append(matched, list[i])
		}
	}
	list = matched
	st.NamespacesMatched, st.NamespacesOffset = len(list), page.offset
	slices.SortStableFunc(list, func(x, y NamespaceSummary) int {
		if x.Loaded != y.Loaded {
			if x.Loaded {
				return -1
			}
			return 1
		}
		return strings.Compare(x.NamespaceID, y.NamespaceID)
	})
	list = list[min(page.offset, len(list)):]
	if len(list) > page.limit {
		list = list[:page.limit]
	}
	st.Namespaces = append([]NamespaceSummary{}, list...)
	return st, nil
}

// hubLink describes a peer's connection to its hub.
func (a *API) hubLink(now time.Time) *HubLinkStatus {
	var h HubLinkStatus
	if a.opts.Link != nil {
		li := a.opts.Link()
		h.URL, h.State, h.Problem, h.PingRTTMs = li.HubURL, string(li.State), li.Problem, millis(li.PingRTT)
	}
	if a.opts.Timeline != nil {
		l := a.opts.Timeline.Link()
		if h.State == "" {
			h.State = string(l.State)
		}
		if string(l.State) == h.State {
			h.Since = timePtr(l.Since)
		}
		if l.Backoff != nil && h.State == string(observer.ConnBackoff) {
			h.Backoff = &BackoffStatus{Attempt: l.Backoff.Attempt, DelayMs: float64(l.Backoff.Delay.Microseconds()) / 1000,
				Reason: l.Backoff.Reason, RetryAt: l.Backoff.At.Add(l.Backoff.Delay).UTC()}
		}
		h.LastFailure, h.LastFailureAt = l.LastFailure, timePtr(l.LastFailureTime)
	}
	if h.State == "" {
		h.State = "unknown"
	}
	return &h
}

// intParam reads a positive integer query parameter within [1, max] (def when absent).
func intParam(r *http.Request, name string, def, max int) (int, *Error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, &Error{http.StatusBadRequest, CodeBadRequest, name + " must be a whole number from 1 to " + strconv.Itoa(max)}
	}
	return n, nil
}

// GET /v1/status[?namespaces=N][&offset=K][&match=TEXT]
func (a *API) getStatus(w http.ResponseWriter, r *http.Request) {
	page, e := namespacePageParams(r)
	if e != nil {
		writeError(w, e)
		return
	}
	st, e := a.status(r.Context(), page)
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// GET /v1/connections (hub): the peers' connections, as in GET /v1/status.
func (a *API) getConnections(w http.ResponseWriter, r *http.Request) {
	st, e := a.status(r.Context(), namespacePage{limit: 1})
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, st.Connections)
}

// EventsPage is the answer of GET /v1/events.
type EventsPage struct {
	Events []timeline.Record `json:"events"`
	// Next is the ?after= that continues after this page.
	Next uint64 `json:"next"`
	// Missed counts events after ?after= that are no longer kept.
	Missed uint64 `json:"missed,omitempty"`
}

// GET /v1/events[?namespace=ID][&after=SEQ][&limit=N]: the kept replication events, oldest
// first.
func (a *API) getEvents(w http.ResponseWriter, r *http.Request) {
	ns, after, e := eventsQuery(r)
	if e != nil {
		writeError(w, e)
		return
	}
	limit, e := intParam(r, "limit", timeline.DefaultMaxEvents, timeline.DefaultMaxEvents*100)
	if e != nil {
		writeError(w, e)
		return
	}
	if a.opts.Timeline == nil {
		writeJSON(w, http.StatusOK, EventsPage{Events: []timeline.Record{}})
		return
	}
	p := a.opts.Timeline.Events(after, ns, limit)
	out := EventsPage{Events: p.Records, Next: p.Next - 1, Missed: p.Missed}
	if out.Events == nil {
		out.Events = []timeline.Record{}
	}
	writeJSON(w, http.StatusOK, out)
}

// eventsQuery reads ?namespace= and ?after= of the event routes.
func eventsQuery(r *http.Request) (ns string, after uint64, e *Error) {
	q := r.URL.Query()
	ns = q.Get("namespace")
	if ns != "" && !registry.ValidNamespaceID(ns) {
		return "", 0, &Error{http.StatusBadRequest, CodeBadRequest, "namespace must be ns- and 32 lowercase hex digits"}
	}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return "", 0, &Error{http.StatusBadRequest, CodeBadRequest, "after must be an event's seq"}
		}
		after = n
	}
	return ns, after, nil
}

// GET /v1/status/stream[?namespace=ID][&interval=MS][&after=SEQ][&namespaces=N][&offset=K][&match=TEXT]:
// Server-Sent Events — `event: status` (GET /v1/status) at once and every interval; with
// ?namespace=, `event: namespace` (GET /v1/namespaces/{id}) with it; `event: event` for
// each replication event as it happens (only the namespace's with ?namespace=), starting
// with the last StreamBacklog kept ones (or those after ?after=); `event: missed` when the
// stream fell behind and events were lost. It ends with `event: closed` at shutdown. Each
// write must finish within EventsWriteTimeout, or the stream ends.
func (a *API) statusStream(w http.ResponseWriter, r *http.Request) {
	ns, after, e := eventsQuery(r)
	if e != nil {
		writeError(w, e)
		return
	}
	_, hasAfter := r.URL.Query()["after"]
	page, e := namespacePageParams(r)
	if e != nil {
		writeError(w, e)
		return
	}
	ms, e := intParam(r, "interval", int(DefaultStreamInterval/time.Millisecond), int(MaxStreamInterval/time.Millisecond))
	if e != nil {
		writeError(w, e)
		return
	}
	interval := max(time.Duration(ms)*time.Millisecond, MinStreamInterval)
	if ns != "" {
		if _, e := a.lookupID(r.Context(), ns); e != nil {
			writeError(w, e)
			return
		}
	}
	select {
	case a.streams <- struct{}{}:
		defer func() { <-a.streams }()
	default:
		writeError(w, &Error{http.StatusServiceUnavailable, CodeTooManyStreams, "too many event streams; retry later"})
		return
	}

	rc := startEventStream(w)
	var buf []byte
	send := func(event string, id uint64, v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			a.log.Error("status stream: encoding", errAttr(err))
			return false
		}
		buf = append(buf[:0], "event: "+event+"\n"...)
		if id > 0 {
			buf = strconv.AppendUint(append(buf, "id: "...), id, 10)
			buf = append(buf, '\n')
		}
		buf = append(append(append(buf, "data: "...), b...), "\n\n"...)
		return a.write(w, rc, buf)
	}
	tick := func() bool {
		st, e := a.status(r.Context(), page)
		if e != nil {
			return send("error", 0, errorBody(e))
		}
		if !send("status", 0, st) {
			return false
		}
		if ns != "" {
			d, e := a.namespaceStatus(r.Context(), ns)
			if e != nil {
				return send("error", 0, errorBody(e))
			}
			return send("namespace", 0, d)
		}
		return true
	}
	if !a.write(w, rc, []byte(": nomicore status\n\n")) || !tick() {
		return
	}

	tl := a.opts.Timeline
	var next uint64 // the seq of the next event to send
	if tl != nil {
		if hasAfter {
			next = after + 1
		} else if backlog := tl.Latest(StreamBacklog, ns); len(backlog) > 0 {
			next = backlog[0].Seq
		} else {
			next = tl.NextSeq()
		}
	}
	flushEvents := func() bool {
		if tl == nil {
			return true
		}
		p := tl.Events(next-1, ns, 0)
		if p.Missed > 0 && !send("missed", 0, map[string]uint64{"missed": p.Missed}) {
			return false
		}
		for _, rec := range p.Records {
			if !send("event", rec.Seq, rec) {
				return false
			}
		}
		next = p.Next
		return true
	}
	if !flushEvents() {
		return
	}
	var changed <-chan struct{}
	ticker := clock.NewTicker(a.opts.Clock, interval)
	defer ticker.Stop()
	for {
		if tl != nil {
			changed = tl.Changed()
			if !flushEvents() { // an event kept between the last flush and Changed
				return
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-a.stop:
			a.write(w, rc, []byte("event: closed\ndata: {}\n\n"))
			return
		case <-ticker.C:
			if !tick() {
				return
			}
		case <-changed:
		}
	}
}

// errorBody is an Error as the JSON of an `event: error`.
func errorBody(e *Error) map[string]string {
	return map[string]string{"code": e.Code, "message": e.Message}
}
