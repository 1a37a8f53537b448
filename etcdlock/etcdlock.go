package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/waitq"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// backend is the Backend of the Locker's errors.
const backend = "etcdlock"

// A Locker acquires leases on keys in etcd through one clientv3.Client. It
// implements distlock.Locker, distlock.Waiter, distlock.Inspector,
// distlock.LossNotifier and distlock.LossWatcher, and is safe for concurrent use. The zero value is not
// usable; call New, and Close when done.
type Locker struct {
	client   *clientv3.Client
	callOpts []grpc.CallOption // the client's (clientCallOpts)
	direct   *directKV         // TryLock's and Unlock's transactions; nil: client.KV's
	shareKA  bool              // refreshes share the streams of ka (keepalive.go)
	ka       keepAlives
	o        Options // with defaults

	watchIdle time.Duration // how long a key's watch outlives its last Wait; tests shorten it

	// closing ends when Close is called: it ends the Locker's watches (Close
	// cancels the calls in flight through calls).
	closing context.Context
	stop    context.CancelFunc
	// calls cancel the calls in flight, by id; Close cancels them (l.mu).
	calls    map[uint64]context.CancelCauseFunc
	lastCall uint64
	// wg counts the calls in flight and the Locker's goroutines; Close waits for it.
	wg     sync.WaitGroup
	closed chan struct{} // closed when Close has finished

	mu       sync.Mutex
	shut     bool                  // Close was called; guards wg.Add
	lost     map[string]*lossEntry // by etcd key: the acquisitions that Lost and AfterLost wait for
	lossW    *lossWatch            // the watch that ends them, while there are any (and watchIdle after)
	sighting map[string]sighting   // what failed TryLocks saw, for Wait
	watches  map[string]*keyWatch  // by key: the watches that Waits share
	pool     leasePool             // spare leases, and the leases of acquisitions

	waiters *waitq.Queue // wakes the Waits of a key one at a time

	reads readBatch // Renew's reads, batched

	// chaseProbes and chaseRevokes count the chase's LeaseTimeToLive probes and
	// its revocations of expired leases (chase.go).
	chaseProbes, chaseRevokes atomic.Int64
}

var (
	_ distlock.Locker       = (*Locker)(nil)
	_ distlock.Waiter       = (*Locker)(nil)
	_ distlock.Inspector    = (*Locker)(nil)
	_ distlock.LossNotifier = (*Locker)(nil)
	_ distlock.LossWatcher  = (*Locker)(nil)
)

// New returns a Locker that uses client, which the caller keeps and closes (after
// the Locker's Close: closing the client first ends the Locker's watches and fails
// its calls). New does no I/O. A nil client or invalid opts is the returned error,
// an *distlock.OpError wrapping distlock.ErrInvalid that names the bad value.
func New(client *clientv3.Client, opts *Options) (*Locker, error) {
	if client == nil {
		return nil, opError("New", "", fmt.Errorf("%w: nil *clientv3.Client", distlock.ErrInvalid))
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, opError("New", "", err)
	}
	closing, stop := context.WithCancel(context.Background())
	callOpts := clientCallOpts(client)
	return &Locker{client: client, callOpts: callOpts, direct: newDirectKV(client, callOpts), shareKA: sharesKeepAlives(client), o: o, watchIdle: watchIdle, closing: closing, stop: stop, closed: make(chan struct{}),
		calls: make(map[uint64]context.CancelCauseFunc),
		lost:  make(map[string]*lossEntry), sighting: make(map[string]sighting), watches: make(map[string]*keyWatch),
		waiters: waitq.New(0),
		pool:    leasePool{spares: make(map[int64][]leaseInfo), held: make(map[lostKey]leaseInfo), pruneAt: 256}}, nil
}

// Close stops the Locker's background work and waits for it: calls in flight
// return (with an error wrapping distlock.ErrClosed unless they were done), the
// shared watches of Wait and the watch of Lost end, every Lost channel closes
// (a closed Locker can neither renew a lease nor watch it), and the spare leases
// (of released keys and of TryLocks that found their key held: they hold no key)
// are revoked, bounded by Options.CleanupTimeout, as are the revocations still
// running that failed calls started. Close does not close the clientv3.Client, and it does not release held
// leases: each stays held until its Unlock (before Close) or its ttl. Every call
// after Close returns an *distlock.OpError wrapping distlock.ErrClosed. Close is
// idempotent: a second call waits for the first one and returns nil.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.shut {
		l.mu.Unlock()
		<-l.closed
		return nil
	}
	l.shut = true
	l.endLosses()
	for key, kw := range l.watches {
		if kw.idle != nil {
			kw.idle.Stop()
		}
		delete(l.watches, key)
	}
	calls := l.calls
	l.calls = nil
	l.mu.Unlock()
	l.stop() // before the Waits wake: they see that the Locker is closed
	for _, cancel := range calls {
		cancel(distlock.ErrClosed)
	}
	l.waiters.Close()
	if ids := l.dropSpares(); len(ids) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), l.o.CleanupTimeout)
		l.revokeSpares(ctx, ids)
		cancel()
	}
	l.wg.Wait()
	close(l.closed)
	return nil
}

// begin starts a call: it returns the context for the call's requests, which Close
// cancels with cause distlock.ErrClosed, and the call's id, which the caller must
// pass to end; or distlock.ErrClosed after Close.
func (l *Locker) begin(ctx context.Context) (context.Context, uint64, error) {
	cctx, cancel := context.WithCancelCause(ctx)
	l.mu.Lock()
	if l.shut {
		l.mu.Unlock()
		cancel(nil)
		return nil, 0, distlock.ErrClosed
	}
	l.wg.Add(1)
	l.lastCall++
	id := l.lastCall
	l.calls[id] = cancel
	l.mu.Unlock()
	return cctx, id, nil
}

// end ends the call id.
func (l *Locker) end(id uint64) {
	l.mu.Lock()
	cancel := l.calls[id]
	delete(l.calls, id)
	l.mu.Unlock()
	if cancel != nil { // nil: Close cancelled it
		cancel(nil)
	}
	l.wg.Done()
}

// spawn runs f in a goroutine that Close waits for. It must be called during a
// call (between begin and its end), or with l.mu held while !l.shut, so that Close
// has not started to wait.
func (l *Locker) spawn(f func()) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		f()
	}()
}

// background returns a context for the Locker's own work (watches): it ends when
// the client is closed or Close is called.
func (l *Locker) background() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(l.client.Ctx())
	stop := context.AfterFunc(l.closing, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// opError is the error of op on key.
func opError(op, key string, err error) error {
	return &distlock.OpError{Backend: backend, Op: op, Key: key, Err: err}
}

// fail is the error of op on key, whose requests ran with cctx (from begin). A
// failure that Close caused, by cancelling cctx, is reported as distlock.ErrClosed.
func fail(cctx context.Context, op, key string, err error) error {
	if errors.Is(context.Cause(cctx), distlock.ErrClosed) && !errors.Is(err, distlock.ErrClosed) &&
		(errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled) {
		err = fmt.Errorf("%w while the call was in flight (%v)", distlock.ErrClosed, err)
	}
	return opError(op, key, err)
}
