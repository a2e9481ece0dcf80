// Package oracle drives the JavaScript yjs reference implementation for differential tests.
//
// The oracle is one long-running node process (testdata/oracle/oracle.mjs, with the pinned
// npm packages yjs 13.6.33, lib0 0.2.120 and y-protocols 1.0.7) per test binary, started by
// the first Start and shared by every test, parallel ones included. Requests and responses
// are JSON lines over the process's stdin and stdout, matched by id; testdata/oracle/README.md
// describes the protocol and the JSON rules of the document views.
//
// A test package wires it like this:
//
//	func TestMain(m *testing.M) { os.Exit(oracle.Run(m)) }
//
//	func TestS11_Something(t *testing.T) {
//		js := oracle.Start(t) // skips (or fails under NOMICORE_REQUIRE_ORACLE=1) without node
//		h, err := js.History(oracle.HistoryRequest{Seed: 1, Clients: 3, Steps: 80})
//		...
//	}
//
// Run stops the process when the tests are done. Without it the process still ends with the
// test binary: it exits when its stdin closes. Packages that check for leaked goroutines per
// test pass GoleakOptions() to goleak so the client's two goroutines are not reported.
package oracle

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// RequireEnv names the environment variable that turns a missing oracle from a skip into a
// test failure when set to 1 (CI sets it).
const RequireEnv = "NOMICORE_REQUIRE_ORACLE"

// oracleDir is the oracle's directory relative to the module root.
const oracleDir = "testdata/oracle"

// shared is the one client of this test binary.
var shared struct {
	once    sync.Once
	missing string  // why the oracle is not installed; "" when it is
	err     error   // why an installed oracle failed to start
	client  *Client // set when it started
}

// Start returns the shared oracle client, starting the node process on first use. When node
// or the npm packages are missing it skips the test with a loud message, or fails it when
// NOMICORE_REQUIRE_ORACLE=1. An installed oracle that fails to start, or whose installed
// package versions differ from the pinned ones, fails the test.
func Start(tb testing.TB) *Client {
	tb.Helper()
	shared.once.Do(func() {
		dir, missing := locate()
		if missing != "" {
			shared.missing = missing
			fmt.Fprintf(os.Stderr, "\n*** %s ***\n\n", notInstalledMessage(missing))
			return
		}
		c := newClient(dir)
		if err := c.checkVersions(); err != nil {
			c.close()
			shared.err = err
			return
		}
		shared.client = c
	})
	switch {
	case shared.missing != "":
		notInstalled(tb, shared.missing)
		return nil
	case shared.err != nil:
		tb.Fatalf("JS oracle failed to start: %v", shared.err)
		return nil
	}
	return shared.client
}

// Run runs the tests of m, then stops the shared oracle process (if one was started) and
// waits for it and for the client's goroutines. It returns m.Run's exit code.
func Run(m *testing.M) int {
	code := m.Run()
	if c := shared.client; c != nil {
		if err := c.close(); err != nil {
			fmt.Fprintf(os.Stderr, "oracle: %v\n", err)
		}
	}
	return code
}

// GoleakOptions makes goleak ignore the goroutines of a running shared oracle client.
func GoleakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/nomicore/nomicore/internal/testkit/oracle.(*proc).readLoop"),
		goleak.IgnoreAnyFunction("github.com/nomicore/nomicore/internal/testkit/oracle.(*proc).stderrLoop"),
	}
}

// locate finds the oracle directory from the working directory, or says what is missing.
func locate() (dir, missing string) {
	wd, err := os.Getwd()
	if err != nil {
		return "", "cannot find the module root: " + err.Error()
	}
	return locateFrom(wd)
}

func locateFrom(wd string) (dir, missing string) {
	root, err := moduleRoot(wd)
	if err != nil {
		return "", err.Error()
	}
	dir = filepath.Join(root, oracleDir)
	if _, err := exec.LookPath("node"); err != nil {
		return "", "node is not on PATH"
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "yjs", "package.json")); err != nil {
		return "", "the npm packages are not installed in " + oracleDir + " (node_modules/yjs is missing)"
	}
	return dir, ""
}

// moduleRoot walks up from wd to the directory holding go.mod.
func moduleRoot(wd string) (string, error) {
	for d := wd; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("cannot find the module root: no go.mod above %s", wd)
		}
		d = parent
	}
}

func required() bool { return os.Getenv(RequireEnv) == "1" }

func notInstalledMessage(missing string) string {
	msg := fmt.Sprintf("JS oracle not installed: %s. Run `make js-deps` (npm ci in %s). ", missing, oracleDir)
	if required() {
		return msg + "Oracle tests FAIL because " + RequireEnv + "=1"
	}
	return msg + "Oracle tests are SKIPPED; set " + RequireEnv + "=1 to make this a failure"
}

// notInstalled skips tb, or fails it when the oracle is required.
func notInstalled(tb testing.TB, missing string) {
	tb.Helper()
	if required() {
		tb.Fatal(notInstalledMessage(missing))
		return
	}
	tb.Skip(notInstalledMessage(missing))
}

// checkVersions compares the installed package versions with the pins of package.json.
func (c *Client) checkVersions() error {
	raw, err := os.ReadFile(filepath.Join(c.dir, "package.json"))
	if err != nil {
		return err
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		return fmt.Errorf("package.json: %v", err)
	}
	v, err := c.Ping()
	if err != nil {
		return err
	}
	installed := map[string]string{"yjs": v.Yjs, "lib0": v.Lib0, "y-protocols": v.YProtocols}
	var errs []error
	for name, got := range installed {
		if want := pkg.Dependencies[name]; got != want {
			errs = append(errs, fmt.Errorf("%s %s is installed but package.json pins %q: run `make js-deps`", name, got, want))
		}
	}
	return errors.Join(errs...)
}
