package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/etcdlock"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestNew: a nil client and invalid options are New's error, an *OpError of Op
// "New" wrapping ErrInvalid that names the value; nil options are the defaults.
func TestNew(t *testing.T) {
	cli := newClient(t, []string{etcdSrv.Addr()}, nil)
	for _, c := range []struct {
		name string
		cli  *clientv3.Client
		opts *etcdlock.Options
		want string // in the message
	}{
		{"nil client", nil, nil, "nil *clientv3.Client"},
		{"negative CleanupTimeout", cli, &etcdlock.Options{CleanupTimeout: -time.Second}, "CleanupTimeout -1s"},
		{"negative RequestTimeout", cli, &etcdlock.Options{RequestTimeout: -time.Millisecond}, "RequestTimeout -1ms"},
		{"long Owner", cli, &etcdlock.Options{Owner: strings.Repeat("o", etcdlock.MaxOwnerLen+1)}, "Owner of 257 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := etcdlock.New(c.cli, c.opts)
			require.Nil(t, l)
			require.ErrorIs(t, err, distlock.ErrInvalid)
			var oe *distlock.OpError
			require.ErrorAs(t, err, &oe)
			require.Equal(t, "etcdlock", oe.Backend)
			require.Equal(t, "New", oe.Op)
			require.Contains(t, err.Error(), c.want)
		})
	}
	l, err := etcdlock.New(cli, &etcdlock.Options{Owner: strings.Repeat("o", etcdlock.MaxOwnerLen)})
	require.NoError(t, err)
	require.NoError(t, l.Close())
	l = newLocker(t, cli, nil)
	require.True(t, strings.HasPrefix(l.EtcdKey("k"), etcdlock.DefaultPrefix), "EtcdKey with nil Options: %q", l.EtcdKey("k"))
}

// TestClose: Close ends a Wait in flight with ErrClosed, closes the Lost channels,
// ends the shared watches, revokes the spare lease, and leaves the client open
// and held keys held; every later call returns an *OpError wrapping ErrClosed,
// and a second Close returns nil.
func TestClose(t *testing.T) {
	cli := newClient(t, []string{etcdSrv.Addr()}, nil)
	other := newLocker(t, newClient(t, []string{etcdSrv.Addr()}, nil), nil)
	l, err := etcdlock.New(cli, nil)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	mine, theirs := "close-mine-"+driver.NewToken(), "close-theirs-"+driver.NewToken()
	const ttl = 30 * time.Second

	lease, err := l.TryLock(ctxFor(t, 5*time.Second), mine, ttl)
	require.NoError(t, err)
	lost := l.Lost(lease)
	lo, err := other.TryLock(ctxFor(t, 5*time.Second), theirs, ttl)
	require.NoError(t, err)
	before := leaseIDs(t, cli)
	_, err = l.TryLock(ctxFor(t, 5*time.Second), theirs, ttl) // keeps its lease as the spare
	require.ErrorIs(t, err, distlock.ErrLocked)
	var spare clientv3.LeaseID
	for id := range leaseIDs(t, cli) {
		if !before[id] {
			spare = id
		}
	}
	require.NotZero(t, spare, "the failed TryLock kept no lease")
	waited := make(chan error, 1)
	go func() { waited <- l.Wait(ctxFor(t, time.Minute), theirs) }()
	require.Eventually(t, func() bool { return l.WatchStarted(theirs) }, 10*time.Second, 10*time.Millisecond)

	closed := time.Now()
	require.NoError(t, l.Close())
	took := time.Since(closed)
	select {
	case err := <-waited:
		requireOpError(t, err, "Wait", theirs, distlock.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("the Wait in flight did not return within 5s of Close")
	}
	select {
	case <-lost:
	default:
		t.Fatal("Close left a Lost channel open")
	}
	keys, _ := l.Watches(theirs)
	require.Zero(t, keys, "watches left after Close")
	ttlResp, err := cli.TimeToLive(ctxFor(t, 5*time.Second), spare)
	require.NoError(t, err, "the client after Close")
	require.EqualValues(t, -1, ttlResp.TTL, "the spare lease after Close: want it revoked")
	t.Logf("Close took %v", took)

	// Held keys stay held (until Unlock or their ttl): Close releases nothing.
	h, err := other.Inspect(ctxFor(t, 5*time.Second), mine)
	require.NoError(t, err)
	require.Equal(t, lease.Fence, h.Fence)

	ctx := ctxFor(t, 5*time.Second)
	_, err = l.TryLock(ctx, "k", ttl)
	requireOpError(t, err, "TryLock", "k", distlock.ErrClosed)
	_, err = l.Renew(ctx, lease, ttl)
	requireOpError(t, err, "Renew", mine, distlock.ErrClosed)
	requireOpError(t, l.Unlock(ctx, lease), "Unlock", mine, distlock.ErrClosed)
	requireOpError(t, l.Wait(ctx, theirs), "Wait", theirs, distlock.ErrClosed)
	_, err = l.Inspect(ctx, mine)
	requireOpError(t, err, "Inspect", mine, distlock.ErrClosed)
	select {
	case <-l.Lost(lease):
	default:
		t.Fatal("Lost after Close returned an open channel")
	}
	require.NoError(t, l.Close(), "a second Close")

	require.NoError(t, other.Unlock(ctx, lease))
	require.NoError(t, other.Unlock(ctx, lo))
}

// TestCloseInFlight: Close makes a TryLock whose transaction hangs return with
// ErrClosed, and waits for the revocation of its lease (the transaction's
// outcome is unknown: the key may exist), so that no key is left behind.
func TestCloseInFlight(t *testing.T) {
	cli := newClient(t, []string{etcdSrv.Addr()}, nil)
	entered := make(chan struct{})
	hang := newClientWith(t, []string{etcdSrv.Addr()}, onUnary(methodTxn, func(ctx context.Context, invoke func() error) error {
		err := invoke() // the key is created
		close(entered)
		<-ctx.Done() // and the reply never comes
		return errors.Join(err, ctx.Err())
	}))
	l, err := etcdlock.New(hang, &etcdlock.Options{RequestTimeout: time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	key := "close-in-flight-" + driver.NewToken()
	tried := make(chan error, 1)
	go func() {
		_, err := l.TryLock(ctxFor(t, time.Minute), key, time.Minute)
		tried <- err
	}()
	<-entered
	get, err := cli.Get(ctxFor(t, 5*time.Second), l.EtcdKey(key))
	require.NoError(t, err)
	require.Len(t, get.Kvs, 1, "the hanging TryLock's key")
	start := time.Now()
	require.NoError(t, l.Close())
	t.Logf("Close took %v", time.Since(start))
	requireOpError(t, <-tried, "TryLock", key, distlock.ErrClosed)
	get, err = cli.Get(ctxFor(t, 5*time.Second), l.EtcdKey(key))
	require.NoError(t, err)
	require.Empty(t, get.Kvs, "the key of the TryLock that Close cut short (its lease should be revoked)")
}

// requireOpError checks that err is an *OpError of etcdlock's op on key that
// wraps want, and that its message does not hold a long key in full.
func requireOpError(t *testing.T, err error, op, key string, want error) {
	t.Helper()
	require.ErrorIs(t, err, want)
	var oe *distlock.OpError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "etcdlock", oe.Backend)
	require.Equal(t, op, oe.Op)
	require.Equal(t, key, oe.Key)
	if len(key) > driver.MaxKeyInMessage {
		require.NotContains(t, err.Error(), key, "the message holds the whole key")
	}
}

// leaseIDs returns the IDs of the server's leases.
func leaseIDs(t *testing.T, cli *clientv3.Client) map[clientv3.LeaseID]bool {
	t.Helper()
	resp, err := cli.Leases(ctxFor(t, 5*time.Second))
	require.NoError(t, err)
	m := make(map[clientv3.LeaseID]bool)
	for _, l := range resp.Leases {
		m[l.ID] = true
	}
	return m
}
