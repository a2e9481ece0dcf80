package node

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestShutdownInOrderRunsEveryStep(t *testing.T) {
	var order []string
	step := func(name string, err error) Step {
		return Step{Name: name, Run: func(context.Context) error { order = append(order, name); return err }}
	}
	boom := errors.New("boom")
	err := ShutdownInOrder(slog.New(slog.DiscardHandler), &bytes.Buffer{}, "test", 5*time.Second, nil,
		[]Step{step("replication", nil), step("registry", boom), step("store", nil)})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "registry") {
		t.Fatalf("err = %v", err)
	}
	if strings.Join(order, ",") != "replication,registry,store" {
		t.Fatalf("order %v: a failed step must not stop the later ones", order)
	}
}

// The watchdog: a shutdown that hangs past its timeout exits the process with status 3 and
// one line on stderr. Run in a child process (this test binary again).
func TestShutdownWatchdogExits(t *testing.T) {
	if os.Getenv("NOMICORE_TEST_WATCHDOG") == "1" {
		ShutdownInOrder(slog.New(slog.DiscardHandler), os.Stderr, "hub", 200*time.Millisecond, nil, []Step{
			{Name: "stuck", Run: func(context.Context) error { select {} }},
		})
		os.Exit(0) // not reached
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestShutdownWatchdogExits$")
	cmd.Env = append(os.Environ(), "NOMICORE_TEST_WATCHDOG=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("exit %v, want status 3; stderr %q", err, stderr.String())
	}
	if got := strings.TrimSpace(stderr.String()); got != "hub: shutdown did not finish within 200ms; exiting" {
		t.Fatalf("stderr %q", got)
	}
}
