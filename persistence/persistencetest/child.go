package persistencetest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Child is the writer process of a crash test: the running test binary started again, with
// an environment variable its TestMain turns into the writer, to be killed with SIGKILL at a
// moment the test picks. The writer reports to the test with Say.
type Child struct {
	// Lines delivers the child's standard output line by line; it is closed when the child's
	// output ends. Read it to its end before WaitKilled: lines left unread are dropped.
	Lines <-chan string

	cmd    *exec.Cmd
	stderr bytes.Buffer
	killed bool
	waited bool
}

// StartChild starts the test binary again, running no test, with env added to its
// environment. At cleanup a child still running is killed and reaped.
func StartChild(t testing.TB, env ...string) *Child {
	t.Helper()
	c := &Child{cmd: exec.Command(os.Args[0], "-test.run=^$")}
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stderr = &c.stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	c.Lines = lines
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		if !c.waited {
			c.Kill()
			for range c.Lines {
			}
			_ = c.cmd.Wait()
		}
	})
	return c
}

// Kill sends the child SIGKILL (once).
func (c *Child) Kill() {
	if !c.killed {
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
		c.killed = true
	}
}

// WaitKilled waits for the child to end and fails t unless Kill ended it.
func (c *Child) WaitKilled(t testing.TB) {
	t.Helper()
	for range c.Lines {
	}
	err := c.cmd.Wait()
	c.waited = true
	ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !c.killed || !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the child was not ended by SIGKILL (%v): %s", err, strings.TrimSpace(c.stderr.String()))
	}
}

var sayMu sync.Mutex

// Say is the child's report to the test: one line on standard output, in one write, so that
// a kill leaves it whole or absent. It is safe for concurrent use.
func Say(format string, args ...any) {
	sayMu.Lock()
	defer sayMu.Unlock()
	os.Stdout.Write(fmt.Appendf(nil, format+"\n", args...))
}

// NoteFlushed reads a child's report "flushed <i> <n>" (namespace i is durable through n, as
// the child counts) into durable: durable[i] is raised to n. Other lines, and an i outside
// durable, change nothing.
func NoteFlushed(durable []uint64, line string) {
	var i int
	var n uint64
	if _, err := fmt.Sscanf(line, "flushed %d %d", &i, &n); err == nil && i >= 0 && i < len(durable) {
		durable[i] = max(durable[i], n)
	}
}
