package adminapi

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/yjs"
)

// BenchmarkLocalWrite: POST …/update through the admin handler on a hub namespace of 10,000
// map keys that no peer holds loaded: the lease cache keeps it loaded between requests, so a
// write costs its apply and the group commit's wait, not a reload of the document.
func BenchmarkLocalWrite(b *testing.B) {
	st, reg := newRegistry(b, registry.RoleHub)
	api, err := New(Options{Side: observer.SideHub, Registry: reg, Store: st})
	if err != nil {
		b.Fatal(err)
	}
	defer api.Close()
	c, _ := reg.Create(context.Background(), "default")
	l, _ := reg.Open(context.Background(), "default", c.NamespaceID)
	state, _ := l.EncodeState(context.Background(), nil)
	doc := yjs.NewDoc()
	yjs.ApplyUpdate(doc, state, nil)
	var big []byte
	un := doc.OnUpdate(func(u []byte, _ any) { big = append([]byte(nil), u...) })
	doc.Transact(nil, func(*yjs.Transaction) {
		for i := range 10000 {
			doc.GetMap("notes").Set(fmt.Sprint("k", i), "value value value")
		}
	})
	un()
	if _, err := l.WriteLocal(context.Background(), big); err != nil {
		b.Fatal(err)
	}
	l.Release()
	updates := make([][]byte, b.N)
	for i := range updates {
		var u []byte
		un := doc.OnUpdate(func(x []byte, _ any) { u = append([]byte(nil), x...) })
		doc.GetMap("notes").Set("hot", float64(i))
		un()
		updates[i] = u
	}
	path := "/v1/namespaces/" + c.NamespaceID + "/update"
	b.ResetTimer()
	for i := range b.N {
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "http://127.0.0.1"+path, bytes.NewReader(updates[i])))
		if rec.Code != http.StatusNoContent {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}
