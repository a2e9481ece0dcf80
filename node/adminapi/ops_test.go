package adminapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/namespace"
)

// sickStore is a catalog whose health the test sets.
type sickStore struct {
	persistence.Catalog
	sick atomic.Bool
}

func (s *sickStore) Healthy() bool { return !s.sick.Load() }

// A store that cannot commit makes the node not ready — 503, with the problem the node
// names — and ready again once it commits.
func TestReadyzWhenTheStoreCannotCommit(t *testing.T) {
	st, reg := newRegistry(t, registry.RoleHub)
	sick := &sickStore{Catalog: st}
	problem := "the disk holding /data is full"
	e := newEnv(t, Options{Side: observer.SideHub, Store: sick, Registry: reg, StoreProblem: func() string { return problem }})
	if status, b := e.do("GET", "/readyz", nil); status != 200 {
		t.Fatalf("healthy: %d %s", status, b)
	}
	sick.sick.Store(true)
	status, b := e.do("GET", "/readyz", nil)
	m := decode[map[string]any](t, b)
	if status != 503 || m["ready"] != false || m["persistence"] != "degraded" || m["reason"] != "persistence degraded: "+problem {
		t.Fatalf("degraded: %d %s", status, b)
	}
	sick.sick.Store(false)
	if status, b := e.do("GET", "/readyz", nil); status != 200 {
		t.Fatalf("healthy again: %d %s", status, b)
	}
}

// GET /v1/backup: served only with an admin token; it streams what the backup writes; a
// backup that fails before a byte is an error answer, one that fails midway ends the
// response early.
func TestBackupRoute(t *testing.T) {
	var fail atomic.Int32 // 0: succeed, 1: fail at once, 2: fail after some bytes
	backup := func(ctx context.Context, w io.Writer) (int64, error) {
		switch fail.Load() {
		case 1:
			return 0, context.DeadlineExceeded
		case 2:
			n, _ := w.Write([]byte(strings.Repeat("x", 100<<10)))
			return int64(n), errors.New("the disk failed")
		}
		n, err := io.WriteString(w, "the backup")
		return int64(n), err
	}
	open := newEnv(t, Options{Side: observer.SideHub, Backup: backup})
	open.wantError("GET", "/v1/backup", nil, http.StatusForbidden, CodeTokenRequired)

	e := newEnv(t, Options{Side: observer.SideHub, Backup: backup, Token: "s3cret"})
	status, b := e.do("GET", "/v1/backup", nil)
	if status != 200 || string(b) != "the backup" {
		t.Fatalf("backup: %d %q", status, b)
	}
	e.token = ""
	e.wantError("GET", "/v1/backup", nil, http.StatusUnauthorized, CodeUnauthorized)
	e.token = "s3cret"
	fail.Store(1)
	e.wantError("GET", "/v1/backup", nil, http.StatusGatewayTimeout, CodeTimeout)
	fail.Store(2)
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/backup", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Fatal("a backup that failed midway was answered as complete")
	}
	peer := newEnv(t, Options{Side: observer.SidePeer, Targets: &fakeTargets{list: map[string]namespace.TargetStatus{}}, Backup: backup, Token: "s3cret"})
	peer.wantError("GET", "/v1/backup", nil, http.StatusNotFound, CodeNotFound)
}

// POST /v1/namespaces/{id}/recreate: a namespace this hub does not have, from another
// hub's replica of it: 201 with its identity; the same again is 409; a body that is not a
// replica's whole state is 400.
func TestRecreateRoute(t *testing.T) {
	_, src := newRegistry(t, registry.RoleHub)
	c, err := src.Create(context.Background(), "default")
	if err != nil {
		t.Fatal(err)
	}
	l, err := src.Open(context.Background(), "default", c.NamespaceID)
	if err != nil {
		t.Fatal(err)
	}
	state, err := l.EncodeState(context.Background(), nil)
	l.Release()
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, Options{Side: observer.SideHub})
	path := "/v1/namespaces/" + c.NamespaceID + "/recreate"
	e.wantError("POST", path, nil, http.StatusBadRequest, CodeBadRequest)
	e.wantError("POST", path, []byte{9, 9, 9}, http.StatusBadRequest, CodeApplyFailed)
	status, b := e.do("POST", path+"?owner=default", state)
	m := decode[map[string]any](t, b)
	if status != 201 || m["namespaceId"] != c.NamespaceID || m["replicationId"] != c.Identity.ReplicationID {
		t.Fatalf("recreate: %d %s", status, b)
	}
	e.wantError("POST", path, state, http.StatusConflict, CodeNamespaceExists)
	if status, _ := e.do("GET", "/v1/namespaces/"+c.NamespaceID, nil); status != 200 {
		t.Fatalf("the re-created namespace: %d", status)
	}
}
