package testkit

import (
	"testing"
	"time"
)

func TestSameJSON(t *testing.T) {
	for _, c := range []struct {
		got, want string
		same      bool
	}{
		{`{"a":1,"b":[true,null,"x"]}`, `{"b":[true,null,"x"],"a":1}`, true},
		{`{"a":1}`, `{"a":1.0}`, false},
		{`[1,2]`, `[2,1]`, false},
		{`{"a":{"b":"c"}}`, ` {"a": {"b": "c"}} `, true},
	} {
		if got := SameJSON(t, []byte(c.got), []byte(c.want)); got != c.same {
			t.Errorf("SameJSON(%s, %s) = %v, want %v", c.got, c.want, got, c.same)
		}
	}
}

func TestContextEndsWithTheTest(t *testing.T) {
	var ctx interface{ Err() error }
	t.Run("inner", func(t *testing.T) {
		ctx = Context(t, time.Hour)
		if ctx.Err() != nil {
			t.Fatal("context ended before its test")
		}
	})
	if ctx.Err() == nil {
		t.Fatal("context still running after its test ended")
	}
}
