package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Pauses between the attempts of a request: doubling from the first, up to the
// last, with jitter.
const (
	retryFirst = 25 * time.Millisecond
	retryMax   = 500 * time.Millisecond
)

// retryAttempts is how many request timeouts a request may spend on its attempts
// in all: a call whose context has no deadline (a Release with
// context.Background()) still ends, with the last attempt's error, when the
// cluster cannot serve it.
const retryAttempts = 5

// call runs op, one request of a Locker's call, until it succeeds, fails in a way
// that another attempt cannot change, ctx ends, or retryAttempts request timeouts
// have passed. Each attempt gets a context
// bounded by the request timeout that requires a leader
// (clientv3.WithRequireLeader): a member that knows it has none refuses at once.
// An attempt that times out, or that fails with a code that says the member cannot
// serve it now (Unavailable: no leader, the connection broke, the member timed out
// a proposal it forwarded to a leader that died), is tried again after a short
// pause; the client's balancer sends it to its next endpoint. op may thus run
// more than once after a failure whose outcome is unknown: each caller makes its
// op safe to repeat, or finds out what an earlier attempt did.
func (l *Locker) call(ctx context.Context, op func(ctx context.Context) error) error {
	pause := retryFirst
	giveUp := time.Now().Add(retryAttempts * l.o.RequestTimeout)
	for {
		actx, cancel := l.attempt(requireLeader(ctx))
		err := attemptErr(ctx, actx, op(actx))
		cancel()
		if err == nil || ctx.Err() != nil || !retryable(err) || time.Now().After(giveUp) {
			return err
		}
		t := time.NewTimer(pause/2 + rand.N(pause/2+1))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		pause = min(2*pause, retryMax)
	}
}

// attempt returns the context of one attempt of a request: ctx bounded by the
// request timeout. When ctx ends no later than that already (Hold's renewals,
// bounded by the lease's Expires), it is ctx itself: no timer (a stopped timer
// stays in the runtime's timer heap for a while, and keeps its context alive
// with the contexts and metadata it derives from), and the cancel func is a
// no-op (an attempt is a unary call, a wait for a keepalive's answer on a shared
// stream, or clientv3's KeepAliveOnce with its own cancel: nothing outlives op
// that a cancel would end).
//
// The bound is a timer that cancels the attempt (with cause errAttemptTimeout),
// not a deadline, and the attempt's context shows no deadline (noDeadline): gRPC
// sends a context's deadline with each request, a grpc-timeout header whose
// value changes with every request, so that each one adds an entry to the
// connection's HPACK tables and pushes the others out, and the server decodes
// it and arms a timer of its own (about 5% of the server's CPU time in a
// TryLock+Unlock pair). The attempt still ends when ctx ends, with ctx's error,
// and the server learns of that end as it would of a deadline's, when gRPC
// cancels the request; the etcd server bounds its requests itself.
func (l *Locker) attempt(ctx context.Context) (context.Context, context.CancelFunc) {
	if off["deadline"] {
		return context.WithTimeout(ctx, l.o.RequestTimeout)
	}
	d, hasDeadline := ctx.Deadline()
	if hasDeadline {
		if !time.Now().Add(l.o.RequestTimeout).Before(d) {
			return noDeadline{ctx}, noCancel
		}
		ctx = noDeadline{ctx}
	}
	actx, cancel := context.WithCancelCause(ctx)
	t := time.AfterFunc(l.o.RequestTimeout, func() { cancel(errAttemptTimeout) })
	return actx, func() {
		t.Stop()
		cancel(nil)
	}
}

// noDeadline is a context that hides the deadline of its parent, whose values,
// Done channel and errors it has (so that a context derived from it is a child
// of its parent's cancellation, without a goroutine).
type noDeadline struct{ context.Context }

func (noDeadline) Deadline() (time.Time, bool) { return time.Time{}, false }

// errAttemptTimeout ends an attempt that took longer than the request timeout.
var errAttemptTimeout = fmt.Errorf("etcdlock: the attempt took longer than the request timeout: %w", context.DeadlineExceeded)

// attemptErr is the error err of an attempt of a request (its context actx, from
// attempt(ctx)) as its caller sees it: when the attempt was cancelled (gRPC and
// clientv3 report context.Canceled), the cause: errAttemptTimeout when it timed
// out, ctx's error when ctx ended.
func attemptErr(ctx, actx context.Context, err error) error {
	if err == nil || actx.Err() == nil || !errors.Is(err, context.Canceled) && status.Code(err) != codes.Canceled {
		return err
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if errors.Is(context.Cause(actx), errAttemptTimeout) {
		return errAttemptTimeout
	}
	return err
}

func noCancel() {}

// leaderMD is clientv3.WithRequireLeader's metadata, built once: grpc and clientv3
// only read (or copy) the metadata of a request's context.
var leaderMD = metadata.Pairs(rpctypes.MetadataRequireLeaderKey, rpctypes.MetadataHasLeader)

// requireLeader is clientv3.WithRequireLeader(ctx), with two allocations less when
// ctx has no outgoing metadata (the usual case).
func requireLeader(ctx context.Context) context.Context {
	if _, ok := metadata.FromOutgoingContext(ctx); ok || off["md"] {
		return clientv3.WithRequireLeader(ctx)
	}
	return metadata.NewOutgoingContext(ctx, leaderMD)
}

// retryable reports whether err, from an attempt whose caller's context still
// lives, may go away on another attempt: the attempt's own timeout, or a server or
// transport error with code Unavailable (etcd's no leader, leader changed, request
// timed out, a broken connection) or ResourceExhausted (too many requests).
func retryable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ee rpctypes.EtcdError
	code := status.Code(err)
	if errors.As(err, &ee) {
		code = ee.Code()
	}
	return code == codes.Unavailable || code == codes.ResourceExhausted
}

// get reads the key k (linearizably: a member cut off from the quorum cannot
// answer), with the retries of call.
func (l *Locker) get(ctx context.Context, k string) (resp *clientv3.GetResponse, err error) {
	err = l.call(ctx, func(ctx context.Context) error {
		resp, err = l.client.Get(ctx, k)
		return err
	})
	return resp, err
}
