package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/nomicore/nomicore/node/tlsconf"
	"github.com/nomicore/nomicore/node/tlsconf/tlstest"
)

// Native TLS on every listener: the hub serves wss:// replication and an https admin API
// with a certificate from a CA made here; a peer that does not trust the CA cannot connect
// and says which flag fixes it; one given the CA with --hub-ca replicates. The hub's
// certificate is then rotated twice without dropping the peer's connection: by SIGHUP (same
// CA), and by rewriting the files alone (a new CA, which the peer learns from its CA bundle
// file without a restart); a pair that does not load is refused and the current one stays.
func TestE2E_NativeTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "nomicore test CA")
	c := newCluster(t)
	c.adminClient = httpsClient(ca.Pool())
	hubCert, hubKey := filepath.Join(c.dir, "hub-cert.pem"), filepath.Join(c.dir, "hub-key.pem")
	peerCert, peerKey := filepath.Join(c.dir, "peer-cert.pem"), filepath.Join(c.dir, "peer-key.pem")
	caFile := filepath.Join(c.dir, "ca.pem")
	first := ca.Issue(t, "hub-1", time.Time{}, time.Time{})
	first.Write(t, hubCert, hubKey)
	ca.Issue(t, "peer-a", time.Time{}, time.Time{}).Write(t, peerCert, peerKey)
	tlstest.WriteFile(t, caFile, ca.PEM)

	tok := c.tokenFile("peer-a", c.token("peer-a"))
	hub := c.startHub("--tls-cert", hubCert, "--tls-key", hubKey, "--tls-poll", "2s")
	ns := hub.api().createNamespace() // over https
	if !strings.HasPrefix(hub.admin, "https://") {
		t.Fatalf("admin %s", hub.admin)
	}
	// Plain HTTP to the admin listener is refused by the TLS layer.
	if resp, err := http.Get("http://" + hub.adminAddr() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("the admin API answered plain HTTP")
		}
	}
	wss := "wss://" + c.hubRepl + "/v1/replication"
	if got := presented(t, c.hubRepl, ca.Pool()); got != "hub-1" {
		t.Fatalf("the replication listener presents %q", got)
	}

	// Without the CA the peer cannot connect, and says what to do.
	x := c.startPeer("peer-x", tok, "--hub-url", wss, "--target", ns, "--instance-id", "peer-a",
		"--tls-cert", peerCert, "--tls-key", peerKey)
	eventually(t, 10*time.Second, "untrusted certificate refused", func() error {
		if v := x.api().metric(`nomicore_connection_backoffs_total{reason="dial-failed",side="peer"}`); v < 1 {
			return fmt.Errorf("%v dial-failed backoffs", v)
		}
		return nil
	})
	// Its log, /readyz and GET /v1/targets all say why and name the flag that fixes it.
	if status, b := x.api().do("GET", "/readyz", nil); status == http.StatusOK || !strings.Contains(string(b), "unknown authority") ||
		!strings.Contains(string(b), "--hub-ca") {
		t.Fatalf("readyz of a peer that does not trust the hub: %d %s", status, b)
	}
	if reason := fmt.Sprint(x.api().target(ns)["reason"]); !strings.Contains(reason, "unknown authority") || !strings.Contains(reason, "--hub-ca") {
		t.Fatalf("the target of a peer that does not trust the hub: %q", reason)
	}
	x.stop()
	if !strings.Contains(tail(x.log, 200), "give --hub-ca FILE") {
		t.Fatalf("the peer's log does not name --hub-ca:\n%s", tail(x.log, 20))
	}

	a := c.startPeer("peer-a", tok, "--hub-url", wss, "--hub-ca", caFile, "--target", ns,
		"--tls-cert", peerCert, "--tls-key", peerKey)
	targetState(t, a, ns, "live")
	a.api().set(ns, map[string]any{"before": "rotation"})
	converged(t, ns, map[string]any{"before": "rotation"}, hub, a)
	// The write command over https, trusting the CA.
	if out, err := execCommand(bin.hub, "write", "--admin-url", hub.admin, "--ca-file", caFile, "--namespace", ns, "cli=https"); err != nil {
		t.Fatalf("hub write over https: %v\n%s", err, out)
	}
	converged(t, ns, map[string]any{"cli": "https"}, hub, a)

	// Rotation 1: a new certificate from the same CA, then SIGHUP (the poll would find it
	// too; the signal takes it at once).
	second := ca.Issue(t, "hub-2", time.Time{}, time.Time{})
	second.Write(t, hubCert, hubKey)
	syscall.Kill(hub.cmd.Process.Pid, syscall.SIGHUP)
	eventually(t, 10*time.Second, "the second certificate in service", func() error {
		if got := presented(t, c.hubRepl, ca.Pool()); got != "hub-2" {
			return fmt.Errorf("presents %q", got)
		}
		return nil
	})
	reloadedBy(t, hub, "hub-2", "signal")
	a.api().set(ns, map[string]any{"after": "sighup"})
	converged(t, ns, map[string]any{"after": "sighup"}, hub, a)
	if n := readies(t, a.log); n != 1 {
		t.Fatalf("the peer's connection was made %d times across the rotation; want once (nothing dropped)", n)
	}

	// A pair that does not load (the certificate written, the key still the old one) is
	// refused on SIGHUP and the current certificate stays.
	third := ca.Issue(t, "hub-3", time.Time{}, time.Time{})
	tlstest.WriteFile(t, hubCert, third.CertPEM)
	syscall.Kill(hub.cmd.Process.Pid, syscall.SIGHUP)
	eventually(t, 10*time.Second, "the refused reload logged", func() error {
		if !strings.Contains(tail(hub.log, 50), "TLS certificate not reloaded") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	if got := presented(t, c.hubRepl, ca.Pool()); got != "hub-2" {
		t.Fatalf("after a refused reload the hub presents %q", got)
	}
	if v := hub.api().metric(`nomicore_tls_reloads_total{reason="failed",side="hub"}`); v < 1 {
		t.Fatalf("failed reloads counted: %v", v)
	}

	// Rotation 2: a new CA. The peer's CA file becomes a bundle of both (it reads it again
	// at its next connection); the hub's files are replaced without a signal: the poll finds
	// them.
	ca2 := tlstest.NewCA(t, "nomicore test CA 2")
	tlstest.WriteFile(t, caFile, append(append([]byte{}, ca.PEM...), ca2.PEM...))
	fourth := ca2.Issue(t, "hub-4", time.Time{}, time.Time{})
	fourth.Write(t, hubCert, hubKey)
	eventually(t, 10*time.Second, "the new CA's certificate in service", func() error {
		if got := presented(t, c.hubRepl, ca2.Pool()); got != "hub-4" {
			return fmt.Errorf("presents %q", got)
		}
		return nil
	})
	reloadedBy(t, hub, "hub-4", "file change")
	if n := readies(t, a.log); n != 1 {
		t.Fatalf("the peer's connection was made %d times; want once", n)
	}
	// A new connection (the hub restarts) verifies the new certificate with the bundle.
	both := ca.Pool()
	both.AddCert(ca2.Cert)
	hub.adminHTTP = httpsClient(both)
	hub.kill()
	c.startHub("--tls-cert", hubCert, "--tls-key", hubKey)
	eventually(t, 30*time.Second, "the peer connected again", func() error {
		if n := readies(t, a.log); n < 2 {
			return fmt.Errorf("%d connections", n)
		}
		return nil
	})
	targetState(t, a, ns, "live")
	a.api().set(ns, map[string]any{"after": "new CA"})
	converged(t, ns, map[string]any{"before": "rotation", "cli": "https", "after": "new CA"}, hub, a)
	if got := presented(t, a.adminAddr(), ca.Pool()); got != "peer-a" {
		t.Fatalf("the peer's admin listener presents %q", got)
	}
	// The editors' listener serves the same certificate: the page over https, and a
	// y-websocket connection over wss that receives the server's first sync message.
	if got := presented(t, hub.client, ca2.Pool()); got != "hub-4" {
		t.Fatalf("the hub's client listener presents %q", got)
	}
	edit := httpsClient(both)
	resp, err := edit.Get("https://" + hub.client + "/edit/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the editor page over https: %d", resp.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	editorURL := "wss://" + hub.client + "/v1/yjs/" + ns + "?token=" + c.clientToken("hub", "tls-editor")
	var conn *websocket.Conn
	eventually(t, 10*time.Second, "a y-websocket editor over wss", func() error { // (once the hub read the new token)
		var err error
		conn, _, err = websocket.Dial(ctx, editorURL, &websocket.DialOptions{HTTPClient: edit})
		return err
	})
	defer conn.CloseNow()
	if _, msg, err := conn.Read(ctx); err != nil || len(msg) < 2 || msg[0] != 0 || msg[1] != 0 {
		t.Fatalf("the editor's first message over wss: % x, %v; want sync step 1", msg, err)
	}
	// And the Hocuspocus endpoint over wss: a document authenticates.
	hocus, _, err := websocket.Dial(ctx, "wss://"+hub.client+"/v1/hocuspocus", &websocket.DialOptions{HTTPClient: edit})
	if err != nil {
		t.Fatalf("the Hocuspocus endpoint over wss: %v", err)
	}
	defer hocus.CloseNow()
	clientTok := editorURL[strings.Index(editorURL, "?token=")+len("?token="):]
	authFrame := append(append([]byte{byte(len(ns))}, ns...), 2, 0, byte(len(clientTok)))
	if err := hocus.Write(ctx, websocket.MessageBinary, append(authFrame, clientTok...)); err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte{byte(len(ns))}, ns...), 2, 2) // Auth Authenticated …
	if _, msg, err := hocus.Read(ctx); err != nil || !bytes.HasPrefix(msg, want) {
		t.Fatalf("the Hocuspocus endpoint's answer over wss: %q, %v; want Authenticated", msg, err)
	}
}

// reloadedBy checks the hub's log line of the reload that installed the certificate cn:
// what triggered it.
func reloadedBy(t *testing.T, p *proc, cn, by string) {
	t.Helper()
	for _, ev := range logEvents(t, p.log, "TLS certificate reloaded") {
		if ev["subject"] == "CN="+cn {
			if ev["by"] != by {
				t.Fatalf("the certificate %s was installed by %v; want %s", cn, ev["by"], by)
			}
			return
		}
	}
	t.Fatalf("no reload of the certificate %s in %s's log", cn, p.name)
}

func httpsClient(roots *x509.CertPool) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tlsconf.ClientConfig(roots)}}
}

// presented makes a TLS handshake with addr, verifying with roots, and returns the common
// name of the certificate it presented ("" if the handshake failed).
func presented(t *testing.T, addr string, roots *x509.CertPool) string {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, tlsconf.ClientConfig(roots))
	if err != nil {
		return ""
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// readies counts the peer's connections that reached ready, from its log.
func readies(t *testing.T, log string) int {
	t.Helper()
	n := 0
	for _, ev := range logEvents(t, log, "connection-state-changed") {
		if ev["to"] == "ready" {
			n++
		}
	}
	return n
}

// logEvents returns the JSON log lines of a process whose msg is typ, in order.
func logEvents(t *testing.T, log, typ string) []map[string]any {
	t.Helper()
	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	needle := []byte(`"msg":"` + typ + `"`)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, needle) {
			continue
		}
		var rec map[string]any
		if json.Unmarshal(line, &rec) == nil {
			out = append(out, rec)
		}
	}
	return out
}
