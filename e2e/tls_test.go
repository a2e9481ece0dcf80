package e2e

import (
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TLS at a proxy in front of a plain hub (docs/operations.md, "Behind a TLS-terminating
// proxy"): a peer reaches the hub through a TLS-terminating reverse proxy with a wss:// URL,
// trusting the proxy's certificate from --hub-ca-file, and replicates as over plain ws://.
func TestE2E_WSSThroughATLSProxy(t *testing.T) {
	c := newCluster(t)
	tok := c.tokenFile("peer-a", c.token("peer-a"))
	hub := c.startHub()
	ns := hub.api().createNamespace()

	target, _ := url.Parse("http://" + c.hubRepl)
	proxy := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(target))
	proxy.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes below are expected
	proxy.StartTLS()
	defer proxy.Close()
	ca := filepath.Join(c.dir, "proxy-ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: proxy.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	wss := "wss://" + strings.TrimPrefix(proxy.URL, "https://") + "/v1/replication"

	// Without trusting the proxy's certificate the peer cannot connect.
	x := c.startPeer("peer-x", tok, "--hub-url", wss, "--target", ns, "--instance-id", "peer-a")
	eventually(t, 10*time.Second, "untrusted certificate refused", func() error {
		if v := x.api().metric(`nomicore_connection_backoffs_total{reason="dial-failed",side="peer"}`); v < 1 {
			return fmt.Errorf("%v dial-failed backoffs", v)
		}
		return nil
	})
	if status, _ := x.api().do("GET", "/readyz", nil); status == http.StatusOK {
		t.Fatal("a peer connected through TLS without trusting the certificate")
	}
	x.stop()

	a := c.startPeer("peer-a", tok, "--hub-url", wss, "--hub-ca-file", ca, "--target", ns)
	targetState(t, a, ns, "live")
	a.api().set(ns, map[string]any{"overTLS": "yes"})
	converged(t, ns, map[string]any{"overTLS": "yes"}, hub, a)
}
