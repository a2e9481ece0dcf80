package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/node/cli"
	"github.com/nomicore/nomicore/node/tlsconf"
	"github.com/nomicore/nomicore/replication/ws"
)

// TLSFlags are the TLS flags of both serving commands: one certificate and key for every
// listener of the process.
type TLSFlags struct {
	Cert, Key string
	Poll      time.Duration
}

func (t *TLSFlags) register(f *cli.Flags) {
	f.Define("TLS", func() {
		f.StringVar(&t.Cert, "tls-cert", "", "`FILE` holding the TLS certificate (PEM: the server's certificate first, then intermediates) every listener serves: "+
			"replication (wss://), admin (https://) and editors; with --tls-key. Reloaded on SIGHUP and when the file changes, without dropping connections")
		f.StringVar(&t.Key, "tls-key", "", "`FILE` holding the TLS certificate's private key (PEM); with --tls-cert")
		f.DurationVar(&t.Poll, "tls-poll", 5*time.Second, "how often --tls-cert and --tls-key are checked for changes (0: only on SIGHUP)")
	})
}

func (t *TLSFlags) check() error {
	switch {
	case t.Cert != "" && t.Key == "":
		return errors.New("--tls-cert needs --tls-key (the certificate's private key)")
	case t.Key != "" && t.Cert == "":
		return errors.New("--tls-key needs --tls-cert")
	case t.Poll < 0:
		return errors.New("--tls-poll must not be negative")
	}
	return nil
}

// Enabled reports whether a certificate was given.
func (t *TLSFlags) Enabled() bool { return t.Cert != "" }

// Load reads the certificate and key (nil, nil without --tls-cert), logging and counting
// every reload in o (nomicore_tls_reloads_total) and exposing the expiry of the certificate
// in service (nomicore_tls_certificate_expiry_timestamp_seconds).
func (t *TLSFlags) Load(o *Observability, log *slog.Logger) (*tlsconf.Certs, error) {
	if !t.Enabled() {
		return nil, nil
	}
	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nomicore_tls_reloads_total",
		Help: "Reloads of the TLS certificate, by outcome (changed; failed: the previous certificate stays in service)."},
		[]string{"side", "reason"})
	certs, err := tlsconf.Load(t.Cert, t.Key, tlsconf.Options{Logger: log,
		OnReload: func(outcome string) { reloads.WithLabelValues(string(o.Side), outcome).Inc() }})
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %v", err)
	}
	expiry := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nomicore_tls_certificate_expiry_timestamp_seconds",
		Help:        "When the TLS certificate in service expires (Unix time): alert well before it.",
		ConstLabels: prometheus.Labels{"side": string(o.Side)}},
		func() float64 { return float64(certs.Leaf().NotAfter.Unix()) })
	if err := errors.Join(o.Registry.Register(reloads), o.Registry.Register(expiry)); err != nil {
		return nil, err
	}
	log.Info("TLS on every listener", slog.String("certificate", tlsconf.Describe(certs.Leaf())))
	return certs, nil
}

// ListenTLS is Listen, serving TLS with certs when certs is not nil: every listener of a
// binary (replication, admin, editors) opens this way, so one certificate serves them all.
func ListenTLS(flagName, addr string, certs *tlsconf.Certs) (net.Listener, error) {
	ln, err := Listen(flagName, addr)
	if err != nil || certs == nil {
		return ln, err
	}
	return certs.Listener(ln), nil
}

// Scheme is the URL scheme of a listener: base ("http" or "ws") with an "s" under TLS.
func Scheme(base string, certs *tlsconf.Certs) string {
	if certs != nil {
		return base + "s"
	}
	return base
}

// WatchTLS reloads certs on SIGHUP and, every poll, when its files changed; it returns the
// shutdown step that stops it (a step with nothing to stop when certs is nil).
func WatchTLS(certs *tlsconf.Certs, clk clock.Clock, poll time.Duration, sigs *Signals) func(context.Context) error {
	if certs == nil {
		return func(context.Context) error { return nil }
	}
	hup := sigs.Subscribe()
	return Go(func(ctx context.Context) { certs.Run(ctx, clk, poll, hup) })
}

// Subscribe returns a channel that receives a value on every SIGHUP (coalesced when the
// receiver is behind), besides the hup channel of WaitForStop. Call it before WaitForStop.
func (s *Signals) Subscribe() <-chan struct{} {
	ch := make(chan struct{}, 1)
	s.subsMu.Lock()
	s.subs = append(s.subs, ch)
	s.subsMu.Unlock()
	return ch
}

// notifySubscribers passes a SIGHUP on to every subscriber, without blocking.
func (s *Signals) notifySubscribers() {
	s.subsMu.Lock()
	defer s.subsMu.Unlock()
	for _, ch := range s.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// signalSubs is embedded in Signals: the extra receivers of SIGHUP.
type signalSubs struct {
	subsMu sync.Mutex // guards subs
	subs   []chan struct{}
}

// HubDialerCA returns the peer's WebSocket dialer trusting the certificates of ca (nil or an
// empty path: the system roots), speaking HTTP/1.1 only (the upgrade needs it; a TLS proxy
// must not negotiate HTTP/2 for it). The CA file is checked before every dial and read again
// when it changed, so a new CA bundle takes effect at the next connection without a restart.
func HubDialerCA(ca *tlsconf.CAFile, closeTimeout time.Duration) ws.Dialer {
	return &caDialer{ca: ca, closeTimeout: closeTimeout}
}

// caDialer rebuilds its WebSocket dialer when the CA file changes.
type caDialer struct {
	ca           *tlsconf.CAFile
	closeTimeout time.Duration

	mu    sync.Mutex // guards inner and tr
	inner ws.Dialer
	tr    *http.Transport
}

func (d *caDialer) current() (ws.Dialer, error) {
	pool, changed, err := d.ca.Pool()
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil && d.inner == nil {
		return nil, fmt.Errorf("the hub's CA (--hub-ca) %v", err)
	}
	if d.inner == nil || changed {
		if d.tr != nil {
			d.tr.CloseIdleConnections()
		}
		d.tr = http.DefaultTransport.(*http.Transport).Clone()
		d.tr.ForceAttemptHTTP2 = false
		d.tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		d.tr.TLSClientConfig = tlsconf.ClientConfig(pool)
		d.inner = ws.WebSocketDialer{HTTPClient: &http.Client{Transport: d.tr}, CloseTimeout: d.closeTimeout}
	}
	return d.inner, nil
}

// Dial implements ws.Dialer.
func (d *caDialer) Dial(ctx context.Context, url string, header http.Header) (ws.Transport, error) {
	inner, err := d.current()
	if err != nil {
		return nil, err
	}
	return inner.Dial(ctx, url, header)
}
