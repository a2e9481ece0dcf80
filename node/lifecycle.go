package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nomicore/nomicore/node/procs"
	"github.com/nomicore/nomicore/replication/protocol"
)

// Server is one HTTP listener of a binary.
type Server struct {
	Name     string
	Listener net.Listener
	Handler  http.Handler
	srv      *http.Server
}

// Start serves s in a goroutine; a failure of the listener is sent to failed.
func (s *Server) Start(log *slog.Logger, failed chan<- error) {
	s.srv = &http.Server{
		Handler:           s.Handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() {
		if err := s.srv.Serve(s.Listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			failed <- fmt.Errorf("%s listener: %w", s.Name, err)
		}
	}()
}

// Shutdown stops accepting and waits for the requests in progress (ctx bounds the wait, then
// the remaining connections are closed).
func (s *Server) Shutdown(ctx context.Context) error {
	if s.srv == nil {
		return s.Listener.Close()
	}
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
	}
	return err
}

// Step is one stage of the orderly shutdown.
type Step struct {
	Name string
	Run  func(ctx context.Context) error
}

// Signals are the process signals a serving binary reacts to.
type Signals struct {
	Stop <-chan os.Signal // SIGINT, SIGTERM: orderly shutdown
	Hup  <-chan os.Signal // SIGHUP: reload
	stop func()
	signalSubs
}

// NotifySignals subscribes to SIGINT, SIGTERM and SIGHUP.
func NotifySignals() *Signals {
	stop := make(chan os.Signal, 2)
	hup := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	signal.Notify(hup, syscall.SIGHUP)
	return &Signals{Stop: stop, Hup: hup, stop: func() { signal.Stop(stop); signal.Stop(hup) }}
}

// Release unsubscribes.
func (s *Signals) Release() { s.stop() }

// WaitForStop blocks until a stop signal (exit status 0) or a listener failure (status 1,
// one line on stderr), forwarding each SIGHUP to hup without blocking.
func (s *Signals) WaitForStop(log *slog.Logger, stderr io.Writer, name string, hup chan<- struct{}, failed <-chan error) int {
	for {
		select {
		case sig := <-s.Stop:
			log.Info("stopping", slog.String("signal", sig.String()))
			return 0
		case <-s.Hup:
			s.notifySubscribers()
			select {
			case hup <- struct{}{}:
			default:
			}
		case err := <-failed:
			log.Error("listener failed; stopping", slog.String("error", err.Error()))
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 1
		}
	}
}

// maxLocalWrite bounds one admin-API write: what one live transfer can carry — a single
// UPDATE, or a chunked one when the v2 generation is configured
// (docs/protocol.md#limits-and-defaults).
func maxLocalWrite(c *protocol.Config) int {
	if c.Generation == protocol.GenerationV2 {
		return c.MaxChunkedUpdateBytes
	}
	return c.MaxUpdateBytes
}

// maxLocalWriteFlag is the flag that sets maxLocalWrite.
func maxLocalWriteFlag(c *protocol.Config) string {
	if c.Generation == protocol.GenerationV2 {
		return "--max-chunked-update-bytes"
	}
	return "--max-update-bytes"
}

// LimitAttrs are the sizes the configuration allows, for the start line: the largest
// document a new replica can receive, catch-up difference, and local write.
func LimitAttrs(c *protocol.Config) slog.Attr {
	doc, diff := c.MaxBootstrapBytes, c.MaxSyncDiffBytes
	if c.Generation == protocol.GenerationV2 {
		doc, diff = c.MaxChunkedBootstrapBytes, c.MaxChunkedSyncDiffBytes
	}
	return slog.Group("limits", slog.Int("maxDocumentBytes", doc), slog.Int("maxCatchUpBytes", diff),
		slog.Int("maxLocalWriteBytes", maxLocalWrite(c)))
}

// ShutdownInOrder runs steps one after the other (docs/protocol.md#restart-and-shutdown:
// replication, then the namespaces' sessions and leases, the registry, the store), each
// bounded by the overall timeout, and arms a process watchdog: if the whole sequence has not
// returned within timeout (plus a second of grace), or a second stop signal arrives, it
// writes one line to stderr and exits the process with status 3. It returns the first step
// error.
func ShutdownInOrder(log *slog.Logger, stderr io.Writer, name string, timeout time.Duration, again <-chan os.Signal, steps []Step) error {
	done := make(chan struct{})
	watchdog := time.AfterFunc(timeout+time.Second, func() {
		fmt.Fprintf(stderr, "%s: shutdown did not finish within %v; exiting\n", name, timeout)
		os.Exit(3)
	})
	defer watchdog.Stop()
	go func() {
		select {
		case <-again:
			fmt.Fprintf(stderr, "%s: second stop signal; exiting without finishing the shutdown\n", name)
			os.Exit(3)
		case <-done:
		}
	}()
	defer close(done)

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var first error
	for _, s := range steps {
		t0 := time.Now()
		err := s.Run(ctx)
		attrs := []any{slog.String("step", s.Name), slog.Float64("tookMs", float64(time.Since(t0).Microseconds())/1000)}
		if err != nil {
			log.Error("shutdown step failed", append(attrs, slog.String("error", err.Error()))...)
			if first == nil {
				first = fmt.Errorf("%s: %w", s.Name, err)
			}
			continue
		}
		log.Info("shutdown step done", attrs...)
	}
	return first
}

// Go runs loop in a goroutine with a context of its own and returns the step that stops it:
// cancel, then wait for loop to return (or for the step's ctx).
func Go(loop func(ctx context.Context)) func(ctx context.Context) error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		loop(ctx)
	}()
	return func(stepCtx context.Context) error {
		cancel()
		select {
		case <-done:
			return nil
		case <-stepCtx.Done():
			return stepCtx.Err()
		}
	}
}

// StartProcs sets the processor count --procs asks for and, for auto, starts the loop that
// adapts it to the load (package procs); the step it returns stops that loop.
func (c *Common) StartProcs(log *slog.Logger) func(ctx context.Context) error {
	run := procs.Apply(c.Procs, log)
	if run == nil {
		return func(context.Context) error { return nil }
	}
	return Go(run)
}
