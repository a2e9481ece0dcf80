package adminapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/nomicore/nomicore/internal/testkit"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/yjs"
)

// TestDocJSONStreamsAsMarshal: GET …/doc writes the document as it encodes it, with the
// bytes json.Marshal gives (sorted keys, the same escapes, long strings cut only at a rune's
// start); a value json.Marshal refuses is a 500 before anything is written.
func TestDocJSONStreamsAsMarshal(t *testing.T) {
	long := strings.Repeat("aé€😀<>&\u2028\"\\\n\x01", streamPiece/7) + "x\xffy"
	v := map[string]any{
		"text": long, "n": 1.5, "big": 1e21, "t": true, "nil": nil,
		"list": []any{"a", 2.0, map[string]any{"z": "<z>", "a": []any{}}, []byte{1, 2}},
		"":     map[string]any{},
	}
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	writeDocJSON(rec, http.StatusOK, v)
	if got := rec.Body.Bytes(); !bytes.Equal(got, append(want, '\n')) || rec.Code != 200 {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("differs from json.Marshal at byte %d of %d/%d", i, len(got), len(want))
	}
	rec = httptest.NewRecorder()
	writeDocJSON(rec, http.StatusOK, map[string]any{"a": []any{math.NaN()}})
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), CodeInternal) {
		t.Fatalf("NaN: %d %s", rec.Code, rec.Body)
	}
}

// TestLargeDocumentReads: a local write up to the largest local write (4 MiB by default
// with chunked transfers) is taken, a larger one is 413 naming the limit and its flag; GET
// …/update answers one encoding of the document and …/doc its rendering, streamed as JSON
// (never a second whole copy as text).
func TestLargeDocumentReads(t *testing.T) {
	const limit = 4 << 20
	e := newEnv(t, Options{Side: observer.SideHub, MaxUpdateBytes: limit, MaxUpdateFlag: "--max-chunked-update-bytes"})
	c := e.create()
	path := "/v1/namespaces/" + c.NamespaceID

	// 16 MiB of text in four writes of 4 MiB less a little.
	doc := yjs.NewDoc()
	var last []byte
	doc.OnUpdate(func(u []byte, _ any) { last = u })
	text := doc.GetText("body")
	piece := strings.Repeat("0123456789abcdef", (limit-1024)/16)
	for i := range 4 {
		must(t, text.Insert(i*len(piece), piece, nil))
		if status, b := e.do("POST", path+"/update", last); status != http.StatusNoContent {
			t.Fatalf("write %d of %d bytes: %d %s", i, len(last), status, b)
		}
	}
	size := 4 * len(piece)
	must(t, text.Insert(0, strings.Repeat("x", limit), nil))
	status, b := e.do("POST", path+"/update", last)
	var er struct{ Code, Message string }
	_ = json.Unmarshal(b, &er)
	if status != http.StatusRequestEntityTooLarge || er.Code != CodeUpdateTooLarge ||
		!strings.Contains(er.Message, "4194304") || !strings.Contains(er.Message, "--max-chunked-update-bytes") {
		t.Fatalf("an update over the limit: %d %s", status, b)
	}

	// The fewest bytes allocated over three requests: the store's background compaction of
	// the writes above allocates too, once.
	measure := func(route string) (n int64, alloc uint64) {
		alloc = math.MaxUint64
		for range 3 {
			m, a := measure1(t, e, path+route)
			n, alloc = m, min(alloc, a)
		}
		return n, alloc
	}
	n, alloc := measure("/update")
	if n < int64(size) || alloc > uint64(3*size) {
		t.Fatalf("GET /update: %d bytes answered, %d allocated for a %d-byte document", n, alloc, size)
	}
	// The JSON text is never held whole: it reaches the connection in small writes.
	w := &writeRecorder{header: http.Header{}}
	req := httptest.NewRequest("GET", path+"/doc", nil)
	req.Host = "127.0.0.1" // a token-less API answers loopback names only
	e.api.ServeHTTP(w, req)
	var got struct{ Body string }
	if err := json.Unmarshal(w.body.Bytes(), &got); err != nil || len(got.Body) != size || w.largest > 64<<10 {
		t.Fatalf("GET /doc: %v, %d characters of text, largest write %d bytes", err, len(got.Body), w.largest)
	}
}

// writeRecorder is a ResponseWriter that keeps the body and the largest single write.
type writeRecorder struct {
	header  http.Header
	body    bytes.Buffer
	largest int
}

func (w *writeRecorder) Header() http.Header { return w.header }
func (w *writeRecorder) WriteHeader(int)     {}
func (w *writeRecorder) Write(b []byte) (int, error) {
	w.largest = max(w.largest, len(b))
	return w.body.Write(b)
}

func measure1(t *testing.T, e *env, url string) (int64, uint64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	req, err := http.NewRequest("GET", e.srv.URL+url, nil)
	must(t, err)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	n, err := io.Copy(io.Discard, bufio.NewReaderSize(resp.Body, 64<<10))
	resp.Body.Close()
	must(t, err)
	runtime.ReadMemStats(&after)
	return n, after.TotalAlloc - before.TotalAlloc
}

// TestTargetProgress: while a snapshot or catch-up is received in chunks, the target and
// the namespace status carry {bytesReceived, totalBytes, kind}; otherwise no progress key.
func TestTargetProgress(t *testing.T) {
	targets := &fakeTargets{list: map[string]namespace.TargetStatus{}}
	e := newEnv(t, Options{Side: observer.SidePeer, Targets: targets})
	ns := "ns-0123456789abcdef0123456789abcdef"
	if status, _ := e.do("POST", "/v1/targets", []byte(`{"namespaceId":"`+ns+`"}`)); status != 201 {
		t.Fatal(status)
	}
	if _, b := e.do("GET", "/v1/targets", nil); strings.Contains(string(b), "progress") {
		t.Fatalf("progress without a transfer: %s", b)
	}
	targets.mu.Lock()
	ts := targets.list[ns]
	ts.State = observer.ChannelBootstrapping
	ts.Progress = &namespace.TransferProgress{Kind: protocol.KindSnapshot, BytesReceived: 1 << 20, TotalBytes: 32 << 20}
	targets.list[ns] = ts
	targets.mu.Unlock()
	const want = `"progress":{"bytesReceived":1048576,"totalBytes":33554432,"kind":"snapshot"}`
	if _, b := e.do("GET", "/v1/targets", nil); !strings.Contains(string(b), want) {
		t.Fatalf("targets: %s", b)
	}
	if _, b := e.do("GET", "/v1/namespaces/"+ns, nil); !strings.Contains(string(b), want) {
		t.Fatalf("status: %s", b)
	}
	targets.mu.Lock()
	ts.Progress.Kind = protocol.KindLiveUpdate
	targets.mu.Unlock()
	if _, b := e.do("GET", "/v1/targets", nil); !strings.Contains(string(b), `"kind":"update"`) {
		t.Fatalf("targets: %s", b)
	}
}

// must fails the test at once when err is not nil.
var must = testkit.Must
