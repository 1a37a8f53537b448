package postgres

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/distlock/distlock/internal/waitq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Timings of a listening connection.
const (
	// listenCloseTimeout bounds the clean close of a listening connection.
	listenCloseTimeout = time.Second
	// listenIdle is how long a listening connection stays open after its last Wait
	// returned, so that the Waits of a wait loop (TryLock, Wait, TryLock, Wait,
	// ...) do not each open a connection, which costs PostgreSQL a new backend
	// process.
	listenIdle = 5 * time.Second
	// listenPing: when no notification arrived for this long, the listener checks
	// its connection with a round trip (bounded by as long again), so that a
	// connection that died silently is replaced.
	listenPing = 5 * time.Second
)

// A listener shares one listening connection among the Wait calls of a Locker.
// The connection is opened by the first Wait and closed listenIdle after the last
// one returned (or by Close), so that an idle Locker soon holds no connection and
// no goroutine.
type listener struct {
	pool   *pgxpool.Pool
	listen string        // the LISTEN statement
	table  int32         // the first key of the table's advisory locks (tableID)
	idle   time.Duration // listenIdle; tests shorten it
	ping   time.Duration // listenPing; tests shorten it
	q      *waitq.Queue  // the Locker's waiters, by payload: a notification wakes one

	testRegister func() // tests: called before each registration statement

	mu  sync.Mutex
	cur *listenConn // the connection new waiters join; nil when none
}

// A listenConn is one listening connection and the waiters that joined it.
type listenConn struct {
	ready   chan struct{} // closed once LISTEN took effect, or failed (err)
	err     error         // set before ready is closed
	cancel  context.CancelFunc
	done    chan struct{}        // closed when run has returned
	waiters map[*waiter]struct{} // guarded by listener.mu
	idle    *time.Timer          // guarded by listener.mu: closes an idle connection
	regs    map[string]*reg      // by payload; guarded by listener.mu
	pending []*reg               // waiting for their lock; guarded by listener.mu
	wake    context.CancelFunc   // interrupts run's wait for a notification; guarded by listener.mu
}

// A waiter is one Wait call's subscription to the notifications of one key.
type waiter struct {
	payload string        // hex SHA-256 of the key
	ch      chan struct{} // receives when the connection failed (releases go to listener.q)
	lc      *listenConn
	reg     *reg
}

func (w *waiter) wake() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// subscribe registers a waiter for payload and returns once the listening
// connection it joined is listening and holds the registration of key (see
// register.go), so that every later Unlock of the key notifies it.
func (ln *listener) subscribe(ctx context.Context, payload string, key int32) (*waiter, error) {
	ln.mu.Lock()
	lc := ln.cur
	if lc == nil {
		lc = ln.start()
		ln.cur = lc
	}
	if lc.idle != nil {
		lc.idle.Stop() // if it fired, closeIdle finds a waiter and leaves lc open
		lc.idle = nil
	}
	rg := lc.regs[payload]
	if rg == nil {
		rg = &reg{key: key, ready: make(chan struct{})}
		lc.regs[payload] = rg
		lc.pending = append(lc.pending, rg)
		if lc.wake != nil {
			lc.wake()
		}
	}
	rg.users++
	w := &waiter{payload: payload, ch: make(chan struct{}, 1), lc: lc, reg: rg}
	lc.waiters[w] = struct{}{}
	ln.mu.Unlock()

	select {
	case <-rg.ready: // after lc.ready
		if rg.err != nil {
			ln.unsubscribe(w)
			return nil, rg.err
		}
		return w, nil
	case <-ctx.Done():
		ln.unsubscribe(w)
		return nil, ctx.Err()
	}
}

// unsubscribe removes w. When it was the last waiter of a connection that listens,
// the connection stays for listenIdle, for the next Wait; the last waiter of a
// connection that is not listening (yet) or was retired closes it and waits until
// its goroutine has returned.
func (ln *listener) unsubscribe(w *waiter) {
	lc := w.lc
	ln.mu.Lock()
	delete(lc.waiters, w)
	if w.reg.users--; w.reg.users == 0 {
		w.reg.idle = time.Now()
	}
	last := len(lc.waiters) == 0
	if last && ln.cur == lc {
		if listening(lc) {
			lc.idle = time.AfterFunc(ln.idle, func() { ln.closeIdle(lc) })
			last = false
		} else {
			ln.cur = nil
		}
	}
	ln.mu.Unlock()
	if last {
		lc.cancel()
		<-lc.done
	}
}

// listening reports whether lc is listening: LISTEN took effect.
func listening(lc *listenConn) bool {
	select {
	case <-lc.ready:
		return lc.err == nil
	default:
		return false
	}
}

// closeIdle closes lc if it is still the current connection and has no waiters.
func (ln *listener) closeIdle(lc *listenConn) {
	ln.mu.Lock()
	if ln.cur != lc || len(lc.waiters) > 0 {
		ln.mu.Unlock()
		return
	}
	ln.cur = nil
	ln.mu.Unlock()
	lc.cancel()
	<-lc.done
}

// close closes the current connection, if any, at once: its waiters are woken.
func (ln *listener) close() {
	ln.mu.Lock()
	lc := ln.cur
	ln.cur = nil
	if lc != nil && lc.idle != nil {
		lc.idle.Stop()
	}
	ln.mu.Unlock()
	if lc != nil {
		lc.cancel()
		<-lc.done
	}
}

// start starts a listening connection; ln.mu is held.
func (ln *listener) start() *listenConn {
	ctx, cancel := context.WithCancel(context.Background())
	lc := &listenConn{
		ready:   make(chan struct{}),
		cancel:  cancel,
		done:    make(chan struct{}),
		waiters: make(map[*waiter]struct{}),
		regs:    make(map[string]*reg),
	}
	go ln.run(ctx, lc)
	return lc
}

// run opens a connection with the pool's settings, listens on the channel and
// hands each notification to the waiters of its key until ctx is cancelled or the
// connection fails; then it wakes every remaining waiter (it may have missed their
// notification) and closes the connection.
func (ln *listener) run(ctx context.Context, lc *listenConn) {
	defer close(lc.done)
	conn, err := pgx.ConnectConfig(ctx, ln.pool.Config().ConnConfig)
	if err == nil {
		_, err = conn.Exec(ctx, ln.listen)
	}
	if err != nil {
		lc.err = err
		ln.retire(lc, err)
		close(lc.ready)
		if conn != nil {
			closeConn(conn)
		}
		return
	}
	close(lc.ready)
	var swept time.Time
	for {
		if err := ln.sync(ctx, conn, lc, &swept); err != nil {
			break
		}
		ln.mu.Lock()
		if len(lc.pending) > 0 {
			ln.mu.Unlock()
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, ln.ping)
		lc.wake = cancel
		ln.mu.Unlock()
		n, err := conn.WaitForNotification(wctx)
		ln.mu.Lock()
		lc.wake = nil
		ln.mu.Unlock()
		woken := errors.Is(wctx.Err(), context.Canceled)
		cancel()
		if n != nil {
			ln.deliver(n.Payload)
		}
		if err != nil {
			if ctx.Err() != nil || wctx.Err() == nil {
				break // closed, or the connection failed
			}
			if woken {
				continue // a new key to register
			}
			// Nothing for a while: check that the connection still works. A
			// notification that arrives meanwhile is kept for the next wait.
			pctx, cancel := context.WithTimeout(ctx, ln.ping)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				break
			}
			continue
		}
	}
	ln.retire(lc, errListenClosed)
	closeConn(conn)
}

// deliver reports a release of payload's key to the Locker's queue, which wakes
// the first of its Waits.
func (ln *listener) deliver(payload string) {
	ln.q.Released(payload)
}

// errListenClosed fails the registrations that a closing connection did not make.
var errListenClosed = errors.New("the listening connection closed")

// retire stops new waiters from joining lc and wakes the ones it has; the
// registrations still pending fail with err.
func (ln *listener) retire(lc *listenConn, err error) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if ln.cur == lc {
		ln.cur = nil
	}
	for w := range lc.waiters {
		w.wake()
	}
	for _, rg := range lc.pending {
		rg.fail(err)
	}
	lc.pending = nil
}

func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), listenCloseTimeout)
	defer cancel()
	_ = conn.Close(ctx)
}
