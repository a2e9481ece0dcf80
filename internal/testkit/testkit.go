// Package testkit holds the small helpers tests of many packages share, so that each exists
// once: failing on an error, a context bounded by the test, comparing JSON texts. Its
// subpackages are larger test support: the JavaScript oracle client (oracle) and a TCP proxy
// with faults (faultproxy). Nothing here is imported by production code.
package testkit

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// Must fails the test at once when err is not nil.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Context returns a context that ends after d, or when the test ends, whichever comes first:
// the bound on a test's waits for the code under test.
func Context(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// SameJSON reports whether two JSON texts hold the same value: objects compared by keys, not
// order, and numbers exactly as written (1 and 1.0 differ). A text that is not JSON fails
// the test.
func SameJSON(t testing.TB, got, want []byte) bool {
	t.Helper()
	parse := func(b []byte) any {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("parse %s: %v", b, err)
		}
		return v
	}
	return reflect.DeepEqual(parse(got), parse(want))
}

// Eventually polls cond every millisecond until it holds, and fails the test when d passes
// first: the bound on waiting, in real time, for goroutines of the code under test.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
