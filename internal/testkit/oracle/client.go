package oracle

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultTimeout bounds every call made without a context deadline. A call that runs past
// it kills the node process (the next call starts a fresh one) and returns an error, so an
// oracle bug fails a test instead of hanging it.
const DefaultTimeout = 5 * time.Minute

// ErrClosed is returned by calls on a client whose process has been stopped by Run.
var ErrClosed = errors.New("oracle: client closed")

// Error is a request the oracle answered with an error (bad arguments, an update JS yjs
// rejects, an unknown op). The node process stays usable.
type Error struct {
	Op      string
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("oracle %s: %s", e.Op, e.Message) }

// Client sends requests to the oracle process. It is safe for concurrent use: requests are
// written one at a time and matched to their responses by id; node answers them in order.
type Client struct {
	dir    string
	nextID atomic.Uint64

	mu     sync.Mutex // guards p and closed
	p      *proc      // the running process; nil before the first call and after it died
	closed bool
}

func newClient(dir string) *Client { return &Client{dir: dir} }

// Call sends op with args (any JSON-encodable value, nil for none) and decodes the result
// into result (a pointer, or nil to discard it), within DefaultTimeout.
func (c *Client) Call(op string, args, result any) error {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	return c.CallContext(ctx, op, args, result)
}

// CallContext is Call bounded by ctx. When ctx ends first, the process is killed (a fresh one
// serves the next call) and the error wraps ctx.Err().
func (c *Client) CallContext(ctx context.Context, op string, args, result any) error {
	id := c.nextID.Add(1)
	line, err := json.Marshal(request{ID: id, Op: op, Args: args})
	if err != nil {
		return fmt.Errorf("oracle %s: encoding the request: %w", op, err)
	}
	return c.roundTrip(ctx, op, id, append(line, '\n'), result)
}

// roundTrip writes one request line (which must carry id) and waits for its response.
func (c *Client) roundTrip(ctx context.Context, op string, id uint64, line []byte, result any) error {
	p, err := c.process()
	if err != nil {
		return err
	}
	ch, err := p.send(id, line)
	if err != nil {
		return fmt.Errorf("oracle %s: %w", op, err)
	}
	var r reply
	select {
	case r = <-ch:
	case <-ctx.Done():
		p.kill()
		return fmt.Errorf("oracle %s: no answer, node process killed: %w", op, ctx.Err())
	}
	switch {
	case r.err != nil:
		return fmt.Errorf("oracle %s: %w", op, r.err)
	case !r.OK:
		return &Error{Op: op, Message: r.Error}
	case result == nil:
		return nil
	}
	if err := json.Unmarshal(r.Result, result); err != nil {
		return fmt.Errorf("oracle %s: decoding the result: %w", op, err)
	}
	return nil
}

// process returns the running process, starting one if there is none or the last one died.
func (c *Client) process() (*proc, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if c.p != nil && !c.p.dead() {
		return c.p, nil
	}
	if c.p != nil {
		c.p.wait()
	}
	p, err := startProc(c.dir)
	if err != nil {
		c.p = nil
		return nil, err
	}
	c.p = p
	return p, nil
}

// close stops the process (stdin closed, then killed if it has not exited within a few
// seconds) and waits for its goroutines. Later calls return ErrClosed. Idempotent.
func (c *Client) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.p == nil {
		return nil
	}
	return c.p.stop(5 * time.Second)
}

type request struct {
	ID   uint64 `json:"id"`
	Op   string `json:"op"`
	Args any    `json:"args,omitempty"`
}

// reply is one response line, or err when the process ended before answering.
type reply struct {
	ID     *uint64         `json:"id"`
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result"`
	Error  string          `json:"error"`
	err    error
}

// proc is one node process. readLoop owns stdout and reaps the process; stderrLoop keeps the
// tail of stderr for error messages.
type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser

	wmu sync.Mutex // serializes writes to stdin

	mu      sync.Mutex            // guards pending and err
	pending map[uint64]chan reply // requests written and not answered
	err     error                 // why the process is gone; nil while it runs

	stderr     tail
	stderrDone chan struct{} // closed when stderrLoop returns
	done       chan struct{} // closed when readLoop has reaped the process
}

func startProc(dir string) (*proc, error) {
	cmd := exec.Command("node", "--expose-gc", "oracle.mjs")
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("oracle: starting node: %w", err)
	}
	p := &proc{
		cmd:        cmd,
		stdin:      stdin,
		pending:    make(map[uint64]chan reply),
		stderrDone: make(chan struct{}),
		done:       make(chan struct{}),
	}
	go p.stderrLoop(stderr)
	go p.readLoop(stdout)
	return p, nil
}

// send registers id and writes line. The channel receives exactly one reply.
func (p *proc) send(id uint64, line []byte) (<-chan reply, error) {
	ch := make(chan reply, 1)
	p.mu.Lock()
	if p.err != nil {
		err := p.err
		p.mu.Unlock()
		return nil, err
	}
	p.pending[id] = ch
	p.mu.Unlock()

	p.wmu.Lock()
	_, err := p.stdin.Write(line)
	p.wmu.Unlock()
	if err != nil {
		// The process is going away; readLoop answers every pending request, this one too.
		p.kill()
	}
	return ch, nil
}

// readLoop routes response lines to their callers until stdout ends, then reaps the process
// and fails the requests still waiting.
func (p *proc) readLoop(stdout io.Reader) {
	defer close(p.done)
	r := bufio.NewReaderSize(stdout, 1<<20)
	var readErr error
	for {
		line, err := r.ReadBytes('\n') // unbounded: responses can be megabytes long
		if len(bytes.TrimSpace(line)) > 0 {
			p.route(line)
		}
		if err != nil {
			readErr = err
			break
		}
	}
	<-p.stderrDone
	waitErr := p.cmd.Wait()

	p.mu.Lock()
	defer p.mu.Unlock()
	cause := fmt.Errorf("node process ended (%v; wait: %v); stderr: %q", readErr, waitErr, p.stderr.String())
	if p.err == nil {
		p.err = cause
	}
	for id, ch := range p.pending {
		ch <- reply{err: p.err}
		delete(p.pending, id)
	}
}

func (p *proc) route(line []byte) {
	var r reply
	if err := json.Unmarshal(line, &r); err != nil || r.ID == nil {
		p.stderr.Write([]byte(fmt.Sprintf("\n[unroutable response: %.200s]\n", line)))
		return
	}
	p.mu.Lock()
	ch, ok := p.pending[*r.ID]
	delete(p.pending, *r.ID)
	p.mu.Unlock()
	if ok {
		ch <- r
	}
}

func (p *proc) stderrLoop(stderr io.Reader) {
	defer close(p.stderrDone)
	_, _ = io.Copy(&p.stderr, stderr)
}

func (p *proc) dead() bool {
	select {
	case <-p.done:
		return true
	default:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err != nil
}

// kill ends the process; readLoop then reaps it and fails the pending requests.
func (p *proc) kill() {
	p.mu.Lock()
	if p.err == nil {
		p.err = errors.New("node process killed")
	}
	p.mu.Unlock()
	_ = p.cmd.Process.Kill()
}

// wait blocks until readLoop has reaped the process.
func (p *proc) wait() { <-p.done }

// stop closes stdin so node exits by itself, kills it after grace, and waits.
func (p *proc) stop(grace time.Duration) error {
	p.mu.Lock()
	if p.err == nil {
		p.err = ErrClosed
	}
	p.mu.Unlock()
	p.wmu.Lock()
	_ = p.stdin.Close()
	p.wmu.Unlock()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("node did not exit within %v of stdin closing; killed", grace)
	}
}

// tail keeps the last 16 KiB written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailMax = 16 << 10

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - tailMax; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
