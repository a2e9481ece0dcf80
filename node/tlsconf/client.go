package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"time"
)

// CAFile is a file of PEM certificates a client trusts, re-read when it changes (size or
// modification time), so that a peer picks up a new CA bundle at its next connection. The
// zero path means the system roots. Its methods may be called concurrently.
type CAFile struct {
	path string

	mu    sync.Mutex // guards the fields below
	size  int64
	mod   time.Time
	pool  *x509.CertPool
	loads int // how many times the file was read: tests see a change taken up
}

// NewCAFile reads path (empty: the system roots). It fails on a file that cannot be read
// or holds no PEM certificate.
func NewCAFile(path string) (*CAFile, error) {
	f := &CAFile{path: path}
	if path == "" {
		return f, nil
	}
	if _, _, err := f.Pool(); err != nil {
		return nil, err
	}
	return f, nil
}

// Path is the file's path ("" for the system roots).
func (f *CAFile) Path() string { return f.path }

// Pool returns the certificates to trust (nil: the system roots) and whether they changed
// since the previous call. A file that changed but no longer loads keeps the previous pool,
// and the error says why.
func (f *CAFile) Pool() (pool *x509.CertPool, changed bool, err error) {
	if f.path == "" {
		return nil, false, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.path)
	if err != nil {
		return f.pool, false, fmt.Errorf("CA file: %w", err)
	}
	if f.pool != nil && fi.Size() == f.size && fi.ModTime().Equal(f.mod) {
		return f.pool, false, nil
	}
	pem, err := os.ReadFile(f.path)
	if err != nil {
		return f.pool, false, fmt.Errorf("CA file: %w", err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		return f.pool, false, fmt.Errorf("CA file %s holds no PEM certificate", f.path)
	}
	f.pool, f.size, f.mod = p, fi.Size(), fi.ModTime()
	f.loads++
	return p, f.loads > 1, nil
}

// ClientConfig is the tls.Config of a client that trusts roots (nil: the system roots):
// TLS 1.2 or later, HTTP/1.1 only (a WebSocket upgrade needs it; a proxy in front of the hub
// must not negotiate HTTP/2 for it).
func ClientConfig(roots *x509.CertPool) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}, RootCAs: roots}
}
