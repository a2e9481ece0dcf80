//go:build linux

package e2e

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var demoEditorURL = regexp.MustCompile(`peer-a: (http://127\.0\.0\.1:[0-9]+/edit/ns-[0-9a-f]{32}\?token=[A-Za-z0-9_-]+)`)

// waitDemo waits until the demo's output contains want, and returns peer-a's editor page
// address it printed; it fails the test if the demo ends first.
func waitDemo(t *testing.T, out interface{ String() string }, exited <-chan error, want string) string {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute) // it builds the binaries first
	for !strings.Contains(out.String(), want) {
		select {
		case err := <-exited:
			t.Fatalf("the demo ended (%v) before saying %q:\n%s", err, want, out.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo did not say %q:\n%s", want, out.String())
		}
	}
	m := demoEditorURL.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("the demo printed no editor page for peer-a:\n%s", out.String())
	}
	return m[1]
}

// pageAnswers fails the test unless the editor page at url is served.
func pageAnswers(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("the editor page the demo printed: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "Nomicore editor") {
		t.Fatalf("the editor page the demo printed: %d %.200s", resp.StatusCode, b)
	}
}

// pageGone fails the test while the editor page at url is still served.
func pageGone(t *testing.T, url string) {
	t.Helper()
	if resp, err := http.Get(url); err == nil {
		resp.Body.Close()
		t.Fatalf("the demo ended, yet its editor page answers %d", resp.StatusCode)
	}
}

// The editor pages `make demo` prints can be opened: once the peers converged, the demo
// keeps what it started running — with KEEP=1 until SIGTERM or Ctrl-C, on a terminal until
// Enter — then stops it all and exits 0. (Without a terminal, as in CI, it stops at once:
// `make demo` in .ci/run.)
func TestE2E_MakeDemoKeepsRunning(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}

	t.Run("KEEP=1", func(t *testing.T) {
		var out lockedBuffer
		cmd := exec.Command("./scripts/demo.sh") // what make demo KEEP=1 runs
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "KEEP=1")
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = childAttr()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
		})
		url := waitDemo(t, &out, exited, "Ctrl-C stops it.")
		time.Sleep(time.Second)
		pageAnswers(t, url)
		syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) // Ctrl-C: the terminal signals the foreground group
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("the demo with KEEP=1 after Ctrl-C: %v\n%s", err, out.String())
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("the demo with KEEP=1 did not end after Ctrl-C:\n%s", out.String())
		}
		pageGone(t, url)
	})

	t.Run("OnATerminal", func(t *testing.T) {
		ptm, pts, err := openPTY()
		if err != nil {
			t.Skipf("no pseudo-terminal here: %v", err)
		}
		defer ptm.Close()
		cmd := exec.Command("make", "--no-print-directory", "demo")
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "KEEP=")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pts.Close()
		var out lockedBuffer
		copied := make(chan struct{})
		go func() { // the terminal's output; the read ends when the last process closes it
			defer close(copied)
			io.Copy(&out, ptm)
		}()
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
		})
		url := waitDemo(t, &out, exited, "Press Enter to stop it.")
		time.Sleep(time.Second)
		pageAnswers(t, url)
		if _, err := ptm.Write([]byte("\r")); err != nil { // Enter
			t.Fatal(err)
		}
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("make demo after Enter: %v\n%s", err, out.String())
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("make demo did not end after Enter:\n%s", out.String())
		}
		pageGone(t, url)
	})
}
