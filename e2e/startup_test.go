package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Bad configuration, unreadable tokens and a data dir in use: one clear line on stderr and a
// non-zero exit, before anything is served.
func TestE2E_StartupRefusals(t *testing.T) {
	c := newCluster(t)
	c.startHub() // holds the hub's data dir
	dir := t.TempDir()
	badTokens := filepath.Join(dir, "tokens.json")
	os.WriteFile(badTokens, []byte(`{"peers":[{"instanceId":"peer-a"}]}`), 0o600)
	tok := filepath.Join(dir, "tok")
	os.WriteFile(tok, []byte("t\n"), 0o600)
	loop := func() string { return freeAddr(t) }
	cases := []struct {
		name string
		exe  string
		args []string
		env  []string
		want string
	}{
		{"a limit constraint", bin.hub, []string{"serve", "--data", filepath.Join(dir, "h1"), "--max-update-bytes", "600000", "--listen", loop(), "--admin-listen", loop()}, nil,
			"--max-update-bytes <= --max-frame-bytes - --protocol-overhead-bytes does not hold"},
		{"a limit from the environment", bin.peer, []string{"run", "--data", filepath.Join(dir, "p1"), "--token-file", tok, "--admin-listen", loop()},
			[]string{"NOMICORE_MAX_IN_FLIGHT_UPDATES=0"}, "--max-in-flight-updates >= 1 does not hold"},
		{"unreadable tokens", bin.hub, []string{"serve", "--data", filepath.Join(dir, "h2"), "--tokens", badTokens, "--listen", loop(), "--admin-listen", loop()}, nil,
			"tokens file"},
		{"data dir in use", bin.hub, []string{"serve", "--data", c.hubData(), "--listen", loop(), "--admin-listen", loop()}, nil,
			"is in use by another process"},
		{"admin beyond loopback without a token", bin.hub, []string{"serve", "--data", filepath.Join(dir, "h3"), "--admin-listen", "0.0.0.0:0", "--listen", loop()}, nil,
			"is not loopback"},
		{"peer without a token", bin.peer, []string{"run", "--data", filepath.Join(dir, "p2"), "--admin-listen", loop()}, nil,
			"no token"},
		{"peer with an unreadable token file", bin.peer, []string{"run", "--data", filepath.Join(dir, "p3"), "--token-file", filepath.Join(dir, "none"), "--admin-listen", loop()}, nil,
			"token"},
		{"bad instance id", bin.peer, []string{"run", "--instance-id", "Peer A", "--token-file", tok, "--admin-listen", loop()}, nil,
			"--instance-id"},
		{"bad hub url", bin.peer, []string{"run", "--hub-url", "http://x", "--token-file", tok, "--admin-listen", loop()}, nil,
			"--hub-url"},
		{"editors without tokens beyond loopback", bin.hub, []string{"serve", "--data", filepath.Join(dir, "h4"), "--listen", loop(), "--admin-listen", loop(),
			"--client-listen", "0.0.0.0:0", "--client-auth", "none"}, nil, "--client-auth none is allowed only on a loopback"},
		{"peer editors without tokens beyond loopback", bin.peer, []string{"run", "--data", filepath.Join(dir, "p4"), "--token-file", tok, "--admin-listen", loop(),
			"--client-listen", "0.0.0.0:0", "--client-auth", "none"}, nil, "--client-auth none is allowed only on a loopback"},
		{"a bad client listener", bin.hub, []string{"serve", "--data", filepath.Join(dir, "h5"), "--listen", loop(), "--admin-listen", loop(),
			"--client-listen", "nowhere"}, nil, "--client-listen"},
	}
	for _, tc := range cases {
		cmd := exec.Command(tc.exe, tc.args...)
		cmd.Env = append(os.Environ(), tc.env...)
		cmd.Dir = dir
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		last := lines[len(lines)-1]
		if code <= 0 || !strings.Contains(last, tc.want) || strings.HasPrefix(last, "{") {
			t.Errorf("%s: exit %d, stderr %q; want a non-zero exit and one line naming %q", tc.name, code, stderr.String(), tc.want)
		}
		if len(lines) != 1 {
			t.Errorf("%s: %d lines on stderr, want one: %q", tc.name, len(lines), stderr.String())
		}
	}
}

// Without a tokens file yet, each binary warns once at start, naming who is refused and the
// command that creates the file: on the hub peers and editors; on a peer, which has no peers
// of its own, editors only.
func TestE2E_StartWarningsNameWhoIsRefused(t *testing.T) {
	c := newCluster(t)
	hub := c.startHub() // before any token: no tokens file
	a := c.startPeer("peer-a", c.tokenFile("peer-a", c.token("peer-a")))
	warning := func(p *proc) string {
		for _, line := range strings.Split(tail(p.log, 400), "\n") {
			if strings.Contains(line, `"msg":"no tokens file yet`) {
				return line
			}
		}
		t.Fatalf("%s did not warn about its missing tokens file:\n%s", p.name, tail(p.log, 20))
		return ""
	}
	if w := warning(hub); !strings.Contains(w, "every peer and editor is refused until `hub token add --data "+c.hubData()+" --peer NAME`") {
		t.Errorf("the hub's warning: %s", w)
	}
	if w := warning(a); !strings.Contains(w, "every editor is refused until `peer token add --data "+filepath.Join(c.dir, "peer-a")+" --client NAME`") ||
		strings.Contains(w, "peer and") {
		t.Errorf("the peer's warning: %s", w)
	}
}
