package etcdlock

import (
	"context"
	"math/rand/v2"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A lossWatch is the one watch of the Locker's prefix that tells when the
// acquisitions of l.lost end: its goroutine dispatches each deletion or creation
// of a key to the entries of that key, and reads the keys of the entries that it
// may have missed events of (checks). It starts with the first entry, and ends
// watchIdle after the last one is gone. l.mu guards its fields.
//
// Why no event is missed: the watch starts at the store's revision when it was
// created (created, seen), and seen then follows the revision of the events it
// dispatched; every event after seen is dispatched later. An entry whose fence
// is at or after seen when it registers gets every event after its fence. An
// entry registered earlier than that (its fence is before seen), and every entry
// when the watch starts anew, is queued for a check: a linearizable read of its
// key, sent after the entry registered and after the watch was created, so that
// the read's revision is at least seen; an event before that revision shows in
// the read (the key is gone, or has another create revision), and one after it is
// dispatched to the entry.
type lossWatch struct {
	ctx      context.Context // ends with the watch: Close, the client closed, or idle
	cancel   context.CancelFunc
	created  bool  // the watch (its latest start) was created
	gen      int   // counts the starts that were created
	seen     int64 // every event after seen is still to be dispatched; set once created
	checks   []*lossEntry
	checking bool        // a goroutine runs the checks
	idle     *time.Timer // ends the watch when it has had no entry for watchIdle
}

// watchLosses has the Locker's watch tell when e ends: it starts the watch, or
// queues a check of e when the watch may have dispatched events of e already.
// l.mu is held, and !l.shut.
func (l *Locker) watchLosses(e *lossEntry) {
	lw := l.lossW
	if lw == nil {
		ctx, cancel := l.background()
		lw = &lossWatch{ctx: ctx, cancel: cancel}
		l.lossW = lw
		l.spawn(func() { l.runLossWatch(lw) }) // l.mu held, !l.shut
		return                                 // its creation checks e
	}
	if lw.idle != nil {
		lw.idle.Stop() // if it fired, it finds an entry and leaves lw alone
		lw.idle = nil
	}
	if lw.created && int64(e.fence) < lw.seen {
		lw.queue(e)
		l.runChecks(lw)
	}
}

// queue queues a check of e. l.mu is held.
func (lw *lossWatch) queue(e *lossEntry) {
	if !e.queued {
		e.queued = true
		lw.checks = append(lw.checks, e)
	}
}

// runChecks starts the goroutine that runs the queued checks, unless it runs or
// the watch is not created. l.mu is held.
func (l *Locker) runChecks(lw *lossWatch) {
	if lw.checking || !lw.created || len(lw.checks) == 0 || l.shut || lw.ctx.Err() != nil {
		return
	}
	lw.checking = true
	l.spawn(func() { l.check(lw) }) // l.mu held, !l.shut
}

// idleLosses ends the watch watchIdle from now, unless an entry comes first.
// l.mu is held.
func (l *Locker) idleLosses() {
	lw := l.lossW
	if lw == nil || lw.idle != nil {
		return
	}
	lw.idle = time.AfterFunc(l.watchIdle, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.lossW == lw && len(l.lost) == 0 {
			l.lossW = nil
			lw.cancel()
		}
	})
}

// runLossWatch runs the watch lw until its context ends (Close, the client
// closed, or idle), starting it anew, after a pause, whenever it fails.
func (l *Locker) runLossWatch(lw *lossWatch) {
	defer lw.cancel()
	pause := retryFirst
	for {
		if l.watchLossesOnce(lw) {
			pause = retryFirst
		}
		l.mu.Lock()
		lw.created = false // events are missed until the next start, which checks every entry
		l.mu.Unlock()
		t := time.NewTimer(pause/2 + rand.N(pause/2+1))
		select {
		case <-t.C:
		case <-lw.ctx.Done():
			t.Stop()
		}
		if lw.ctx.Err() != nil {
			break
		}
		pause = min(2*pause, retryMax)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lossW != lw {
		return // idle, or Close ended the entries
	}
	// The client was closed: nothing can tell any more whether the acquisitions
	// end. Their channels stay open (the leases may still be held), as for a
	// watch that the client's closing ends.
	l.lossW = nil
	if lw.idle != nil {
		lw.idle.Stop()
	}
	for k, head := range l.lost {
		for e := head; e != nil; e = e.next {
			e.gone = true
		}
		delete(l.lost, k)
	}
}

// watchLossesOnce starts the watch of the prefix, from the store's current
// revision, and dispatches its events until it fails or its context ends. It
// reports whether the watch was created.
func (l *Locker) watchLossesOnce(lw *lossWatch) (created bool) {
	ctx, cancel := context.WithCancel(lw.ctx)
	defer cancel()
	wch := l.client.Watch(ctx, l.o.Prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	for resp := range wch {
		if resp.Canceled || resp.CompactRevision != 0 || resp.Err() != nil {
			return created // compacted, or cancelled by the server
		}
		l.mu.Lock()
		if resp.Created && !lw.created {
			created = true
			lw.created, lw.seen = true, resp.Header.Revision
			lw.gen++
			for _, head := range l.lost {
				for e := head; e != nil; e = e.next {
					if int64(e.fence) < lw.seen {
						lw.queue(e)
					}
				}
			}
			l.runChecks(lw)
		}
		l.dispatch(lw, resp.Events)
		l.mu.Unlock()
	}
	return created
}

// dispatch ends the entries that events end: a deletion of their key, or a
// creation with another create revision, after their fence. l.mu is held.
func (l *Locker) dispatch(lw *lossWatch, events []*clientv3.Event) {
	for _, ev := range events {
		rev := ev.Kv.ModRevision
		lw.seen = max(lw.seen, rev)
		for e := l.lost[string(ev.Kv.Key)]; e != nil; {
			next := e.next
			if rev > int64(e.fence) && (ev.Type == clientv3.EventTypeDelete || ev.Kv.CreateRevision != int64(e.fence)) {
				l.unlinkLoss(e)
				e.end()
			}
			e = next
		}
	}
}

// check runs the queued checks, until none is left or the watch is not created:
// it reads their keys, up to maxBatchReads in one transaction, and ends the
// entries whose acquisition ended (their key is gone or has another create
// revision). A read that fails is tried again after a pause, and one that started
// before the watch's latest start is tried again too, unless it showed the end.
func (l *Locker) check(lw *lossWatch) {
	pause := retryFirst
	for {
		l.mu.Lock()
		if !lw.created || len(lw.checks) == 0 || lw.ctx.Err() != nil {
			lw.checking = false
			l.mu.Unlock()
			return
		}
		gen := lw.gen
		n := min(len(lw.checks), maxBatchReads)
		batch := make([]*lossEntry, 0, n)
		for _, e := range lw.checks[:n] {
			e.queued = false // a start from now on checks it again
			if !e.gone {
				batch = append(batch, e)
			}
		}
		clear(lw.checks[:n])
		lw.checks = lw.checks[n:]
		if len(lw.checks) == 0 {
			lw.checks = nil
		}
		l.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		ops := make([]clientv3.Op, len(batch))
		for i, e := range batch {
			ops[i] = clientv3.OpGet(e.key, clientv3.WithKeysOnly())
		}
		var resp *clientv3.TxnResponse
		err := l.call(lw.ctx, func(ctx context.Context) (err error) {
			resp, err = l.client.Txn(ctx).Then(ops...).Commit()
			return err
		})
		failed := false
		l.mu.Lock()
		for i, e := range batch {
			var r *pb.RangeResponse
			if err == nil {
				r = resp.Responses[i].GetResponseRange()
			}
			switch {
			case e.gone:
			case r != nil && (len(r.Kvs) == 0 || r.Kvs[0].CreateRevision != int64(e.fence)):
				l.unlinkLoss(e)
				e.end()
			case r == nil || gen != lw.gen || !lw.created:
				failed = failed || r == nil
				lw.queue(e) // again
			}
		}
		l.mu.Unlock()
		if !failed {
			pause = retryFirst
			continue
		}
		t := time.NewTimer(pause/2 + rand.N(pause/2+1))
		select {
		case <-t.C:
		case <-lw.ctx.Done():
			t.Stop()
		}
		pause = min(2*pause, retryMax)
	}
}
