package adminapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/nomicore/nomicore/observer"
)

// TestStateless: POST …/stateless hands the body to the editors' endpoint and answers how
// many editors it reached; bad bodies, unknown namespaces and a process without editors
// are refused.
func TestStateless(t *testing.T) {
	var got []string
	e := newEnv(t, Options{Side: observer.SideHub, Stateless: func(ns, payload string) int {
		got = append(got, ns+" "+payload)
		return 3
	}})
	c := e.create()
	status, b := e.do("POST", "/v1/namespaces/"+c.NamespaceID+"/stateless", []byte(`{"event":"saved"}`))
	if status != http.StatusOK || strings.TrimSpace(string(b)) != `{"delivered":3}` {
		t.Fatalf("%d %s", status, b)
	}
	if len(got) != 1 || got[0] != c.NamespaceID+` {"event":"saved"}` {
		t.Fatalf("sent %q", got)
	}
	e.wantError("POST", "/v1/namespaces/"+c.NamespaceID+"/stateless", []byte{0xff, 0xfe}, http.StatusBadRequest, CodeBadRequest)
	e.wantError("POST", "/v1/namespaces/"+c.NamespaceID+"/stateless", []byte(strings.Repeat("x", DefaultMaxStatelessBytes+1)),
		http.StatusRequestEntityTooLarge, CodeRequestTooLarge)
	e.wantError("POST", "/v1/namespaces/ns-00000000000000000000000000000000/stateless", []byte("x"), http.StatusNotFound, CodeNamespaceNotFound)
	none := newEnv(t, Options{Side: observer.SideHub})
	n := none.create()
	none.wantError("POST", "/v1/namespaces/"+n.NamespaceID+"/stateless", []byte("x"), http.StatusNotImplemented, CodeNotFound)
}
