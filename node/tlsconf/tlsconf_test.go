package tlsconf_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/node/tlsconf"
	"github.com/nomicore/nomicore/node/tlsconf/tlstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type files struct{ cert, key string }

func newFiles(t *testing.T) files {
	dir := t.TempDir()
	return files{filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")}
}

// outcomes records OnReload calls.
type outcomes struct {
	mu  sync.Mutex
	got []string
}

func (o *outcomes) add(s string) { o.mu.Lock(); o.got = append(o.got, s); o.mu.Unlock() }
func (o *outcomes) list() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.got, ",")
}

// echoServer serves TLS with certs on a loopback listener and echoes lines.
func echoServer(t *testing.T, certs *tlsconf.Certs) string {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := certs.Listener(raw)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); io.Copy(c, c); c.Close() }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return raw.Addr().String()
}

// handshake connects with trust in pool and returns the connection and the certificate the
// server presented.
func handshake(t *testing.T, addr string, pool *x509.CertPool) (*tls.Conn, *x509.Certificate) {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, tlsconf.ClientConfig(pool))
	if err != nil {
		t.Fatalf("TLS handshake: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if p := c.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Fatalf("negotiated %q; want http/1.1", p)
	}
	return c, c.ConnectionState().PeerCertificates[0]
}

func echoLine(t *testing.T, c net.Conn, line string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || got != line+"\n" {
		t.Fatalf("echo: %q, %v", got, err)
	}
}

func TestReloadServesTheNewCertificateAndKeepsOpenConnections(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	f := newFiles(t)
	first := ca.Issue(t, "first", time.Time{}, time.Time{})
	first.Write(t, f.cert, f.key)
	var got outcomes
	certs, err := tlsconf.Load(f.cert, f.key, tlsconf.Options{OnReload: got.add})
	if err != nil {
		t.Fatal(err)
	}
	addr := echoServer(t, certs)
	old, presented := handshake(t, addr, ca.Pool())
	if !presented.Equal(first.Cert) {
		t.Fatalf("presented %s; want the first certificate", presented.Subject)
	}
	echoLine(t, old, "before")

	second := ca.Issue(t, "second", time.Time{}, time.Time{})
	second.Write(t, f.cert, f.key)
	if changed, err := certs.Reload("test"); !changed || err != nil {
		t.Fatalf("Reload = %v, %v; want a change", changed, err)
	}
	if _, presented := handshake(t, addr, ca.Pool()); !presented.Equal(second.Cert) {
		t.Fatalf("after the reload a new handshake got %s; want the second certificate", presented.Subject)
	}
	echoLine(t, old, "the connection made before the reload goes on")
	if !certs.Leaf().Equal(second.Cert) || got.list() != tlsconf.Changed {
		t.Fatalf("leaf %s, outcomes %q", certs.Leaf().Subject, got.list())
	}
	// The same files again: nothing changes.
	if changed, err := certs.Reload("test"); changed || err != nil {
		t.Fatalf("a reload of the same files: %v, %v", changed, err)
	}
}

func TestABadPairIsRefusedAndTheCurrentOneStays(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	f := newFiles(t)
	first := ca.Issue(t, "first", time.Time{}, time.Time{})
	first.Write(t, f.cert, f.key)
	var got outcomes
	certs, err := tlsconf.Load(f.cert, f.key, tlsconf.Options{OnReload: got.add})
	if err != nil {
		t.Fatal(err)
	}
	addr := echoServer(t, certs)
	other := ca.Issue(t, "other", time.Time{}, time.Time{})
	expired := ca.Issue(t, "expired", time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour))
	for name, write := range map[string]func(){
		"certificate without its key": func() { tlstest.WriteFile(t, f.cert, other.CertPEM) },
		"garbage key":                 func() { tlstest.WriteFile(t, f.key, []byte("not a key")) },
		"expired certificate":         func() { expired.Write(t, f.cert, f.key) },
		"missing key":                 func() { os.Remove(f.key) },
	} {
		first.Write(t, f.cert, f.key)
		write()
		if changed, err := certs.Reload("test"); changed || err == nil {
			t.Errorf("%s: Reload = %v, %v; want refused", name, changed, err)
		}
		if _, presented := handshake(t, addr, ca.Pool()); !presented.Equal(first.Cert) {
			t.Errorf("%s: the server now presents %s", name, presented.Subject)
		}
	}
	if got.list() != "failed,failed,failed,failed" {
		t.Fatalf("outcomes %q", got.list())
	}
}

func TestLoadRefusesWhatCannotServe(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	f := newFiles(t)
	good := ca.Issue(t, "good", time.Time{}, time.Time{})
	other := ca.Issue(t, "other", time.Time{}, time.Time{})
	future := ca.Issue(t, "future", time.Now().Add(time.Hour), time.Now().Add(48*time.Hour))
	for _, tc := range []struct {
		name, want string
		write      func()
	}{
		{"no key file", "needs both", nil},
		{"mismatched key", "private key does not match", func() { tlstest.WriteFile(t, f.cert, good.CertPEM); tlstest.WriteFile(t, f.key, other.KeyPEM) }},
		{"not yet valid", "not valid before", func() { future.Write(t, f.cert, f.key) }},
		{"missing", "no such file", func() { os.Remove(f.cert) }},
	} {
		keyFile := f.key
		if tc.write == nil {
			keyFile = ""
		} else {
			tc.write()
		}
		_, err := tlsconf.Load(f.cert, keyFile, tlsconf.Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error saying %q", tc.name, err, tc.want)
		}
	}
	// The expiry check uses the clock it is given.
	good.Write(t, f.cert, f.key)
	late := clock.NewFake(good.Cert.NotAfter.Add(time.Minute))
	if _, err := tlsconf.Load(f.cert, f.key, tlsconf.Options{Clock: late}); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("a certificate past its expiry: %v", err)
	}
}

// A rotation that writes the certificate, then the key: the first change fails (mismatched
// pair) and keeps the current certificate; the second succeeds.
func TestReloadIfChangedFollowsARotationInTwoWrites(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	f := newFiles(t)
	first := ca.Issue(t, "first", time.Time{}, time.Time{})
	first.Write(t, f.cert, f.key)
	var got outcomes
	certs, err := tlsconf.Load(f.cert, f.key, tlsconf.Options{OnReload: got.add})
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := certs.ReloadIfChanged(); changed || err != nil {
		t.Fatalf("unchanged files: %v, %v", changed, err)
	}
	second := ca.Issue(t, "second", time.Time{}, time.Time{})
	tlstest.WriteFile(t, f.cert, second.CertPEM)
	if changed, err := certs.ReloadIfChanged(); changed || err == nil {
		t.Fatalf("certificate written, key not yet: %v, %v; want refused", changed, err)
	}
	if changed, err := certs.ReloadIfChanged(); changed || err != nil {
		t.Fatalf("no further change: %v, %v; want no new attempt", changed, err)
	}
	tlstest.WriteFile(t, f.key, second.KeyPEM)
	if changed, err := certs.ReloadIfChanged(); !changed || err != nil {
		t.Fatalf("key written too: %v, %v; want the second certificate", changed, err)
	}
	if !certs.Leaf().Equal(second.Cert) || got.list() != "failed,changed" {
		t.Fatalf("leaf %s, outcomes %q", certs.Leaf().Subject, got.list())
	}
}

func TestRunReloadsOnSignalAndOnFileChange(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	f := newFiles(t)
	ca.Issue(t, "first", time.Time{}, time.Time{}).Write(t, f.cert, f.key)
	changed := make(chan string, 4)
	certs, err := tlsconf.Load(f.cert, f.key, tlsconf.Options{OnReload: func(o string) { changed <- o }})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Now())
	hup := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); certs.Run(ctx, clk, time.Second, hup) }()
	defer func() { cancel(); <-done }()
	wait := func(what string) {
		t.Helper()
		select {
		case o := <-changed:
			if o != tlsconf.Changed {
				t.Fatalf("%s: outcome %s", what, o)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no reload", what)
		}
	}

	// A signal reloads at once, even a change the poll has not seen.
	second := ca.Issue(t, "second", time.Time{}, time.Time{})
	second.Write(t, f.cert, f.key)
	hup <- struct{}{}
	wait("signal")
	if !certs.Leaf().Equal(second.Cert) {
		t.Fatal("the signal did not install the second certificate")
	}
	// A file change is picked up at the next poll.
	third := ca.Issue(t, "third", time.Time{}, time.Time{})
	third.Write(t, f.cert, f.key)
	if !clk.WaitForTimers(1, 10*time.Second) {
		t.Fatal("the poll timer is not armed")
	}
	clk.Advance(time.Second)
	wait("poll")
	if !certs.Leaf().Equal(third.Cert) {
		t.Fatal("the poll did not install the third certificate")
	}
}

func TestCAFileIsReadAgainWhenItChanges(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ca.pem")
	if _, err := tlsconf.NewCAFile(path); err == nil {
		t.Fatal("a missing CA file was accepted")
	}
	tlstest.WriteFile(t, path, []byte("no certificate here"))
	if _, err := tlsconf.NewCAFile(path); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("a CA file without certificates: %v", err)
	}
	a, b := tlstest.NewCA(t, "CA a"), tlstest.NewCA(t, "CA b")
	tlstest.WriteFile(t, path, a.PEM)
	f, err := tlsconf.NewCAFile(path)
	if err != nil {
		t.Fatal(err)
	}
	leafA, leafB := a.Issue(t, "a", time.Time{}, time.Time{}), b.Issue(t, "b", time.Time{}, time.Time{})
	verifies := func(pool *x509.CertPool, leaf *tlstest.Leaf) bool {
		_, err := leaf.Cert.Verify(x509.VerifyOptions{Roots: pool})
		return err == nil
	}
	pool, changed, err := f.Pool()
	if err != nil || changed || !verifies(pool, leafA) || verifies(pool, leafB) {
		t.Fatalf("first pool: changed %v, err %v", changed, err)
	}
	tlstest.WriteFile(t, path, append(append([]byte{}, a.PEM...), b.PEM...)) // a bundle: old and new CA
	pool, changed, err = f.Pool()
	if err != nil || !changed || !verifies(pool, leafA) || !verifies(pool, leafB) {
		t.Fatalf("bundle: changed %v, err %v", changed, err)
	}
	tlstest.WriteFile(t, path, []byte("broken"))
	pool, changed, err = f.Pool()
	if err == nil || changed || !verifies(pool, leafB) {
		t.Fatalf("a broken CA file: changed %v, err %v; want the previous pool kept and an error", changed, err)
	}
	if sys, err := tlsconf.NewCAFile(""); err != nil || sys.Path() != "" {
		t.Fatalf("system roots: %v", err)
	} else if pool, _, _ := sys.Pool(); pool != nil {
		t.Fatal("the system roots must be a nil pool (crypto/tls then uses the system's)")
	}
}
