package cluster

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestCluster_NodeNamesListsEveryNode: the node list compaction takes the nodes'
// acknowledged positions from (and the check for older nodes reads) names every node of
// the cluster, from any node, including one registered after the others.
func TestCluster_NodeNamesListsEveryNode(t *testing.T) {
	t.Parallel()
	tc := newTestCluster(t, 3, nil)
	simulateNode(t, tc.nodes[0].node, "later", logFormat, false)
	want := []string{"later", "n1", "n2", "n3"}
	for _, tn := range tc.nodes {
		eventually(t, 10*time.Second, tn.name+" lists every node", func() error {
			got, err := tn.node.nodeNames(ctxT(t, 5*time.Second))
			if err != nil {
				return err
			}
			if !slices.Equal(got, want) {
				return fmt.Errorf("%s lists %v, want %v", tn.name, got, want)
			}
			return nil
		})
	}
}
