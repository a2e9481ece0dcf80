package adminapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/namespace"
)

// auditLog collects a logger's JSON lines.
type auditLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *auditLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

func (l *auditLog) logger() *slog.Logger { return slog.New(slog.NewJSONHandler(l, nil)) }

// actions returns the audit lines written so far, and forgets them.
func (l *auditLog) actions(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, s := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		var m map[string]any
		if s == "" || json.Unmarshal([]byte(s), &m) != nil || m["msg"] != "admin action" {
			continue
		}
		out = append(out, m)
	}
	l.buf.Reset()
	return out
}

// An epoch bump needs the current epoch in its body: none is 400, another is 409 and changes
// nothing; of two operators who expect the same epoch, exactly one bumps it. Each bump is
// one audit line.
func TestEpochBumpNamesTheEpochItReplaces(t *testing.T) {
	var logs auditLog
	e := newEnv(t, Options{Side: observer.SideHub, Logger: logs.logger()})
	c := e.create()
	path := "/v1/namespaces/" + c.NamespaceID
	logs.actions(t)
	e.wantError("POST", path+"/epoch", nil, 400, CodeBadRequest)
	e.wantError("POST", path+"/epoch", []byte(`{}`), 400, CodeBadRequest)
	e.wantError("POST", path+"/epoch", []byte(`{"expectedEpoch":"1"}`), 400, CodeBadRequest)
	e.wantError("POST", path+"/epoch", []byte(`{"expectedEpoch":7}`), 409, CodeEpochMismatch)
	if _, b := e.do("POST", path+"/epoch", []byte(`{"expectedEpoch":7}`)); !strings.Contains(string(b), "the namespace's epoch is 1, not 7") {
		t.Errorf("mismatch message %s", b)
	}
	if _, b := e.do("GET", path, nil); decode[Status](t, b).ReplicationEpoch != 1 {
		t.Fatalf("a refused bump changed the epoch: %s", b)
	}
	if got := logs.actions(t); len(got) != 0 {
		t.Fatalf("refused bumps were audited: %v", got)
	}
	// Two operators at once, both expecting epoch 1.
	var wg sync.WaitGroup
	statuses := make(chan int, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, _ := e.do("POST", path+"/epoch", []byte(`{"expectedEpoch":1}`))
			statuses <- status
		}()
	}
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	if counts[200] != 1 || counts[409] != 1 {
		t.Fatalf("two bumps expecting the same epoch: %v", counts)
	}
	if _, b := e.do("GET", path, nil); decode[Status](t, b).ReplicationEpoch != 2 {
		t.Fatalf("epoch after the race: %s", b)
	}
	got := logs.actions(t)
	if len(got) != 1 || got[0]["action"] != "epoch-bumped" || got[0]["by"] != "loopback" || got[0]["namespaceId"] != c.NamespaceID ||
		got[0]["fromEpoch"] != 1.0 || got[0]["toEpoch"] != 2.0 || got[0]["level"] != "INFO" {
		t.Fatalf("audit %v", got)
	}
}

// A schema replacement names the schema it replaces ("" for none); a stale one is 409.
func TestSchemaReplaceNamesTheSchemaItReplaces(t *testing.T) {
	var logs auditLog
	e := newEnv(t, Options{Side: observer.SideHub, Logger: logs.logger()})
	path := "/v1/namespaces/" + e.create().NamespaceID
	e.wantError("PUT", path+"/schema", []byte(`{"definition":{"a":1},"expectedFingerprint":"sha256:v1:00"}`), 409, CodeSchemaMismatch)
	status, b := e.do("PUT", path+"/schema", []byte(`{"definition":{"a":1},"expectedFingerprint":""}`))
	if status != 200 {
		t.Fatalf("first schema: %d %s", status, b)
	}
	first := decode[SchemaJSON](t, b).SemanticFingerprint
	e.wantError("PUT", path+"/schema", []byte(`{"definition":{"a":2},"expectedFingerprint":""}`), 409, CodeSchemaMismatch)
	status, b = e.do("PUT", path+"/schema", []byte(`{"definition":{"a":2},"expectedFingerprint":"`+first+`"}`))
	if status != 200 || decode[SchemaJSON](t, b).SemanticFingerprint == first {
		t.Fatalf("second schema: %d %s", status, b)
	}
	second := decode[SchemaJSON](t, b).SemanticFingerprint
	var got []string
	for _, a := range logs.actions(t) {
		got = append(got, fmt.Sprintf("%v %v→%v", a["action"], a["fromFingerprint"], a["toFingerprint"]))
	}
	want := []string{"namespace-created <nil>→<nil>", "schema-replaced →" + first, "schema-replaced " + first + "→" + second}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("audit %q, want %q", got, want)
	}
}

// ?root=NAME:TYPE with a type the root does not have is 400 naming the type it has; the
// request leaves the document's roots as they were.
func TestDocRootOfAnotherType(t *testing.T) {
	e := newEnv(t, Options{Side: observer.SideHub})
	path := "/v1/namespaces/" + e.create().NamespaceID
	_, state := e.do("GET", path+"/update", nil)
	if status, b := e.do("POST", path+"/update", mapUpdate(t, state, "notes", map[string]any{"k": "v"})); status != 204 {
		t.Fatalf("write: %d %s", status, b)
	}
	for _, q := range []string{"notes:text", "notes:array", "notes:xml"} {
		status, b := e.do("GET", path+"/doc?root="+q, nil)
		var er struct{ Code, Message string }
		json.Unmarshal(b, &er)
		if status != 400 || er.Code != CodeRootType || !strings.Contains(er.Message, `root "notes" is a map, not a`) || !strings.Contains(er.Message, "?root=notes:map") {
			t.Errorf("%s: %d %s", q, status, b)
		}
	}
	for q, want := range map[string]string{
		"notes:map":              `{"notes":{"k":"v"}}`,
		"absent:text":            `{"absent":""}`,
		"absent:array,notes:map": `{"absent":[],"notes":{"k":"v"}}`,
	} {
		if status, b := e.do("GET", path+"/doc?root="+q, nil); status != 200 || strings.TrimSpace(string(b)) != want {
			t.Errorf("%s: %d %s, want %s", q, status, b, want)
		}
	}
	// The live document was not retyped: every root as before, nothing added.
	_, b := e.do("GET", path+"/doc", nil)
	doc := decode[map[string]any](t, b)
	if fmt.Sprint(doc["notes"]) != "map[k:v]" || doc["absent"] != nil {
		t.Fatalf("the document after the refused and declared reads: %s", b)
	}
}

// JSON routes take JSON or an empty body; a JSON body over its limit is 413
// REQUEST_TOO_LARGE.
func TestJSONBodies(t *testing.T) {
	e := newEnv(t, Options{Side: observer.SideHub})
	post := func(contentType, body string) (int, string) {
		req, _ := http.NewRequest("POST", e.srv.URL+"/v1/namespaces", strings.NewReader(body))
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var er struct{ Code string }
		json.NewDecoder(resp.Body).Decode(&er)
		return resp.StatusCode, er.Code
	}
	for _, tc := range []struct {
		contentType, body string
		status            int
		code              string
	}{
		{"", "", 201, ""},
		{"text/plain", "", 201, ""},
		{"application/json", `{"owner":"a"}`, 201, ""},
		{"application/json; charset=utf-8", `{"owner":"a"}`, 201, ""},
		{"", `{"owner":"a"}`, 201, ""},
		{"text/plain", `{"owner":"a"}`, 415, CodeUnsupportedMediaType},
		{"application/x-www-form-urlencoded", `{"owner":"a"}`, 415, CodeUnsupportedMediaType},
		{"application/json", `{"owner":"` + strings.Repeat("a", 70<<10) + `"}`, 413, CodeRequestTooLarge},
	} {
		if status, code := post(tc.contentType, tc.body); status != tc.status || code != tc.code {
			t.Errorf("%q %.20q: %d %s, want %d %s", tc.contentType, tc.body, status, code, tc.status, tc.code)
		}
	}
}

// Every admin action of a peer is one audit line; a target's failure shows with its code
// and reason in GET /v1/targets.
func TestPeerActionsAndTargetReasons(t *testing.T) {
	var logs auditLog
	targets := &fakeTargets{list: map[string]namespace.TargetStatus{}}
	explain := func(ts namespace.TargetStatus) (string, string) {
		if ts.State == observer.ChannelFailed {
			return "NAMESPACE_NOT_FOUND", "the hub has no such namespace"
		}
		return "", ""
	}
	e := newEnv(t, Options{Side: observer.SidePeer, Targets: targets, Logger: logs.logger(), Token: "tk", ExplainTarget: explain})
	const ns = "ns-0123456789abcdef0123456789abcdef"
	if status, b := e.do("POST", "/v1/targets", []byte(`{"namespaceId":"`+ns+`"}`)); status != 201 {
		t.Fatalf("add: %d %s", status, b)
	}
	targets.set(ns, observer.ChannelFailed)
	_, b := e.do("GET", "/v1/targets", nil)
	list := decode[[]TargetJSON](t, b)
	if len(list) != 1 || list[0].State != "failed" || list[0].Code != "NAMESPACE_NOT_FOUND" || list[0].Reason != "the hub has no such namespace" {
		t.Fatalf("targets %s", b)
	}
	if status, b := e.do("POST", "/v1/namespaces/"+ns+"/reset", nil); status != 200 {
		t.Fatalf("reset: %d %s", status, b)
	}
	if status, _ := e.do("DELETE", "/v1/targets/"+ns, nil); status != 204 {
		t.Fatalf("remove: %d", status)
	}
	var got []string
	for _, a := range logs.actions(t) {
		if a["by"] != "admin-token" || a["namespaceId"] != ns || a["remote"] == "" || a["level"] != "INFO" {
			t.Errorf("audit line %v", a)
		}
		got = append(got, a["action"].(string))
	}
	if strings.Join(got, ",") != "target-added,replica-reset,target-removed" {
		t.Fatalf("audited %v", got)
	}
}

// The namespace-created audit line carries the namespace, never the owner.
func TestCreateIsAuditedWithoutTheOwner(t *testing.T) {
	var logs auditLog
	e := newEnv(t, Options{Side: observer.SideHub, Logger: logs.logger()})
	status, b := e.do("POST", "/v1/namespaces", []byte(`{"owner":"OWNER-SENTINEL"}`))
	if status != 201 {
		t.Fatalf("%d %s", status, b)
	}
	id := decode[Created](t, b).NamespaceID
	logs.mu.Lock()
	raw := logs.buf.String()
	logs.mu.Unlock()
	got := logs.actions(t)
	if len(got) != 1 || got[0]["action"] != "namespace-created" || got[0]["namespaceId"] != id || strings.Contains(raw, "OWNER-SENTINEL") {
		t.Fatalf("audit %v (raw %s)", got, raw)
	}
}
