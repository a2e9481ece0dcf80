package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nomicore/nomicore/persistence"
)

// classify turns every way JetStream says "not now" into an unavailability the registry
// treats as degraded persistence, and leaves other errors as they are.
func TestClassifyUnavailability(t *testing.T) {
	unavailable := []error{
		context.DeadlineExceeded,
		nats.ErrTimeout,
		nats.ErrNoResponders,
		nats.ErrConnectionClosed,
		jetstream.ErrNoStreamResponse,
		&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"},
		fmt.Errorf("watch: %w", &nats.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}),
		&jetstream.APIError{Code: 400, ErrorCode: errDuplicateInProcess},
	}
	for _, err := range unavailable {
		got := classify("reading", time.Second, err)
		if !errors.Is(got, persistence.ErrUnavailable) {
			t.Errorf("classify(%v) = %v: not unavailable", err, got)
		}
		if !errors.Is(got, err) {
			t.Errorf("classify(%v) = %v: lost the cause", err, got)
		}
	}
	for _, err := range []error{
		&jetstream.APIError{Code: 400, ErrorCode: 10071, Description: "wrong last sequence"},
		&nats.APIError{Code: 404, ErrorCode: 10037, Description: "no message found"},
		errors.New("something else"),
	} {
		if got := classify("reading", time.Second, err); errors.Is(got, persistence.ErrUnavailable) || !errors.Is(got, err) {
			t.Errorf("classify(%v) = %v: want the error itself, not unavailable", err, got)
		}
	}
	if classify("reading", time.Second, nil) != nil {
		t.Error("classify(nil) is not nil")
	}
}
