package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/waitq"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// watchIdle is how long a key's watch stays after its last Wait returned, so that
// the Waits of a wait loop (TryLock, Wait, TryLock, Wait, ...) find the key
// watched, and a TryLock that found the key held since the watch started serves as
// the next Wait's check.
const watchIdle = 2 * time.Second

// A keyWatch is the watch of one key that the Waits of a Locker share. Its
// goroutine records the key's deletions; l.mu guards its fields.
type keyWatch struct {
	ctx     context.Context // the watch's: it ends with the watch
	cancel  context.CancelFunc
	ready   chan struct{} // closed once the watch started (created is set) or failed (err)
	created int64         // the revision at which the watch started: it sees every later event
	lastDel int64         // the revision of the last deletion of the key it saw
	ended   chan struct{} // closed when the watch ends
	err     error         // why the watch ended; set before ended is closed
	refs    int           // Waits that use it
	idle    *time.Timer   // closes it when it has had no Wait for watchIdle
	done    chan struct{} // closed when its goroutine has returned
	chasing bool          // a chase of the holder's lease runs (chase.go)
}

// watch returns the watch of key (the etcd key k), starting it if needed, and
// counts one more Wait that uses it; the Wait must call unwatch. It returns nil
// after Close.
func (l *Locker) watch(key, k string) *keyWatch {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shut {
		return nil
	}
	kw := l.watches[key]
	if kw == nil {
		// The watch outlives the Wait that starts it: it gets a context of its own,
		// ended by its idle timer, when the client is closed, or by Close.
		ctx, cancel := l.background()
		kw = &keyWatch{ctx: ctx, cancel: cancel, ready: make(chan struct{}), ended: make(chan struct{}), done: make(chan struct{})}
		l.watches[key] = kw
		// From the store's current revision: etcd serves a watch from an earlier
		// one ("unsynced") from a loop that runs every 100ms, which would delay
		// wake-ups by up to that much.
		wch := l.client.Watch(clientv3.WithRequireLeader(ctx), k, clientv3.WithCreatedNotify(), clientv3.WithFilterPut())
		l.spawn(func() { l.runWatch(key, kw, wch) }) // l.mu held, !l.shut
	}
	if kw.idle != nil {
		kw.idle.Stop() // if it fired, closeWatch finds a Wait and leaves kw alone
		kw.idle = nil
	}
	kw.refs++
	return kw
}

// unwatch counts one Wait less on kw; the last one leaves it for watchIdle.
func (l *Locker) unwatch(key string, kw *keyWatch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	kw.refs--
	if kw.refs == 0 && l.watches[key] == kw {
		kw.idle = time.AfterFunc(l.watchIdle, func() { l.closeWatch(key, kw) })
	}
}

// closeWatch ends kw if it is still key's watch and no Wait uses it.
func (l *Locker) closeWatch(key string, kw *keyWatch) {
	l.mu.Lock()
	if l.watches[key] != kw || kw.refs > 0 {
		l.mu.Unlock()
		return
	}
	delete(l.watches, key)
	l.mu.Unlock()
	kw.cancel()
}

// runWatch records the events of wch in kw until the watch ends: a deletion of
// the key wakes the first of the Locker's Waits of the key (internal/waitq), which
// hands the turn on when its caller does not try the key; when the watch ends it
// wakes every Wait of the key and forgets kw, so that the next Wait starts a new
// watch.
func (l *Locker) runWatch(key string, kw *keyWatch, wch clientv3.WatchChan) {
	defer close(kw.done)
	err := errors.New("the watch closed (client closed?)")
	for resp := range wch {
		if werr := resp.Err(); werr != nil {
			err = fmt.Errorf("watch: %w", werr)
			break
		}
		l.mu.Lock()
		if resp.Created && kw.created == 0 {
			kw.created = resp.Header.Revision
			close(kw.ready)
		}
		deleted := false
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				kw.lastDel = ev.Kv.ModRevision
				deleted = true
			}
		}
		l.mu.Unlock()
		if deleted {
			l.waiters.Released(key)
		}
	}
	kw.cancel()
	if l.closing.Err() != nil {
		err = distlock.ErrClosed
	}
	l.mu.Lock()
	kw.err = err
	if kw.created == 0 {
		close(kw.ready)
	}
	close(kw.ended)
	if l.watches[key] == kw {
		delete(l.watches, key)
	}
	l.mu.Unlock()
	l.waiters.WakeAll(key)
}

// Wait returns nil when key may be free: at once when it is not locked, else when a
// deletion of the key (Unlock, or its lease expired) wakes it, or once the holder's
// ttl (from when it was seen) plus a second has passed, whichever comes first. When
// ctx ends first it returns errors.Join(ErrLocked, ctx.Err()). While it waits, its
// Locker probes the holder's etcd lease as its expiry nears, and revokes it once
// the leader holds it expired (see Failover in the package doc), so that the key
// of a holder that vanished is freed soon after its lease's expiry, not up to
// half a second later.
//
// A deletion wakes one Wait of the Locker on the key, the one that waited longest;
// the next one wakes when no TryLock of the key starts on the Locker within 20ms
// (the woken caller gave up) or that TryLock fails other than by finding the key
// held (internal/waitq). So a release costs one TryLock per Locker that waits for
// the key, however many callers wait. When the watch ends, every Wait wakes.
//
// It watches the key and then checks that the key is held, so that a deletion
// between the two is not missed. The Waits of one Locker on one key share one
// watch, which stays for 2s after the last of them returned. The check needs no
// request when a TryLock of this Locker found the key held at a revision the watch
// covers (the usual case in distlock.Lock's loop of TryLock and Wait); otherwise
// it reads the key, linearizably. The request timeout (Options.RequestTimeout)
// bounds the start of the watch and that read: when a member cannot serve them (it
// is cut off from its peers, say), Wait returns an error instead of blocking until
// ctx ends, and distlock.Lock backs off. A watch that the member ends because it
// lost its leader ends the Wait with an error too. Close ends a Wait in flight
// with an error wrapping distlock.ErrClosed.
func (l *Locker) Wait(ctx context.Context, key string) error {
	cctx, id, err := l.begin(ctx)
	if err != nil {
		return opError("Wait", key, err)
	}
	defer l.end(id)
	if err := l.wait(cctx, key); err != nil {
		return fail(cctx, "Wait", key, err)
	}
	return nil
}

func (l *Locker) wait(ctx context.Context, key string) error {
	if err := driver.ValidateKey(key, MaxKeyLen); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return gaveUp(ctx)
	}
	k := l.etcdKey(key)
	kw := l.watch(key, k)
	if kw == nil {
		return distlock.ErrClosed
	}
	defer l.unwatch(key, kw)
	// In line before the check below: a deletion after it wakes a Wait of the
	// line, this one or one before it.
	w := l.waiters.Join(key)
	defer w.Leave()
	h, err := l.checkHeld(ctx, key, k, kw)
	if err != nil {
		return waitFailed(ctx, err)
	}
	if !h.held {
		return nil
	}
	// Free the key as soon as the leader holds the holder's lease expired, if its
	// holder stops refreshing it (chase.go).
	l.startChase(kw, k, h)
	return l.awaitRelease(ctx, kw, w, h)
}

// A holderSeen is what Wait's check found: whether the key was held at a
// revision its watch covers (rev), when (taken before the request that saw it),
// on which etcd lease and for how long (the holder's ttl in whole seconds; 0: no
// lease), and the watch's last deletion then.
type holderSeen struct {
	held    bool
	at      time.Time
	rev     int64
	lease   clientv3.LeaseID
	secs    int64
	lastDel int64
}

// checkHeld waits until kw has started (within the request timeout) and tells
// whether key (etcd key k) is held at a revision kw covers: from a sighting of
// this Locker's TryLock, or a linearizable read.
func (l *Locker) checkHeld(ctx context.Context, key, k string, kw *keyWatch) (holderSeen, error) {
	reqTimeout := l.o.RequestTimeout
	check, cancel := context.WithTimeout(ctx, reqTimeout)
	defer cancel()
	select {
	case <-kw.ready:
	case <-check.Done():
		return holderSeen{}, fmt.Errorf("the watch did not start within %v", reqTimeout)
	}
	l.mu.Lock()
	created, lastDel, werr := kw.created, kw.lastDel, kw.err
	l.mu.Unlock()
	if werr != nil {
		return holderSeen{}, werr
	}
	if s, ok := l.sightingOf(key); ok && s.rev >= created {
		// The watch saw every deletion after the sighting.
		return holderSeen{held: lastDel <= s.rev, at: s.at, rev: s.rev, lease: clientv3.LeaseID(s.lease), secs: s.secs, lastDel: lastDel}, nil
	}
	// A deletion after Wait joined the line wakes the line; the read is after it.
	h := holderSeen{at: time.Now(), lastDel: lastDel}
	get, err := l.get(check, k)
	if err != nil && check.Err() != nil && ctx.Err() == nil {
		// Not the caller's deadline: do not wrap it.
		return h, fmt.Errorf("read the key: no answer within %v (%v)", reqTimeout, err)
	}
	if err != nil {
		return h, fmt.Errorf("read the key: %w", err)
	}
	if len(get.Kvs) == 0 {
		return h, nil
	}
	h.held = true
	if kv := get.Kvs[0]; kv.Lease != 0 {
		h.secs, _ = parseValue(kv.Value)
		h.secs = max(h.secs, 1)
		h.lease, h.rev = clientv3.LeaseID(kv.Lease), get.Header.Revision
	}
	return h, nil
}

// awaitRelease waits, after Wait's check found the key held (h), until a deletion
// wakes w, kw ends, the holder's ttl plus a second has passed since it was seen,
// or ctx ends.
func (l *Locker) awaitRelease(ctx context.Context, kw *keyWatch, w *waitq.Waiter, h holderSeen) error {
	// The holder's lease ends within its ttl, unless the server raised the TTL to
	// its minimum or the holder renewed it: then Wait returns early, and the
	// caller's next TryLock tells. etcd deletes the key of an expired lease, which
	// the watch sees too; the timer only bounds a wait whose watch misses that.
	var timeout <-chan time.Time
	if h.secs > 0 {
		timer := time.NewTimer(time.Duration(h.secs+1)*time.Second - time.Since(h.at))
		defer timer.Stop()
		timeout = timer.C
	}
	select {
	case <-w.Woken():
	case <-kw.ended:
	case <-timeout:
		return nil
	case <-ctx.Done():
		return gaveUp(ctx)
	}
	if l.closing.Err() != nil {
		return distlock.ErrClosed
	}
	l.mu.Lock()
	werr := kw.err
	deleted := kw.lastDel > h.lastDel
	l.mu.Unlock()
	if werr != nil && !deleted {
		return waitFailed(ctx, werr)
	}
	return nil
}

// gaveUp is Wait's error when ctx ended first.
func gaveUp(ctx context.Context) error {
	return errors.Join(fmt.Errorf("wait: %w", distlock.ErrLocked), ctx.Err())
}

// waitFailed is Wait's error err, or gaveUp when ctx ended (err may be its
// consequence).
func waitFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return gaveUp(ctx)
	}
	return err
}
