package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/nomicore/nomicore/node/tlsconf"
	"github.com/nomicore/nomicore/node/tlsconf/tlstest"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/ws"
)

func TestTLSFlagsNeedBothFiles(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", "c.pem"}, "--tls-cert needs --tls-key"},
		{[]string{"--tls-key", "k.pem"}, "--tls-key needs --tls-cert"},
		{[]string{"--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-poll", "-1s"}, "--tls-poll"},
	} {
		c, _, ok := parse(t, tc.args, nil)
		if !ok {
			t.Fatalf("%v: parse failed", tc.args)
		}
		if err := c.Resolve(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want %q", tc.args, err, tc.want)
		}
	}
	c, _, _ := parse(t, nil, map[string]string{"NOMICORE_TLS_CERT": "c.pem", "NOMICORE_TLS_KEY": "k.pem"})
	if err := c.Resolve(); err != nil || !c.TLS.Enabled() || c.TLS.Poll != 5*time.Second {
		t.Fatalf("from the environment: %v %+v", err, c.TLS)
	}
	if c, _, _ := parse(t, nil, nil); c.TLS.Enabled() {
		t.Fatal("TLS is on without a certificate")
	}
}

// The admin listener under TLS: https with the certificate, the reload counted and the
// expiry exposed in /metrics, and a certificate that does not load refused at start.
func TestListenTLSServesTheCertificateWithMetrics(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	flags := TLSFlags{Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem"), Poll: time.Second}
	first := ca.Issue(t, "first", time.Time{}, time.Time{})
	first.Write(t, flags.Cert, flags.Key)
	o, err := NewObservability(slog.New(slog.DiscardHandler), observer.SideHub)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := flags.Load(o, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := ListenTLS("admin-listen", "127.0.0.1:0", certs)
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{Name: "admin", Listener: ln, Handler: o.Handler()}
	failed := make(chan error, 1)
	srv.Start(slog.New(slog.DiscardHandler), failed)
	defer srv.Shutdown(context.Background())
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsconf.ClientConfig(ca.Pool())}}
	defer client.CloseIdleConnections()
	url := Scheme("http", certs) + "://" + ln.Addr().String() + "/metrics"
	get := func() (string, string) {
		t.Helper()
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), resp.TLS.PeerCertificates[0].Subject.CommonName
	}
	body, cn := get()
	if cn != "first" || !strings.Contains(body, `nomicore_tls_certificate_expiry_timestamp_seconds{side="hub"}`) {
		t.Fatalf("served %s; metrics:\n%s", cn, body)
	}
	second := ca.Issue(t, "second", time.Time{}, time.Time{})
	second.Write(t, flags.Cert, flags.Key)
	if changed, err := certs.Reload("test"); !changed || err != nil {
		t.Fatal(changed, err)
	}
	client.CloseIdleConnections()
	body, cn = get()
	if cn != "second" || !strings.Contains(body, `nomicore_tls_reloads_total{reason="changed",side="hub"} 1`) {
		t.Fatalf("served %s; metrics:\n%s", cn, body)
	}
	mfs, err := o.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if problems, _ := promlint.NewWithMetricFamilies(mfs).Lint(); len(problems) > 0 {
		t.Fatalf("promlint: %v", problems)
	}

	os.WriteFile(flags.Key, []byte("not a key"), 0o600)
	if _, err := flags.Load(o, slog.New(slog.DiscardHandler)); err == nil || !strings.HasPrefix(err.Error(), "--tls-cert/--tls-key: ") {
		t.Fatalf("a key that does not load: %v", err)
	}
	if c, err := (&TLSFlags{}).Load(o, slog.New(slog.DiscardHandler)); c != nil || err != nil {
		t.Fatalf("without flags: %v %v", c, err)
	}
	if ln, err := ListenTLS("listen", "127.0.0.1:0", nil); err != nil || Scheme("ws", nil) != "ws" {
		t.Fatal(err)
	} else {
		ln.Close()
	}
}

// The peer's dialer trusts the CA file, and takes a new CA bundle at its next dial; an
// untrusted certificate is diagnosed with the flag that fixes it.
func TestHubDialerReadsTheCAFileAgain(t *testing.T) {
	caA, caB := tlstest.NewCA(t, "CA a"), tlstest.NewCA(t, "CA b")
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "ca.pem")
	caA.Issue(t, "hub", time.Time{}, time.Time{}).Write(t, certFile, keyFile)
	certs, err := tlsconf.Load(certFile, keyFile, tlsconf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c.Close(websocket.StatusNormalClosure, "")
	}))
	srv.Listener = certs.Listener(srv.Listener) // (httptest's StartTLS would serve its own certificate)
	srv.Start()
	defer srv.Close()
	hostPort := strings.TrimPrefix(srv.URL, "http://")
	wss := "wss://" + hostPort + "/v1/replication"

	tlstest.WriteFile(t, caFile, caB.PEM)
	dialer, err := HubDialer(caFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = dialer.Dial(ctx, wss, nil)
	if err == nil {
		t.Fatal("a hub certificate from an untrusted CA was accepted")
	}
	if fix := dialFix(err); !strings.Contains(fix, "--hub-ca") {
		t.Fatalf("the fix for %v: %q", err, fix)
	}
	tlstest.WriteFile(t, caFile, append(append([]byte{}, caB.PEM...), caA.PEM...))
	tr, err := dialer.Dial(ctx, wss, nil)
	if err != nil {
		t.Fatalf("after the CA file gained CA a: %v", err)
	}
	tr.Close(1000, "")

	if _, err := HubDialer(filepath.Join(dir, "none")); err == nil {
		t.Fatal("a missing CA file was accepted")
	}
	// A plain ws:// dial to the TLS listener: the HTTP answer says so.
	plain, _ := HubDialer("")
	_, err = plain.Dial(ctx, "ws://"+hostPort+"/v1/replication", nil)
	var de *ws.DialError
	if !errors.As(err, &de) || de.StatusCode != http.StatusBadRequest {
		t.Fatalf("a plain dial to a TLS listener: %v; want HTTP 400", err)
	}
}

func TestDialFixNamesTheTLSProblem(t *testing.T) {
	if fix := dialFix(errors.New("dial tcp: connection refused")); !strings.Contains(fix, "--listen") {
		t.Fatalf("plain failure: %q", fix)
	}
	// A TLS client reaching a plain listener.
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	dialer, _ := HubDialer("")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := dialer.Dial(ctx, "wss://"+strings.TrimPrefix(srv.URL, "http://")+"/v1/replication", nil)
	if fix := dialFix(err); !strings.Contains(fix, "does not speak TLS") {
		t.Fatalf("wss:// to a plain listener (%v): %q", err, fix)
	}
}

// SIGHUP reaches WaitForStop's hup channel and every subscriber.
func TestSignalsSubscribersGetSIGHUP(t *testing.T) {
	stop, hupSig := make(chan os.Signal, 1), make(chan os.Signal, 1)
	s := &Signals{Stop: stop, Hup: hupSig, stop: func() {}}
	a, b := s.Subscribe(), s.Subscribe()
	hup := make(chan struct{}, 1)
	exit := make(chan int)
	go func() { exit <- s.WaitForStop(slog.New(slog.DiscardHandler), io.Discard, "test", hup, nil) }()
	hupSig <- syscall.SIGHUP
	for name, ch := range map[string]<-chan struct{}{"hup": hup, "first subscriber": a, "second subscriber": b} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not get SIGHUP", name)
		}
	}
	stop <- syscall.SIGTERM
	if code := <-exit; code != 0 {
		t.Fatalf("exit %d", code)
	}
}
