package e2e

import (
	"strings"
	"testing"
)

// A 1 MiB paste on a peer reaches the editors of the hub and of another peer. A live update
// above maxUpdateBytes (512 KiB) crosses nodes only as a chunked transfer (UPDATE_CHUNK, the
// v2 generation the binaries run by default).
func TestE2E_Editors_LargePasteAcrossNodes(t *testing.T) {
	ag := startAgent(t)
	_, ns, hub, a, b, tok := editorCluster(t)
	ag.open("a", a, ns, tok["peer-a"])
	ag.open("b", b, ns, tok["peer-b"])
	ag.open("h", hub, ns, tok["hub"])
	paste := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	ag.insert("a", 0, paste)
	for _, e := range []string{"h", "b"} {
		ag.must("waitLength", map[string]any{"name": e, "length": len(paste), "timeoutMs": 60000}, nil)
	}
	waitBody(t, ns, paste, hub, a, b)
}
