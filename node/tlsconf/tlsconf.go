// Package tlsconf is TLS for the binaries' listeners and for the peer's connection to a
// wss:// hub.
//
// Serving: Certs holds a certificate and its private key, read from two PEM files, and hands
// them to every TLS handshake (tls.Config.GetCertificate). Reload reads the files again and
// swaps the pair in one step; a pair that does not load (a half-written file, a key that does
// not match, an expired certificate) is refused and the current pair stays in service, so a
// rotation can never take the listeners down. Connections already open keep the certificate
// they were made with: a reload drops nothing. Listener wraps any net.Listener, so the same
// Certs serves every listener of a process (replication, admin, editors).
//
// Trusting: CAFile is the peer's trust for the hub's certificate — the PEM certificates of a
// file, re-read when the file changes — and ClientConfig builds the client side's tls.Config
// from it (the system roots when there is no file).
package tlsconf

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nomicore/nomicore/clock"
)

// Reload outcomes, as Options.OnReload receives them.
const (
	Changed = "changed" // a new certificate is in service
	Failed  = "failed"  // the files did not load; the previous certificate stays in service
)

// Options configure Certs.
type Options struct {
	// Clock tells the time for the validity check; nil means clock.Real().
	Clock clock.Clock
	// Logger receives one line per reload (subject, expiry, fingerprint; never the key).
	Logger *slog.Logger
	// OnReload, when set, is called after each reload that changed something or failed, with
	// Changed or Failed.
	OnReload func(outcome string)
}

// Certs is a certificate and key served to TLS handshakes, replaceable at run time. Its
// methods may be called concurrently.
type Certs struct {
	certFile, keyFile string
	opts              Options
	log               *slog.Logger

	cur atomic.Pointer[tls.Certificate] // the pair in service; its Leaf is set

	mu    sync.Mutex // serialises reloads; guards tried
	tried stamp      // the files as they were at the last load attempt
}

// stamp identifies a version of the two files without reading them: the file (a rename
// makes a new one), its size and its modification time.
type stamp struct{ cert, key os.FileInfo }

func (a stamp) equal(b stamp) bool {
	same := func(x, y os.FileInfo) bool {
		if x == nil || y == nil {
			return x == nil && y == nil
		}
		return os.SameFile(x, y) && x.Size() == y.Size() && x.ModTime().Equal(y.ModTime())
	}
	return same(a.cert, b.cert) && same(a.key, b.key)
}

// Load reads the certificate (PEM, the leaf first, then any intermediates) and its private
// key (PEM) and returns the Certs serving them. It fails on a pair that does not load, or a
// certificate that is not valid now.
func Load(certFile, keyFile string, opts Options) (*Certs, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("a TLS certificate needs both a certificate file and a key file")
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	c := &Certs{certFile: certFile, keyFile: keyFile, opts: opts, log: opts.Logger}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	st, _ := c.stat()
	pair, err := c.load()
	if err != nil {
		return nil, err
	}
	c.cur.Store(pair)
	c.tried = st
	return c, nil
}

// load reads and checks the pair.
func (c *Certs) load() (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(c.certFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(c.keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS key: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and key %s: %w", c.certFile, c.keyFile, err)
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("TLS certificate %s: %w", c.certFile, err)
		}
	}
	now := c.opts.Clock.Now()
	switch {
	case now.After(pair.Leaf.NotAfter):
		return nil, fmt.Errorf("TLS certificate %s expired on %s", c.certFile, pair.Leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(pair.Leaf.NotBefore):
		return nil, fmt.Errorf("TLS certificate %s is not valid before %s", c.certFile, pair.Leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return &pair, nil
}

func (c *Certs) stat() (stamp, error) {
	ci, err := os.Stat(c.certFile)
	if err != nil {
		return stamp{}, err
	}
	ki, err := os.Stat(c.keyFile)
	if err != nil {
		return stamp{}, err
	}
	return stamp{cert: ci, key: ki}, nil
}

// GetCertificate serves tls.Config.GetCertificate: the pair in service now.
func (c *Certs) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.cur.Load(), nil
}

// Leaf is the certificate in service.
func (c *Certs) Leaf() *x509.Certificate { return c.cur.Load().Leaf }

// Reload reads the files again. It reports whether a different certificate or key is now in
// service; on an error the previous pair stays in service. by says what asked ("signal",
// "file change", …) for the log line.
func (c *Certs) Reload(by string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, _ := c.stat()
	c.tried = st
	return c.reloadLocked(by)
}

// ReloadIfChanged reloads when either file changed (size or modification time) since the
// last attempt. A pair that failed to load is tried again only once a file changes again:
// a rotation that writes the certificate and the key one after the other succeeds at the
// second write.
func (c *Certs) ReloadIfChanged() (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := c.stat()
	if err != nil || st.equal(c.tried) {
		return false, nil // a file missing for a moment (mid-rotation) is not a change yet
	}
	c.tried = st
	return c.reloadLocked("file change")
}

func (c *Certs) reloadLocked(by string) (bool, error) {
	pair, err := c.load()
	if err != nil {
		leaf := c.cur.Load().Leaf
		c.log.Error("TLS certificate not reloaded; the current one stays in service", slog.String("by", by),
			slog.String("error", err.Error()), slog.String("serving", Describe(leaf)),
			slog.String("fix", "write a matching certificate and key (PEM) to --tls-cert and --tls-key, then send SIGHUP"))
		c.report(Failed)
		return false, err
	}
	old := c.cur.Load()
	if samePair(old, pair) {
		return false, nil
	}
	c.cur.Store(pair)
	c.log.Info("TLS certificate reloaded", slog.String("by", by), slog.String("subject", pair.Leaf.Subject.String()),
		slog.String("notAfter", pair.Leaf.NotAfter.UTC().Format(time.RFC3339)), slog.String("sha256", Fingerprint(pair.Leaf)),
		slog.String("previousSha256", Fingerprint(old.Leaf)))
	c.report(Changed)
	return true, nil
}

func (c *Certs) report(outcome string) {
	if c.opts.OnReload != nil {
		c.opts.OnReload(outcome)
	}
}

// samePair reports whether two pairs hold the same chain and key.
func samePair(a, b *tls.Certificate) bool {
	if len(a.Certificate) != len(b.Certificate) {
		return false
	}
	for i := range a.Certificate {
		if !bytes.Equal(a.Certificate[i], b.Certificate[i]) {
			return false
		}
	}
	ak, ok := a.PrivateKey.(interface{ Equal(crypto.PrivateKey) bool })
	return ok && ak.Equal(b.PrivateKey)
}

// Run reloads on every value of hup (SIGHUP) and, every poll (if positive), when a file
// changed; until ctx ends.
func (c *Certs) Run(ctx context.Context, clk clock.Clock, poll time.Duration, hup <-chan struct{}) {
	var tick <-chan struct{}
	if poll > 0 {
		t := clock.NewTicker(clk, poll)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			c.Reload("signal")
		case <-tick:
			c.ReloadIfChanged()
		}
	}
}

// ServerConfig is the tls.Config of a listener serving c: TLS 1.2 or later, HTTP/1.1 only
// (a WebSocket upgrade needs it, and every listener serves one or may).
func (c *Certs) ServerConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}, GetCertificate: c.GetCertificate}
}

// Listener wraps ln: every connection it accepts speaks TLS with the certificate in service
// at its handshake. An http.Server serving it sees *tls.Conn connections (r.TLS is set).
func (c *Certs) Listener(ln net.Listener) net.Listener { return tls.NewListener(ln, c.ServerConfig()) }

// Fingerprint is the SHA-256 of a certificate, 16 hex digits: enough to tell two apart in a
// log.
func Fingerprint(cert *x509.Certificate) string {
	if cert == nil {
		return ""
	}
	sum := sha256.Sum256(cert.Raw)
	return hex.EncodeToString(sum[:8])
}

// Describe is a certificate in a few words: subject, expiry and fingerprint.
func Describe(cert *x509.Certificate) string {
	if cert == nil {
		return "none"
	}
	return fmt.Sprintf("%s, expires %s, sha256 %s", cert.Subject, cert.NotAfter.UTC().Format(time.RFC3339), Fingerprint(cert))
}
