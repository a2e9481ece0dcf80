package persistence

import (
	"context"
	"fmt"
)

func (e *engine) Load(ctx context.Context, owner, ns string) (Doc, error) {
	key, err := checkKey(owner, ns)
	if err != nil {
		return Doc{}, err
	}
	// Appends still queued are collected before the read: each one is then either in the
	// read (committed meanwhile) or in this list.
	e.mu.Lock()
	var queued []op
	if r := e.res[key]; r != nil && !r.gone {
		queued = e.queuedLocked(r)
	}
	e.mu.Unlock()

	var doc Doc
	err = e.view(ctx, func(r reader) error {
		doc, err = r.doc(owner, ns)
		return err
	})
	if err != nil {
		return Doc{}, err
	}
	durable := len(doc.Updates)
	for _, o := range queued {
		if o.seq <= doc.Through {
			continue
		}
		if o.seq != doc.Through+1 {
			return Doc{}, fmt.Errorf("persistence: load %s/%s: queued append %d does not follow %d", owner, ns, o.seq, doc.Through)
		}
		doc.Updates = append(doc.Updates, append([]byte(nil), o.data...))
		doc.Through = o.seq
	}
	if e.readOnly {
		return doc, nil
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return Doc{}, ErrClosed
	}
	r := e.res[key]
	if r == nil || r.gone {
		r = &resident{key: key, assigned: doc.Through, flushed: doc.Through, logCount: durable, snapBytes: len(doc.Snapshot)}
		for _, u := range doc.Updates[:durable] {
			r.logBytes += len(u)
		}
		e.res[key] = r
	}
	r.released = false
	e.maybeCompactLocked(r)
	return doc, nil
}

// queuedLocked returns copies of the queued appends of r, oldest first.
func (e *engine) queuedLocked(r *resident) []op {
	var out []op
	if r.pending == 0 {
		return nil
	}
	for _, o := range e.q {
		if o.kind == opAppend && o.r == r {
			out = append(out, o)
		}
	}
	return out
}

func (e *engine) Append(owner, ns string, update []byte) (uint64, error) {
	return e.appendOp(owner, ns, update, nil, false)
}

// appendOp is Append with the change feed's note (AppendNoted), or with the note to follow
// (noteLater: AppendNoteLater).
func (e *engine) appendOp(owner, ns string, update, note []byte, noteLater bool) (uint64, error) {
	data := append(make([]byte, 0, len(update)), update...)
	if note != nil {
		note = append(make([]byte, 0, len(note)), note...)
	}
	key := docKey{owner, ns}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return 0, ErrClosed
	}
	if e.readOnly {
		e.mu.Unlock()
		return 0, ErrReadOnly
	}
	r := e.res[key]
	if r == nil || r.gone {
		e.mu.Unlock()
		return 0, ErrNotLoaded
	}
	if e.qAppends >= e.opts.MaxQueuedAppends || (e.qAppends > 0 && e.qBytes+len(data) > e.opts.MaxQueuedBytes) {
		e.mu.Unlock()
		e.backpressure.Add(1)
		return 0, ErrBackpressure
	}
	r.assigned++
	r.pending++
	seq := r.assigned
	e.q = append(e.q, op{kind: opAppend, r: r, seq: seq, data: data, note: note, noteLater: noteLater && e.feedOn()})
	e.qAppends++
	e.qBytes += len(data)
	wake := e.qAppends == 1 || e.qAppends == e.opts.MaxBatch
	e.mu.Unlock()
	if wake {
		e.wake()
	}
	return seq, nil
}

func (e *engine) Flushed(owner, ns string) uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r := e.res[docKey{owner, ns}]; r != nil {
		return r.flushed
	}
	return 0
}

func (e *engine) WaitFlushed(ctx context.Context, owner, ns string, seq uint64) error {
	e.mu.Lock()
	r := e.res[docKey{owner, ns}]
	e.mu.Unlock()
	if r == nil {
		return ErrNotLoaded
	}
	for {
		e.mu.Lock()
		switch {
		case seq <= r.flushed:
			e.mu.Unlock()
			return nil
		case seq > r.assigned:
			e.mu.Unlock()
			return fmt.Errorf("%w: append %d of %s/%s was not made", ErrInvalid, seq, owner, ns)
		case r.err != nil: // appends are abandoned in order: every later one failed too
			err := r.err
			e.mu.Unlock()
			return err
		}
		if r.wait == nil {
			r.wait = make(chan struct{})
		}
		w := r.wait
		e.waiting++
		e.mu.Unlock()
		e.hurryUp()
		var err error
		select {
		case <-w:
		case <-ctx.Done():
			err = ctx.Err()
		}
		e.mu.Lock()
		e.waiting--
		e.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

func (e *engine) Release(owner, ns string) {
	key := docKey{owner, ns}
	e.mu.Lock()
	defer e.mu.Unlock()
	if r := e.res[key]; r != nil {
		r.released = true
		e.dropIfIdleLocked(r)
	}
}

// dropIfIdleLocked forgets r once nothing refers to it any more.
func (e *engine) dropIfIdleLocked(r *resident) {
	if (r.released || r.gone) && r.pending == 0 && e.res[r.key] == r {
		delete(e.res, r.key)
	}
}

func (e *engine) ReplaceSnapshot(ctx context.Context, owner, ns string, snapshot []byte, through uint64) error {
	return e.replaceSnapshot(ctx, owner, ns, snapshot, through, false)
}

// replaceSnapshot is ReplaceSnapshot; noted (ReplaceSnapshotNoted) also writes a change-feed
// record.
func (e *engine) replaceSnapshot(ctx context.Context, owner, ns string, snapshot []byte, through uint64, noted bool) error {
	key, err := checkKey(owner, ns)
	if err != nil {
		return err
	}
	if e.readOnly {
		return ErrReadOnly
	}
	e.mu.Lock()
	r := e.res[key]
	var assigned uint64
	if r != nil && !r.gone {
		assigned = r.assigned
	}
	e.mu.Unlock()
	if r == nil || r.gone {
		return ErrNotLoaded
	}
	if through > assigned {
		return fmt.Errorf("%w: snapshot through %d, but %s/%s has only %d appends", ErrInvalid, through, owner, ns, assigned)
	}
	c := &control{key: key, data: append([]byte(nil), snapshot...), through: through, noted: noted && e.feedOn()}
	if c.noted {
		c.sv = e.stateVectorOf(snapshot)
	}
	err = e.control(ctx, opReplace, c)
	if err == nil && c.noted {
		e.changesCommitted()
	}
	return err
}

func (e *engine) Archive(ctx context.Context, owner, ns string) (ArchiveInfo, error) {
	return e.archive(ctx, owner, ns, ReasonArchive)
}

func (e *engine) Reset(ctx context.Context, owner, ns string) (ArchiveInfo, error) {
	return e.archive(ctx, owner, ns, ReasonReset)
}

func (e *engine) archive(ctx context.Context, owner, ns string, reason ArchiveReason) (ArchiveInfo, error) {
	key, err := checkKey(owner, ns)
	if err != nil {
		return ArchiveInfo{}, err
	}
	if e.readOnly {
		return ArchiveInfo{}, ErrReadOnly
	}
	c := &control{key: key, reason: reason}
	if err := e.control(ctx, opArchive, c); err != nil {
		return ArchiveInfo{}, err
	}
	return c.info, nil
}

func (e *engine) Archives(ctx context.Context, ns string) (list []ArchiveInfo, err error) {
	if ns != "" {
		if err := checkName("namespace id", ns); err != nil {
			return nil, err
		}
	}
	err = e.view(ctx, func(r reader) error {
		list, err = r.archives(ns)
		return err
	})
	return list, err
}

func (e *engine) LoadArchive(ctx context.Context, ns string, id uint64) (doc Doc, err error) {
	if err := checkName("namespace id", ns); err != nil {
		return Doc{}, err
	}
	err = e.view(ctx, func(r reader) error {
		doc, err = r.archive(ns, id)
		return err
	})
	return doc, err
}

// Docs lists every stored document with its size (for operators: nmcr store ls).
func (e *engine) Docs(ctx context.Context) (list []DocInfo, err error) {
	err = e.view(ctx, func(r reader) error {
		list, err = r.docs()
		return err
	})
	return list, err
}

// DocInfo gives the size of the stored document of (owner, ns) without reading it.
func (e *engine) DocInfo(ctx context.Context, owner, ns string) (info DocInfo, err error) {
	if _, err := checkKey(owner, ns); err != nil {
		return DocInfo{}, err
	}
	err = e.view(ctx, func(r reader) error {
		info, err = r.docInfo(owner, ns)
		return err
	})
	return info, err
}
