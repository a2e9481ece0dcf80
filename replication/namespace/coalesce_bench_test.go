package namespace

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nomicore/nomicore/yjs"
)

// textUpdates returns n updates as the fan-out of a shared Y.Text produces them: each of
// eight writers appends size bytes of text at the end, in turn.
func textUpdates(tb testing.TB, n, size int) [][]byte {
	tb.Helper()
	docs := make([]*yjs.Doc, 8)
	for i := range docs {
		docs[i] = yjs.NewDoc(yjs.WithClientID(uint32(100 + i)))
	}
	var out [][]byte
	for i := range n {
		d := docs[i%len(docs)]
		var u []byte
		unsub := d.OnUpdate(func(b []byte, _ any) { u = append([]byte(nil), b...) })
		t := d.GetText("t")
		if err := t.Insert(t.Len(), strings.Repeat("x", size), nil); err != nil {
			tb.Fatal(err)
		}
		unsub()
		out = append(out, u)
		for _, o := range docs {
			if o != d {
				yjs.ApplyUpdate(o, u, nil)
			}
		}
	}
	return out
}

// BenchmarkCoalesce measures yjs.MergeUpdates per merged update, for the thresholds in
// send.go: merging pays while it costs less than the frames it saves (a frame written and
// its UPDATE_ACK read, decoded and checked: 3–5 µs of hub CPU on this machine, measured
// with the relay benchmark and ws's BenchmarkThroughput1KiB).
func BenchmarkCoalesce(b *testing.B) {
	for _, size := range []int{20, 1 << 10, 16 << 10} {
		for _, k := range []int{2, 8, 32} {
			us := textUpdates(b, k, size)
			b.Run(fmt.Sprintf("bytes=%d/updates=%d", size, k), func(b *testing.B) {
				for b.Loop() {
					if _, err := yjs.MergeUpdates(us); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(k), "ns/update")
			})
		}
	}
}
