package persistence

import (
	"context"
	"sync"
)

// Configuration values written by the group committer. PutConfig writes a value in a
// transaction of its own (an fsync each); QueueConfig hands it to the committer instead, so
// that it shares the transaction, and the fsync, of the appends around it. A peer keeps its
// count of local writes the hub has not confirmed this way: the count of a write is queued
// right behind the write's own append, and is on disk when the caller waits for it.

// ConfigWrite is a configuration value queued with QueueConfig.
type ConfigWrite struct {
	e       *engine
	key     string
	removes bool // a nil value: the key is removed
	done    chan struct{}
	once    sync.Once
	err     error // set before done is closed
}

// QueueConfig sets key to value in the host configuration map (a nil value removes the key)
// in the committer's next transaction that has room for it: it never waits for the disk. It
// is ordered like an append: written in the same transaction as the appends queued before it
// or in a later one, never before them, and two values queued for one key are written in
// the order they were queued. Until it is committed, Config and ConfigKeys do not see it. A
// failed commit keeps it queued and tries again, as it does appends.
//
// It counts against the commit queue's bound like an append (ErrBackpressure when full) and
// fails with ErrClosed after Close and ErrReadOnly on a read-only store.
func (e *engine) QueueConfig(key string, value []byte) (*ConfigWrite, error) {
	if err := checkName("config key", key); err != nil {
		return nil, err
	}
	data := append(make([]byte, 0, len(value)), value...)
	w := &ConfigWrite{e: e, key: key, removes: value == nil, done: make(chan struct{})}
	e.mu.Lock()
	switch {
	case e.closed:
		e.mu.Unlock()
		return nil, ErrClosed
	case e.readOnly:
		e.mu.Unlock()
		return nil, ErrReadOnly
	case e.qAppends >= e.opts.MaxQueuedAppends || (e.qAppends > 0 && e.qBytes+len(data) > e.opts.MaxQueuedBytes):
		e.mu.Unlock()
		e.backpressure.Add(1)
		return nil, ErrBackpressure
	}
	e.q = append(e.q, op{kind: opConfig, data: data, cfg: w})
	e.qAppends++
	e.qBytes += len(data)
	wake := e.qAppends == 1 || e.qAppends == e.opts.MaxBatch
	e.mu.Unlock()
	if wake {
		e.wake()
	}
	return w, nil
}

// Wait waits until the value is committed (nil), or until ctx ends (its error), or returns
// ErrClosed when Close abandoned it. Waiting makes the committer hurry, as WaitFlushed does.
func (w *ConfigWrite) Wait(ctx context.Context) error {
	select {
	case <-w.done:
		return w.err
	default:
	}
	e := w.e
	e.mu.Lock()
	e.waiting++
	e.mu.Unlock()
	e.hurryUp()
	defer func() {
		e.mu.Lock()
		e.waiting--
		e.mu.Unlock()
	}()
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done is closed once the value is committed or abandoned (Wait then says which).
func (w *ConfigWrite) Done() <-chan struct{} { return w.done }

func (w *ConfigWrite) finish(err error) {
	w.once.Do(func() {
		w.err = err
		close(w.done)
	})
}

// writeQueuedConfig writes a queued configuration value in the committer's transaction.
func writeQueuedConfig(w writer, o op) error {
	if o.cfg.removes {
		return w.deleteConfig(o.cfg.key)
	}
	return w.putConfig(o.cfg.key, o.data)
}

// countAppends counts the appends of a batch (which may carry queued configuration values).
func countAppends(batch []op) int {
	n := 0
	for _, o := range batch {
		if o.kind == opAppend {
			n++
		}
	}
	return n
}
