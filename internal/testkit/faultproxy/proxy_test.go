package faultproxy

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo is an upstream that echoes every connection and reports when one of them ends.
type echo struct {
	ln    net.Listener
	ended chan struct{} // one value per connection that ended (its client closed or reset)
	wg    sync.WaitGroup

	mu    sync.Mutex
	conns []net.Conn
}

func newEcho(t *testing.T) *echo {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{ln: ln, ended: make(chan struct{}, 64)}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.conns = append(e.conns, c)
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				io.Copy(c, c)
				c.Close()
				e.ended <- struct{}{}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		e.mu.Lock()
		for _, c := range e.conns {
			c.Close()
		}
		e.mu.Unlock()
		e.wg.Wait()
	})
	return e
}

// closeAll closes the upstream's side of every connection.
func (e *echo) closeAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.conns {
		c.Close()
	}
}

func newProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// refusedConn checks that a connection to p is refused: reset at once, or its first read
// fails.
func refusedConn(t *testing.T, p *Proxy) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		return // reset before the dial returned
	}
	defer c.Close()
	c.Write([]byte("x"))
	readFails(t, c, 10*time.Second)
}

// roundTrip writes msg and reads it back, returning how long it took.
func roundTrip(t *testing.T, c net.Conn, msg []byte, timeout time.Duration) time.Duration {
	t.Helper()
	t0 := time.Now()
	c.SetDeadline(t0.Add(timeout))
	defer c.SetDeadline(time.Time{})
	go c.Write(msg) // concurrently: a capped link must not deadlock on full buffers
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("round trip of %d bytes: %v", len(msg), err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("the bytes came back changed")
	}
	return time.Since(t0)
}

func random(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// nothingArrives checks that no byte can be read from c within d.
func nothingArrives(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	var b [1]byte
	n, err := c.Read(b[:])
	if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes, %v; want nothing within %v", n, err, d)
	}
}

// readFails checks that a read on c fails (reset or end of stream) within d.
func readFails(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	_, err := c.Read(b[:])
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read: %v; want the connection ended", err)
	}
}

func TestForwardsBothWaysAndCounts(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.ln.Addr().String())
	c := dial(t, p)
	msg := random(300 << 10)
	roundTrip(t, c, msg, 10*time.Second)
	// The proxy counts what it forwarded once its write returns, which may be just after
	// the client has read the bytes: the counts are read until they are complete.
	deadline := time.Now().Add(10 * time.Second)
	for s := p.Stats(); s.BytesUp != int64(len(msg)) || s.BytesDown != int64(len(msg)) || s.Accepted != 1 || s.Active != 1; s = p.Stats() {
		if s.BytesUp > int64(len(msg)) || s.BytesDown > int64(len(msg)) || s.Accepted > 1 || time.Now().After(deadline) {
			t.Fatalf("stats %+v", s)
		}
		time.Sleep(time.Millisecond)
	}
	c.Close()
	select {
	case <-e.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream did not see the client's close")
	}
}

func TestLatencyDelaysEachDirectionAndSwitchesOff(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.ln.Addr().String())
	c := dial(t, p)
	const lat = 150 * time.Millisecond
	p.SetLatency(lat)
	if d := roundTrip(t, c, []byte("ping"), 10*time.Second); d < 2*lat {
		t.Fatalf("round trip took %v; want at least %v (latency each way)", d, 2*lat)
	}
	p.SetLatency(2 * time.Second)
	if d := roundTrip(t, c, []byte("ping"), 20*time.Second); d < 4*time.Second {
		t.Fatalf("round trip took %v after raising the latency; want at least 4s", d)
	}
	p.SetLatency(0)
	if d := roundTrip(t, c, []byte("ping"), 10*time.Second); d >= 4*time.Second {
		t.Fatalf("round trip took %v with the latency off", d)
	}
}

func TestBandwidthCapsTheLinkAndSwitchesOff(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.ln.Addr().String())
	c := dial(t, p)
	const rate = 64 << 10
	p.SetBandwidth(rate)
	// 128 KiB each way at 64 KiB/s: at least 2 s minus the first slice's head start.
	msg := random(128 << 10)
	if d, least := roundTrip(t, c, msg, 30*time.Second), time.Duration(float64(len(msg)-rate/20)/rate*float64(time.Second)); d < least {
		t.Fatalf("128 KiB took %v under a 64 KiB/s cap; want at least %v", d, least)
	}
	// Uncapped, 4 MiB goes through far faster than the 64 s the cap would take.
	p.SetBandwidth(0)
	if d := roundTrip(t, c, random(4<<20), 60*time.Second); d > 30*time.Second {
		t.Fatalf("4 MiB took %v with the cap off", d)
	}
}

func TestCutResetsCurrentConnectionsOnly(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.ln.Addr().String())
	a, b := dial(t, p), dial(t, p)
	roundTrip(t, a, []byte("a"), 10*time.Second)
	roundTrip(t, b, []byte("b"), 10*time.Second)
	if n := p.Cut(); n != 2 {
		t.Fatalf("Cut reset %d connections; want 2", n)
	}
	readFails(t, a, 10*time.Second)
	readFails(t, b, 10*time.Second)
	for range 2 {
		select {
		case <-e.ended:
		case <-time.After(10 * time.Second):
			t.Fatal("the upstream side of a cut connection stayed open")
		}
	}
	c := dial(t, p)
	roundTrip(t, c, []byte("after the cut"), 10*time.Second)
	if s := p.Stats(); s.Cut != 2 || s.Active != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestDownRefusesNewConnectionsUntilUp(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.ln.Addr().String())
	old := dial(t, p)
	roundTrip(t, old, []byte("before"), 10*time.Second)
	p.SetDown(true)
	refusedConn(t, p)
	roundTrip(t, old, []byte("a connection made before goes on"), 10*time.Second)
	p.SetDown(false)
	roundTrip(t, dial(t, p), []byte("up again"), 10*time.Second)
	if s := p.Stats(); s.Refused != 1 || s.Accepted != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestStallHoldsBytesInOrderUntilResume(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.ln.Addr().String())
	c := dial(t, p)
	roundTrip(t, c, []byte("flowing"), 10*time.Second)
	p.Stall()
	msg := random(200 << 10)
	go c.Write(msg)
	nothingArrives(t, c, 300*time.Millisecond)
	late := dial(t, p) // accepted during the stall, stalled too
	late.Write([]byte("late"))
	nothingArrives(t, late, 300*time.Millisecond)
	p.Resume()
	got := make([]byte, len(msg))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("after the stall: %v, bytes equal %v", err, bytes.Equal(got, msg))
	}
	got = make([]byte, 4)
	late.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(late, got); err != nil || string(got) != "late" {
		t.Fatalf("the connection made during the stall: %q, %v", got, err)
	}
}

func TestStallDelaysACloseBehindTheBytes(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.ln.Addr().String())
	c := dial(t, p)
	roundTrip(t, c, []byte("x"), 10*time.Second)
	p.Stall()
	e.closeAll() // the upstream closes; its end of stream waits behind the stall
	nothingArrives(t, c, 300*time.Millisecond)
	p.Resume()
	readFails(t, c, 10*time.Second)
}

func TestHalfOpenSilencesCurrentConnectionsWithoutTellingEitherEnd(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.ln.Addr().String())
	c := dial(t, p)
	roundTrip(t, c, []byte("x"), 10*time.Second)
	if n := p.HalfOpen(); n != 1 {
		t.Fatalf("HalfOpen took %d connections; want 1", n)
	}
	if _, err := c.Write([]byte("into the void")); err != nil {
		t.Fatalf("a write on a half-open connection fails: %v", err)
	}
	nothingArrives(t, c, 300*time.Millisecond)
	// The client gives up; the upstream is not told.
	c.Close()
	select {
	case <-e.ended:
		t.Fatal("the upstream learnt of the client's close through a half-open connection")
	case <-time.After(300 * time.Millisecond):
	}
	// A new connection works.
	roundTrip(t, dial(t, p), []byte("new"), 10*time.Second)
	// When the upstream gives up too, the half-open connection is gone.
	e.closeAll()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := p.Stats()
		if s.HalfOpen == 1 && s.Dropped >= int64(len("into the void")) && s.Accepted == 2 {
			p.mu.Lock()
			n := len(p.links)
			p.mu.Unlock()
			if n == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v: the half-open connection was not released", s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestHealSwitchesFaultsOff(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.ln.Addr().String())
	p.SetLatency(5 * time.Second)
	p.SetBandwidth(100)
	p.SetDown(true)
	p.Stall()
	p.Heal()
	if d := roundTrip(t, dial(t, p), random(64<<10), 10*time.Second); d > 5*time.Second {
		t.Fatalf("after Heal a round trip took %v", d)
	}
}

func TestUpstreamRefusedResetsTheClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	p := newProxy(t, addr)
	refusedConn(t, p)
	if s := p.Stats(); s.Refused != 1 || s.Accepted != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestCloseEndsEverythingDuringAStall(t *testing.T) {
	e := newEcho(t)
	p, err := New(e.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p)
	roundTrip(t, c, []byte("x"), 10*time.Second)
	p.Stall()
	go c.Write(random(4 << 20)) // fills the bounded queues; the reader then blocks
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hung on a stalled connection")
	}
	readFails(t, c, 10*time.Second)
}
