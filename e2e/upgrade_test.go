//go:build unix

package e2e

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// previousRelease is the commit the upgrade tests start from: the last one before the store
// format carried a version and peers kept their count of local writes in their store — the
// code running where this one is deployed as an upgrade. Its binaries are built from the
// repository's own history, once, and kept under the system's temporary directory (the Go
// build cache keeps the rest).
const previousRelease = "29a8ed536764582faf07c564acfbb2a06ec1952f"

var oldRelease struct {
	once      sync.Once
	hub, peer string
	skip, err string
}

// releaseBinaries returns the hub and peer binaries of previousRelease, building them on
// first use. Without the repository's history (a shallow clone, an exported tree) the test
// is skipped loudly.
func releaseBinaries(t *testing.T) (hub, peer string) {
	t.Helper()
	oldRelease.once.Do(func() {
		if out, err := exec.Command("git", "-C", "..", "cat-file", "-e", previousRelease+"^{commit}").CombinedOutput(); err != nil {
			oldRelease.skip = fmt.Sprintf("the repository's history does not hold the previous release %s (a shallow clone?): %v %s",
				previousRelease[:12], err, bytes.TrimSpace(out))
			return
		}
		oldRelease.hub, oldRelease.peer, oldRelease.err = buildRelease(previousRelease)
	})
	if oldRelease.skip != "" {
		t.Skip("SKIPPED LOUDLY: " + oldRelease.skip)
	}
	if oldRelease.err != "" {
		t.Fatal(oldRelease.err)
	}
	return oldRelease.hub, oldRelease.peer
}

// buildRelease builds the hub and peer of commit into a directory of the system's temporary
// directory named after it, unless an earlier run did: the tree is taken with git archive,
// built with go build. A lock file keeps two test processes from building at once.
func buildRelease(commit string) (hub, peer, problem string) {
	dir := filepath.Join(os.TempDir(), "nomicore-release-"+commit[:12])
	hub, peer = filepath.Join(dir, "bin", "hub"), filepath.Join(dir, "bin", "peer")
	done := filepath.Join(dir, "bin", ".complete")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err.Error()
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", "", err.Error()
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", "", err.Error()
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(done); err == nil {
		return hub, peer, ""
	}
	src := filepath.Join(dir, "src")
	os.RemoveAll(src)
	archive := exec.Command("git", "-C", "..", "archive", "--format=tar", commit)
	var stderr bytes.Buffer
	archive.Stderr = &stderr
	tarball, err := archive.Output()
	if err != nil {
		return "", "", fmt.Sprintf("git archive %s: %v %s", commit, err, stderr.String())
	}
	if err := untar(bytes.NewReader(tarball), src); err != nil {
		return "", "", "extracting the previous release: " + err.Error()
	}
	start := time.Now()
	build := exec.Command("go", "build", "-buildvcs=false", "-o", filepath.Join(dir, "bin")+string(filepath.Separator), "./cmd/hub", "./cmd/peer")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", "", fmt.Sprintf("building the previous release %s: %v\n%s", commit[:12], err, out)
	}
	fmt.Fprintf(os.Stderr, "e2e: built the previous release %s in %v (kept in %s)\n", commit[:12], time.Since(start).Round(time.Second), dir)
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		return "", "", err.Error()
	}
	return hub, peer, ""
}

// untar extracts a tar stream of regular files and directories into dir.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(name, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("%q leaves the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(name, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755|0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			f.Close()
			if err != nil {
				return err
			}
		}
	}
}

// TestE2E_RollingUpgrade: a hub and two peers of the previous release, with data; under
// write load through both peers the hub is replaced by this version's (same data directory,
// same ports), then each peer, one at a time. Every write a peer acknowledged is on the hub
// and on both peers, and the upgraded nodes work with the stores the previous release
// wrote (a peer's count of local writes starts with the upgrade).
func TestE2E_RollingUpgrade(t *testing.T) {
	oldHub, oldPeer := releaseBinaries(t)
	c := newCluster(t)
	tokA := c.tokenFile("peer-a", c.token("peer-a"))
	tokB := c.tokenFile("peer-b", c.token("peer-b"))
	c.hub = &proc{t: t, name: "hub", admin: "http://" + freeAddr(t), client: freeAddr(t), log: filepath.Join(c.dir, "hub.log"), exe: oldHub}
	hub := c.startHub()
	ns := hub.api().createNamespace()
	hub.api().set(ns, map[string]any{"written by": "the previous release"})
	ns2 := hub.api().createNamespace()
	a := &proc{t: t, name: "peer-a", admin: "http://" + freeAddr(t), client: freeAddr(t), log: filepath.Join(c.dir, "peer-a.log"), exe: oldPeer}
	b := &proc{t: t, name: "peer-b", admin: "http://" + freeAddr(t), client: freeAddr(t), log: filepath.Join(c.dir, "peer-b.log"), exe: oldPeer}
	c.peers["peer-a"], c.peers["peer-b"] = a, b
	c.startPeer("peer-a", tokA, "--target", ns, "--target", ns2)
	c.startPeer("peer-b", tokB, "--target", ns)
	for _, p := range []*proc{a, b} {
		targetState(t, p, ns, "live")
	}
	targetState(t, a, ns2, "live")
	a.api().set(ns2, map[string]any{"second": "namespace"})

	load := startLoad(t, ns, a, b)
	time.Sleep(time.Second)
	hub.stop()
	hub.exe = ""
	c.startHub()
	for _, p := range []*proc{a, b} {
		targetState(t, p, ns, "live")
	}
	time.Sleep(500 * time.Millisecond)
	for _, p := range []*proc{a, b} {
		p.stop()
		p.exe = ""
		c.startPeer(p.name, map[*proc]string{a: tokA, b: tokB}[p])
		targetState(t, p, ns, "live")
		time.Sleep(500 * time.Millisecond)
	}
	acked := load.end()
	acked["written by"] = "the previous release"
	hasAll(t, ns, acked, 60*time.Second, hub, a, b)
	sameState(t, ns, 30*time.Second, hub, a, b)
	hasAll(t, ns2, map[string]any{"second": "namespace"}, 30*time.Second, hub, a)
	if v := a.api().metric(`nomicore_local_writes_unreplicated_bytes{side="peer"}`); v != 0 {
		t.Fatalf("after the upgrade peer-a counts %v bytes unreplicated", v)
	}
}

// TestE2E_Cluster_RollingUpgrade: a hub cluster of three nodes of the previous release and
// a peer of it, with data; under write load — through the peer and through every node's
// admin API — each node is replaced by this version's, one at a time (the next once the
// restarted one is up: while nodes of the previous release run beside it, it refuses
// writes, saying which nodes to upgrade), then the peer; every node is ready after the
// last. Every acknowledged write is on every node and on
// the peer.
func TestE2E_Cluster_RollingUpgrade(t *testing.T) {
	t.Parallel()
	oldHub, oldPeer := releaseBinaries(t)
	c := startHubCluster(&hubCluster{t: t, dir: t.TempDir(), peers: map[string]*proc{}, prepare: func(c *hubCluster) {
		for _, p := range c.hubs {
			p.exe = oldHub
		}
	}}, 3)
	ns := c.hubs[0].api().createNamespace()
	c.hubs[1].api().set(ns, map[string]any{"written by": "the previous release"})
	var urls []string
	for k := range c.repl {
		urls = append(urls, "--hub-url", c.url(k))
	}
	tokenFile := c.token("peer-a")
	a := &proc{t: t, name: "peer-a", admin: "http://" + freeAddr(t), log: filepath.Join(c.dir, "peer-a.log"), exe: oldPeer}
	c.peers["peer-a"] = a
	peerArgs := append(append([]string{"run", "--instance-id", "peer-a"}, urls...), append([]string{
		"--token-file", tokenFile, "--admin-listen", strings.TrimPrefix(a.admin, "http://"),
		"--data", filepath.Join(c.dir, "peer-a"), "--target", ns, "--client-listen", "off"}, fast...)...)
	a.args = peerArgs
	if err := a.start(); err != nil {
		t.Fatal(err)
	}
	targetState(t, a, ns, "live")

	load := startLoad(t, ns, append([]*proc{a}, c.hubs...)...)
	time.Sleep(time.Second)
	for i := range c.hubs {
		c.hubs[i].stop()
		c.hubs[i].exe = ""
		c.startHub(i)
		// Up with quorum: ready once no node of the previous release runs beside it, until
		// then refusing writes and saying which nodes to upgrade.
		eventually(t, 90*time.Second, c.hubs[i].name+" up, waiting only for the others' upgrade", func() error {
			status, b := c.hubs[i].api().do("GET", "/readyz", nil)
			if status == 200 || status == 503 && strings.Contains(string(b), "earlier version of Nomicore") {
				return nil
			}
			return fmt.Errorf("%d %s", status, b)
		})
		time.Sleep(500 * time.Millisecond)
	}
	for i := range c.hubs {
		c.waitReady(i, 90*time.Second)
	}
	a.stop()
	a.exe = ""
	if err := a.start(); err != nil {
		t.Fatal(err)
	}
	targetState(t, a, ns, "live")
	time.Sleep(500 * time.Millisecond)
	acked := load.end()
	acked["written by"] = "the previous release"
	hasAll(t, ns, acked, 60*time.Second, append([]*proc{a}, c.hubs...)...)
}
