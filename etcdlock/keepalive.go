package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Refreshes (Renew's keepalives) share a few LeaseKeepAlive streams of the
// Locker instead of opening one stream per refresh, as clientv3's KeepAliveOnce
// does: a stream costs a round of HTTP/2 headers, a goroutine and several KiB on
// the client, and with 10,000 leases renewed every second those in flight are
// most of the heap that renewals hold. etcd's server answers the requests of one
// stream one at a time, in order, so each refresh gets the answer to its own
// request: sent after the refresh started (its Expires counts from before), it
// renewed the lease no sooner. A stream takes new refreshes for kaRetire (then
// it finishes those it has and ends, and the next refresh opens a new one), and
// ends sooner when it fails (its refreshes try again on a new stream, as
// KeepAliveOnce does), when one of its refreshes times out (it may hang: a
// blackholed connection; the others fail, and their calls try again), and at
// Close. A client whose Lease is not clientv3's own, or that has no connection,
// keeps KeepAliveOnce.

const (
	// maxKAStreams bounds the streams of a Locker. The server answers the
	// requests of a stream one at a time (each waits for the member's applied
	// index, which writes make slow), so a refresh goes on the stream with the
	// fewest waiting, and a new stream opens when each has kaBusy.
	maxKAStreams = 16
	kaBusy       = 8
	// kaRetire is how long a stream takes new refreshes. Its context ends
	// kaRetire plus two request timeouts after it opened (a refresh sent
	// before kaRetire is answered or timed out by then): a stream's headers
	// carry a deadline, as KeepAliveOnce's do.
	kaRetire = time.Minute
)

// keepAlives are the Locker's shared streams (l.ka.mu guards them).
type keepAlives struct {
	mu      sync.Mutex
	streams [maxKAStreams]*kaStream
}

// A kaStream is one shared LeaseKeepAlive stream, opened and fed by its sender
// goroutine, read by its receiver goroutine. l.ka.mu guards its fields.
type kaStream struct {
	ctx    context.Context // ends the stream
	cancel context.CancelFunc
	opened time.Time
	queue  []*kaWait     // to send, in order
	wake   chan struct{} // (buffered) tells the sender that queue grew
	sent   []*kaWait     // sent and not answered, in order
	slot   int           // in l.ka.streams; -1 once it takes no new refreshes
	err    error         // why the stream ended; nil while it serves
}

// A kaWait is one refresh waiting on a stream.
type kaWait struct {
	id   int64
	done chan kaResult // buffered
}

type kaResult struct {
	ttl int64
	err error
}

// errKAIdle ends a retired stream that no refresh waits for.
var errKAIdle = errors.New("etcdlock: the keepalive stream is idle")

// leaseType is the type of clientv3's own Lease, which clientv3.New gives a
// client.
var leaseType = reflect.TypeOf(clientv3.NewLeaseFromLeaseClient(nil, nil, 0))

// sharesKeepAlives reports whether the client's refreshes can go on the Locker's
// streams.
func sharesKeepAlives(client *clientv3.Client) bool {
	return client.ActiveConnection() != nil && client.Lease != nil && reflect.TypeOf(client.Lease) == leaseType
}

// keepAlive refreshes the etcd lease id once and returns the TTL the server
// reported; rpctypes.ErrLeaseNotFound when the lease is gone. It must be called
// during a call (its streams' goroutines are the Locker's).
func (l *Locker) keepAlive(ctx context.Context, id clientv3.LeaseID) (int64, error) {
	if !l.shareKA {
		resp, err := l.client.KeepAliveOnce(ctx, id)
		if err != nil {
			return 0, err
		}
		return resp.TTL, nil
	}
	for {
		ttl, err := l.kaOnce(ctx, id)
		// As KeepAliveOnce, try again (on a new stream) when the stream broke
		// (Unavailable: the connection or the leader was lost; Internal: a
		// transport error, such as a stream reset).
		if c := status.Code(err); err == nil || ctx.Err() != nil || c != codes.Unavailable && c != codes.Internal {
			return ttl, err
		}
	}
}

// kaOnce sends one keepalive of id on a shared stream and waits for its answer.
func (l *Locker) kaOnce(ctx context.Context, id clientv3.LeaseID) (int64, error) {
	w := &kaWait{id: int64(id), done: make(chan kaResult, 1)}
	s := l.kaSend(w)
	select {
	case r := <-w.done:
		if r.err != nil {
			return 0, clientv3.ContextError(ctx, r.err)
		}
		if r.ttl <= 0 {
			return 0, rpctypes.ErrLeaseNotFound
		}
		return r.ttl, nil
	case <-ctx.Done():
		if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			// No answer within the attempt's time: the stream may hang.
			l.kaEnd(s, fmt.Errorf("etcdlock: a keepalive on the stream timed out: %w", context.DeadlineExceeded))
		}
		return 0, ctx.Err()
	}
}

// kaSend queues w on the stream with the fewest refreshes waiting, or on a new
// one when each has kaBusy (or there is none), retiring streams that are old,
// and returns the stream.
func (l *Locker) kaSend(w *kaWait) *kaStream {
	ka := &l.ka
	var retired []*kaStream
	ka.mu.Lock()
	var s *kaStream
	free := -1
	now := time.Now()
	for j, o := range ka.streams {
		if o != nil && now.Sub(o.opened) > kaRetire {
			ka.streams[j], o.slot = nil, -1
			if len(o.sent) == 0 && len(o.queue) == 0 {
				o.err = errKAIdle
				retired = append(retired, o)
			}
			o = nil
		}
		switch {
		case o == nil:
			if free < 0 {
				free = j
			}
		case s == nil || o.waiting() < s.waiting():
			s = o
		}
	}
	if free >= 0 && (s == nil || s.waiting() >= kaBusy) {
		i := free
		bctx, bcancel := l.background()
		ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(bctx), kaRetire+2*l.o.RequestTimeout)
		s = &kaStream{ctx: ctx, cancel: func() { cancel(); bcancel() }, opened: now, wake: make(chan struct{}, 1), slot: i}
		ka.streams[i] = s
		l.spawn(func() { l.kaRun(s) })
	}
	s.queue = append(s.queue, w)
	select {
	case s.wake <- struct{}{}:
	default:
	}
	ka.mu.Unlock()
	for _, o := range retired {
		o.cancel()
	}
	return s
}

// waiting is the number of refreshes waiting on s. l.ka.mu is held.
func (s *kaStream) waiting() int { return len(s.sent) + len(s.queue) }

// kaEnd ends the stream s with err, unless it ended: it fails the refreshes
// waiting on it, and frees its slot for a new stream. Its sender and receiver see
// its context end.
func (l *Locker) kaEnd(s *kaStream, err error) {
	ka := &l.ka
	ka.mu.Lock()
	waits := l.kaEndLocked(s, err)
	ka.mu.Unlock()
	s.cancel()
	for _, w := range waits {
		w.done <- kaResult{err: err}
	}
}

// kaEndLocked is kaEnd with l.ka.mu held, but for the cancel and the failures:
// it returns the refreshes to fail (none if s had ended).
func (l *Locker) kaEndLocked(s *kaStream, err error) []*kaWait {
	if s.err != nil {
		return nil
	}
	s.err = err
	if s.slot >= 0 {
		l.ka.streams[s.slot], s.slot = nil, -1
	}
	waits := append(s.sent, s.queue...)
	s.sent, s.queue = nil, nil
	return waits
}

// kaRun opens the stream s and sends its queue, until the stream ends; a
// goroutine of its own receives the answers.
func (l *Locker) kaRun(s *kaStream) {
	stream, err := pb.NewLeaseClient(l.client.ActiveConnection()).LeaseKeepAlive(s.ctx, l.callOpts...)
	if err != nil {
		l.kaEnd(s, err)
		return
	}
	l.wg.Add(1) // within this goroutine, which Close waits for
	go func() {
		defer l.wg.Done()
		l.kaReceive(s, stream)
	}()
	ka := &l.ka
	for {
		select {
		case <-s.wake:
		case <-s.ctx.Done():
			l.kaEnd(s, s.ctx.Err())
			return
		}
		ka.mu.Lock()
		if s.err != nil {
			ka.mu.Unlock()
			return
		}
		batch := s.queue
		s.queue = nil
		s.sent = append(s.sent, batch...) // before the sends: the answers may come at once
		ka.mu.Unlock()
		for _, w := range batch {
			if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: w.id}); err != nil {
				l.kaEnd(s, err)
				return
			}
		}
	}
}

// kaReceive hands each answer of stream s to the refresh that waits for it, the
// first one sent, until the stream ends; it ends a retired stream when no
// refresh waits on it.
func (l *Locker) kaReceive(s *kaStream, stream pb.Lease_LeaseKeepAliveClient) {
	ka := &l.ka
	for {
		resp, err := stream.Recv()
		if err != nil {
			l.kaEnd(s, err)
			return
		}
		ka.mu.Lock()
		if s.err != nil {
			ka.mu.Unlock()
			return
		}
		if len(s.sent) == 0 || s.sent[0].id != resp.ID {
			ka.mu.Unlock()
			l.kaEnd(s, fmt.Errorf("etcdlock: a keepalive answer for lease %x came out of order", resp.ID))
			return
		}
		w := s.sent[0]
		s.sent[0] = nil
		s.sent = s.sent[1:]
		retired := s.slot < 0 && len(s.sent) == 0 && len(s.queue) == 0
		if retired {
			l.kaEndLocked(s, errKAIdle) // no refresh to fail
		}
		ka.mu.Unlock()
		w.done <- kaResult{ttl: resp.TTL}
		if retired {
			s.cancel()
			return
		}
	}
}
