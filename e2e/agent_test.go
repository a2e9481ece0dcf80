package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// agent drives stock y-websocket providers in a Node process (e2e/yws/agent.mjs, with the
// pinned npm packages of e2e/yws): the real client an application would use.
type agent struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	nextID atomic.Uint64

	mu      sync.Mutex // guards waiting and dead
	waiting map[uint64]chan agentReply
	dead    error
}

type agentReply struct {
	ID     uint64          `json:"id"`
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result"`
	Error  string          `json:"error"`
}

// ywsDir is the directory of the JS editor clients and their npm packages.
func ywsDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "yws")
}

// requireJS skips the test loudly when node or the npm packages are missing (make js-deps
// installs them), and fails instead under NOMICORE_REQUIRE_ORACLE=1 (CI).
func requireJS(t *testing.T) {
	t.Helper()
	_, errNode := exec.LookPath("node")
	_, errMods := os.Stat(filepath.Join(ywsDir(), "node_modules", "y-websocket", "package.json"))
	if errNode == nil && errMods == nil {
		return
	}
	msg := fmt.Sprintf("the y-websocket client is not installed (node: %v; npm packages: %v): run make js-deps", errNode, errMods)
	if os.Getenv("NOMICORE_REQUIRE_ORACLE") == "1" {
		t.Fatal(msg)
	}
	t.Skip("SKIPPED LOUDLY: " + msg)
}

func startAgent(t *testing.T) *agent {
	t.Helper()
	requireJS(t)
	return startNodeAgent(t, ywsDir(), "agent.mjs")
}

// startNodeAgent runs `node ARGS…` in dir as an agent speaking agent.mjs's JSON lines.
func startNodeAgent(t *testing.T, dir string, args ...string) *agent {
	t.Helper()
	a := &agent{t: t, waiting: map[uint64]chan agentReply{}}
	a.cmd = exec.Command("node", args...)
	a.cmd.Dir = dir
	a.cmd.Stderr = &testLog{t: t, prefix: "agent: "}
	out, err := a.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if a.stdin, err = a.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var r agentReply
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				continue
			}
			a.mu.Lock()
			ch := a.waiting[r.ID]
			delete(a.waiting, r.ID)
			a.mu.Unlock()
			if ch != nil {
				ch <- r
			}
		}
		a.mu.Lock()
		a.dead = fmt.Errorf("the agent exited")
		for id, ch := range a.waiting {
			ch <- agentReply{ID: id, Error: "the agent exited"}
			delete(a.waiting, id)
		}
		a.mu.Unlock()
	}()
	t.Cleanup(func() {
		a.stdin.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			a.cmd.Process.Kill()
			<-done
		}
		a.cmd.Wait()
	})
	return a
}

// call runs op with args (a map merged into the request) and decodes its result.
func (a *agent) call(op string, args map[string]any, result any) error {
	id := a.nextID.Add(1)
	req := map[string]any{"id": id, "op": op}
	for k, v := range args {
		req[k] = v
	}
	line, err := json.Marshal(req)
	if err != nil {
		return err
	}
	ch := make(chan agentReply, 1)
	a.mu.Lock()
	if a.dead != nil {
		a.mu.Unlock()
		return a.dead
	}
	a.waiting[id] = ch
	_, err = a.stdin.Write(append(line, '\n'))
	a.mu.Unlock()
	if err != nil {
		return err
	}
	wait := 90 * time.Second // longer for an op told to wait longer (timeoutMs)
	if ms, ok := args["timeoutMs"].(int); ok && time.Duration(ms)*time.Millisecond+30*time.Second > wait {
		wait = time.Duration(ms)*time.Millisecond + 30*time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	select {
	case r := <-ch:
		if !r.OK {
			return fmt.Errorf("agent %s: %s", op, r.Error)
		}
		if result != nil {
			return json.Unmarshal(r.Result, result)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("agent %s: no answer within %v", op, wait)
	}
}

// must is call failing the test on an error.
func (a *agent) must(op string, args map[string]any, result any) {
	a.t.Helper()
	if err := a.call(op, args, result); err != nil {
		a.t.Fatal(err)
	}
}

// open starts an editor on a node's client listener and waits until it synced.
func (a *agent) open(name string, p *proc, ns, token string) {
	a.t.Helper()
	a.must("open", map[string]any{"name": name, "url": "ws://" + p.client + "/v1/yjs", "ns": ns, "token": token}, nil)
}

func (a *agent) insert(name string, index int, text string) {
	a.t.Helper()
	a.must("insert", map[string]any{"name": name, "index": index, "text": text}, nil)
}

func (a *agent) waitText(name, text string) {
	a.t.Helper()
	a.must("waitText", map[string]any{"name": name, "text": text, "timeoutMs": 30000}, nil)
}

func (a *agent) text(name string) string {
	a.t.Helper()
	var s string
	a.must("text", map[string]any{"name": name}, &s)
	return s
}

type agentEvent struct {
	Type   string `json:"type"`
	Reason string `json:"reason"`
	Code   int    `json:"code"`
	Status int    `json:"status"`
	Body   string `json:"body"`
}

func (a *agent) waitEvent(name, typ string) agentEvent {
	a.t.Helper()
	var ev agentEvent
	a.must("waitEvent", map[string]any{"name": name, "type": typ, "timeoutMs": 30000}, &ev)
	return ev
}

// testLog writes a process's stderr to the test log.
type testLog struct {
	t      *testing.T
	prefix string
}

func (l *testLog) Write(b []byte) (int, error) {
	l.t.Log(l.prefix + string(b))
	return len(b), nil
}
