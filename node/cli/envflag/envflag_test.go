package envflag

import (
	"flag"
	"io"
	"strings"
	"testing"
)

func TestApplyThenCommandLineOverrides(t *testing.T) {
	env := map[string]string{"NOMICORE_TOKEN_FILE": "/from/env", "NOMICORE_MAX_FRAME_BYTES": "64"}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	tokenFile := fs.String("token-file", "", "")
	maxFrame := fs.Int("max-frame-bytes", 0, "")
	other := fs.String("other", "default", "")
	if err := Apply(fs, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse([]string{"--max-frame-bytes", "128"}); err != nil {
		t.Fatal(err)
	}
	if *tokenFile != "/from/env" || *maxFrame != 128 || *other != "default" {
		t.Errorf("token-file=%q max-frame-bytes=%d other=%q", *tokenFile, *maxFrame, *other)
	}
}

func TestApplyNamesTheBadVariable(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int("max-frame-bytes", 0, "")
	err := Apply(fs, func(k string) string { return "lots" })
	if err == nil || !strings.Contains(err.Error(), "NOMICORE_MAX_FRAME_BYTES") {
		t.Fatalf("error = %v", err)
	}
}
