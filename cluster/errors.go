package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
)

// UnavailableError reports a JetStream operation that did not complete: it ran into its
// deadline, found no JetStream server to answer (no quorum, no leader) or the connection
// was down. Nothing it was asked to write may be relied on. It matches
// persistence.ErrUnavailable, which the registry answers as persistence degraded
// (docs/protocol.md#degraded-persistence).
type UnavailableError struct {
	Op       string        // what was attempted, in plain words
	Deadline time.Duration // the deadline it had (0: not a timeout)
	Err      error         // the client's error
}

func (e *UnavailableError) Error() string {
	if e.Deadline > 0 {
		return fmt.Sprintf("cluster: %s: no answer within %v (is a quorum of the cluster up?): %v", e.Op, e.Deadline, e.Err)
	}
	return fmt.Sprintf("cluster: %s: the cluster is unavailable: %v", e.Op, e.Err)
}

// Is matches persistence.ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == persistence.ErrUnavailable }

// Unwrap returns the client's error.
func (e *UnavailableError) Unwrap() error { return e.Err }

// ErrNotReady: the node has not created (or found) its streams and buckets yet — it waits
// for a quorum of the cluster. It matches persistence.ErrUnavailable.
var ErrNotReady = &UnavailableError{Op: "starting", Err: errors.New("the cluster's streams are not ready yet")}

// ErrPublishQueueFull: more records wait to be published than Config.MaxPublishQueue
// (overflow policy: refuse the newest at once). It matches registry.ErrOverloaded.
var ErrPublishQueueFull = fmt.Errorf("cluster: the publish queue is full: %w", registry.ErrOverloaded)

// unanswered reports an error that says no server received the request.
func unanswered(err error) bool {
	var apiErr *jetstream.APIError
	var legacyErr *nats.APIError
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled) || (errors.As(err, &apiErr) && apiErr.Code == 503) ||
		(errors.As(err, &legacyErr) && legacyErr.Code == 503)
}

// errDuplicateInProcess is JetStream's answer to a message sent again while the stream
// still processes an earlier copy with the same id: the outcome is not known yet.
const errDuplicateInProcess jetstream.ErrorCode = 10158

// errStreamNotFound is JetStream's answer about one of the cluster's streams that this
// node's server does not know (yet): a node catching up with the cluster's meta layer. The
// cluster's streams are created at start and never deleted, so it means "not now".
const errStreamNotFound jetstream.ErrorCode = 10059

// errNoMessageFound is JetStream's answer to a message get that found no message.
const errNoMessageFound jetstream.ErrorCode = 10037

// classify turns an error of a JetStream call with deadline d into a classified one:
// unavailability (timeouts, no responders, a closed or reconnecting connection, JetStream
// answering 503) becomes an *UnavailableError; anything else is returned as it is.
func classify(op string, d time.Duration, err error) error {
	if err == nil {
		return nil
	}
	var ue *UnavailableError
	if errors.As(err, &ue) {
		return err
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, jetstream.ErrAsyncPublishTimeout):
		return &UnavailableError{Op: op, Deadline: d, Err: err}
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrConnectionDraining), errors.Is(err, jetstream.ErrJetStreamNotEnabled),
		// The connection dropped with the request in flight (a restarting NATS server).
		errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrNoServers),
		errors.Is(err, jetstream.ErrJetStreamPublisherClosed),
		// A snapshot read (an object store's consumer) that stopped hearing from its stream,
		// or whose stream changed leader.
		errors.Is(err, jetstream.ErrNoHeartbeat), errors.Is(err, jetstream.ErrConsumerLeadershipChanged),
		// More publishes wait for the stream's acknowledgement than the client allows: the
		// stream does not keep up.
		errors.Is(err, jetstream.ErrTooManyStalledMsgs):
		return &UnavailableError{Op: op, Err: err}
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.Code == 503 || apiErr.ErrorCode == errDuplicateInProcess || apiErr.ErrorCode == errStreamNotFound) {
		return &UnavailableError{Op: op, Err: err}
	}
	// Some calls (a key-value watch's consumer) still answer with the older client's error
	// type, e.g. "JetStream system temporarily unavailable" (503) while a leader is elected.
	var legacyErr *nats.APIError
	if errors.As(err, &legacyErr) && legacyErr.Code == 503 {
		return &UnavailableError{Op: op, Err: err}
	}
	return fmt.Errorf("cluster: %s: %w", op, err)
}
