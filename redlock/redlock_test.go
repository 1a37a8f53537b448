package redlock_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/redlock"
)

func TestNewInvalid(t *testing.T) {
	five := clients(t, nodeAddrs())
	same := redis.NewClient(&redis.Options{Addr: nodes[0].Addr()})
	t.Cleanup(func() { _ = same.Close() })
	cases := []struct {
		name    string
		clients []redis.UniversalClient
		opts    *redlock.Options
		want    string // in the message
	}{
		{"nil slice", nil, nil, "no Redis clients"},
		{"empty slice", []redis.UniversalClient{}, nil, "no Redis clients"},
		{"nil client", []redis.UniversalClient{five[0], nil, five[2]}, nil, "client 1 of 3 is nil"},
		{"same client twice", []redis.UniversalClient{five[0], five[1], five[0]}, nil, "clients 0 and 2 are the same client"},
		{"same address twice", []redis.UniversalClient{five[0], five[1], same}, nil, "both reach " + nodes[0].Addr()},
		{"prefix with braces", five, &redlock.Options{Prefix: "a{b}"}, `Options.Prefix "a{b}"`},
		{"negative NodeTimeout", five, &redlock.Options{NodeTimeout: -time.Second}, "Options.NodeTimeout -1s"},
		{"negative DriftFactor", five, &redlock.Options{DriftFactor: -0.1}, "Options.DriftFactor -0.1"},
		{"DriftFactor 0.5", five, &redlock.Options{DriftFactor: 0.5}, "Options.DriftFactor 0.5"},
		{"DriftFactor NaN", five, &redlock.Options{DriftFactor: math.NaN()}, "Options.DriftFactor NaN"},
		{"negative DriftConst", five, &redlock.Options{DriftConst: -time.Millisecond}, "Options.DriftConst -1ms"},
		{"negative CleanupTimeout", five, &redlock.Options{CleanupTimeout: -time.Second}, "Options.CleanupTimeout -1s"},
		{"negative MaxTTL", five, &redlock.Options{MaxTTL: -time.Second}, "Options.MaxTTL -1s"},
		{"long Owner", five, &redlock.Options{Owner: strings.Repeat("o", redlock.MaxOwnerLen+1)}, "Options.Owner of 257 bytes"},
	}
	for _, c := range cases {
		l, err := redlock.New(c.clients, c.opts)
		require.Nil(t, l, c.name)
		require.ErrorIs(t, err, distlock.ErrInvalid, c.name)
		require.ErrorContains(t, err, c.want, c.name)
		var oe *distlock.OpError
		require.ErrorAs(t, err, &oe, c.name)
		require.Equal(t, distlock.OpError{Backend: "redlock", Op: "New", Err: oe.Err}, *oe, c.name)
	}
}

// TestClose: Close is idempotent, leaves the clients open, and every call after it
// returns an *OpError wrapping ErrClosed, naming its operation.
func TestClose(t *testing.T) {
	cs := clients(t, nodeAddrs())
	l, err := redlock.New(cs, nil)
	require.NoError(t, err)
	ctx := t.Context()
	lease, err := l.TryLock(ctx, "close-"+driver.NewToken()[:8], 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.NoError(t, l.Close(), "second Close")
	for _, c := range cs {
		require.NoError(t, c.Ping(ctx).Err(), "Close closed a client")
	}
	closed := func(op string, err error) {
		t.Helper()
		require.ErrorIs(t, err, distlock.ErrClosed, op)
		var oe *distlock.OpError
		require.ErrorAs(t, err, &oe, op)
		require.Equal(t, op, oe.Op)
		require.Equal(t, "redlock", oe.Backend)
	}
	_, err = l.TryLock(ctx, "k", 10*time.Second)
	closed("TryLock", err)
	_, err = l.Renew(ctx, lease, 10*time.Second)
	closed("Renew", err)
	closed("Unlock", l.Unlock(ctx, lease))
	closed("Wait", l.Wait(ctx, "k"))
	_, err = l.Inspect(ctx, "k")
	closed("Inspect", err)
	_, err = l.CheckServer(ctx)
	closed("CheckServer", err)
}

func TestQuorumAndTimeouts(t *testing.T) {
	all := clients(t, nodeAddrs())
	for n, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3} {
		l, err := redlock.New(all[:n], nil)
		if err != nil {
			t.Fatalf("New with %d clients: %v", n, err)
		}
		if l.Quorum() != want || l.Nodes() != n {
			t.Errorf("%d nodes: Quorum %d, Nodes %d; want %d, %d", n, l.Quorum(), l.Nodes(), want, n)
		}
	}
	l, err := redlock.New(all, nil)
	if err != nil {
		t.Fatal(err)
	}
	for ttl, want := range map[time.Duration]time.Duration{
		10 * time.Millisecond:  redlock.MinNodeTimeout,
		100 * time.Millisecond: 10 * time.Millisecond,
		time.Second:            100 * time.Millisecond,
		time.Minute:            redlock.DefaultNodeTimeout,
	} {
		if got := l.NodeTimeout(ttl); got != want {
			t.Errorf("NodeTimeout(%v) = %v, want %v", ttl, got, want)
		}
	}
	if got, want := l.Drift(10*time.Second), 102*time.Millisecond; got != want {
		t.Errorf("Drift(10s) = %v, want %v", got, want)
	}
	// A ttl that the drift allowance and a node timeout eat up is refused.
	_, err = l.TryLock(t.Context(), "tiny-ttl", 5*time.Millisecond)
	if !errors.Is(err, distlock.ErrInvalid) || !strings.Contains(err.Error(), "ttl 5ms") {
		t.Fatalf("TryLock with ttl 5ms: got %v, want ErrInvalid naming the ttl", err)
	}
}

// TestExpiresAccountsForDrift: Expires is start + ttl - drift, with start taken
// inside the call, before the requests were sent.
func TestExpiresAccountsForDrift(t *testing.T) {
	l := newLocker(t, nil)
	ttl := 10 * time.Second
	before := time.Now()
	lease, err := l.TryLock(t.Context(), "expires-"+driver.NewToken()[:8], ttl)
	returned := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(t.Context(), lease)
	valid := ttl - l.Drift(ttl)
	if lease.Expires.Before(before.Add(valid)) || lease.Expires.After(returned.Add(valid)) {
		t.Fatalf("Expires is %v after the call began; want between ttl - drift (%v) and that plus the call's %v",
			lease.Expires.Sub(before), valid, returned.Sub(before))
	}
}
