package persistence_test

import (
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// long runs the crash and corruption tests many more times: go test ./persistence -args -long
var long = flag.Bool("long", false, "run the crash (SIGKILL) and corruption tests many more times")

func TestMain(m *testing.M) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		os.Exit(killChild(dir))
	}
	if dir := os.Getenv(killDeleteChildEnv); dir != "" {
		os.Exit(killDeleteChild(dir))
	}
	goleak.VerifyTestMain(m)
}
