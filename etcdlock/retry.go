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
		err := l.once(ctx, op)
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

// once runs op in one attempt: bounded by the request timeout, requiring a
// leader, its error as attemptErr tells it.
func (l *Locker) once(ctx context.Context, op func(ctx context.Context) error) error {
	actx, cancel := l.attempt(clientv3.WithRequireLeader(ctx))
	defer cancel()
	return attemptErr(ctx, actx, op(actx))
}

// attempt returns the context of one attempt of a request: ctx bounded by the
// request timeout, which ends it with cause errAttemptTimeout.
func (l *Locker) attempt(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, l.o.RequestTimeout, errAttemptTimeout)
}

// errAttemptTimeout ends an attempt that took longer than the request timeout.
var errAttemptTimeout = fmt.Errorf("etcdlock: the attempt took longer than the request timeout: %w", context.DeadlineExceeded)

// attemptErr is the error err of an attempt of a request (its context actx, from
// attempt(ctx)) as its caller sees it: when the attempt's context ended (gRPC and
// clientv3 report a context error or its status code), ctx's error when ctx
// ended, else errAttemptTimeout.
func attemptErr(ctx, actx context.Context, err error) error {
	if err == nil || actx.Err() == nil || !isContextErr(err) {
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

// isContextErr reports whether err says that a request's context ended.
func isContextErr(err error) bool {
	switch status.Code(err) {
	case codes.Canceled, codes.DeadlineExceeded:
		return true
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
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
