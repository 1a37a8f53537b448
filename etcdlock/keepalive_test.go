package etcdlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/etcdlock"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
)

// TestRenewsShareKeepAliveStreams: the refreshes of many Renews of one Locker go
// on a few shared LeaseKeepAlive streams (at most 16), not one stream each
// (clientv3's KeepAliveOnce opened 60 here), and each Renew still gets its own answer.
func TestRenewsShareKeepAliveStreams(t *testing.T) {
	var streams atomic.Int64
	l := newLocker(t, newClientWith(t, []string{etcdSrv.Addr()}, beforeStream(methodKeepAlive, func() { streams.Add(1) })), nil)
	const keys, rounds, ttl = 20, 3, 5 * time.Second
	leases := make([]distlock.Lease, keys)
	pfx := "share-ka-" + driver.NewToken()
	for i := range leases {
		var err error
		leases[i], err = l.TryLock(ctxFor(t, 5*time.Second), pfx+"-"+string(rune('a'+i)), ttl)
		require.NoError(t, err)
	}
	for range rounds {
		errs := make(chan error, keys)
		var wg sync.WaitGroup
		for i := range leases {
			wg.Go(func() {
				errs <- func() error {
					start := time.Now()
					next, err := l.Renew(ctxFor(t, 5*time.Second), leases[i], ttl)
					if err != nil {
						return err
					}
					if next.Expires.Before(start) || next.Expires.After(time.Now().Add(ttl)) {
						return errors.New("Renew's Expires is not start + ttl")
					}
					leases[i] = next
					return nil
				}()
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	}
	require.LessOrEqual(t, streams.Load(), int64(16), "LeaseKeepAlive streams opened for %d Renews", keys*rounds)
	// A lease whose key is gone: the shared stream answers TTL 0 once it is revoked.
	require.NoError(t, l.Unlock(ctxFor(t, 5*time.Second), leases[0]))
	_, err := l.Renew(ctxFor(t, 5*time.Second), leases[0], ttl)
	require.ErrorIs(t, err, distlock.ErrNotHeld)
}

// TestKeepAliveStreamHangs: the server never answers on the first keepalive
// stream (a connection that hangs); the refresh waiting on it times out, the
// stream is dropped, and the Renew completes on a new stream.
func TestKeepAliveStreamHangs(t *testing.T) {
	var opened atomic.Int64
	hang := grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, m string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, m, opts...)
		if err != nil || m != methodKeepAlive || opened.Add(1) > 1 {
			return s, err
		}
		return &hungStream{ClientStream: s}, nil
	})
	l := newLocker(t, newClientWith(t, []string{etcdSrv.Addr()}, hang), &etcdlock.Options{RequestTimeout: 300 * time.Millisecond})
	const ttl = 5 * time.Second
	lease, err := l.TryLock(ctxFor(t, 5*time.Second), "hang-ka-"+driver.NewToken(), ttl)
	require.NoError(t, err)
	start := time.Now()
	_, err = l.Renew(ctxFor(t, 4*time.Second), lease, ttl)
	require.NoError(t, err, "Renew after %v, %d streams", time.Since(start), opened.Load())
	require.GreaterOrEqual(t, opened.Load(), int64(2), "streams opened")
}

// hungStream never receives an answer: RecvMsg waits until the stream ends.
type hungStream struct{ grpc.ClientStream }

func (s *hungStream) RecvMsg(m any) error {
	<-s.Context().Done()
	return s.Context().Err()
}
