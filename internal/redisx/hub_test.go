package redisx_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/redisx"
)

// newHub returns a Hub over a new client of redisSrv; both close at t's cleanup.
func newHub(t *testing.T, cfg redisx.HubConfig) *redisx.Hub {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: redisSrv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	h := redisx.NewHub(c, 0, cfg)
	t.Cleanup(h.Close)
	return h
}

// register registers a new listener of channel on h and waits for its confirmation.
func register(t *testing.T, h *redisx.Hub, channel string) *redisx.Listener {
	t.Helper()
	ls := redisx.NewListener(1)
	require.NoError(t, h.Register(channel, ls))
	select {
	case c := <-ls.Confirmed():
		require.NoError(t, c.Err)
	case <-time.After(5 * time.Second):
		t.Fatalf("the subscription of %s was not confirmed within 5s", channel)
	}
	return ls
}

// TestStaleSighting (issue 13, case 4): what a TryLock saw while a channel was
// subscribed does not count for a later subscription of the same channel (the
// channel was dropped while idle and subscribed again, on the same connection):
// a release published in between was missed, and a Wait that trusted the sighting
// would block for the old holder's time to live while the key is free.
func TestStaleSighting(t *testing.T) {
	h := newHub(t, redisx.HubConfig{TopicIdle: time.Nanosecond})
	ch, other := "stale-"+driver.NewToken()[:8], "other-"+driver.NewToken()[:8]
	ls := register(t, h, ch)
	tok, ok := h.Peek(ch) // a TryLock starts while ch is subscribed ...
	require.True(t, ok)
	h.Unregister(ch, ls)
	// ... another Wait ends, and ch, idle, is dropped; the next Wait subscribes
	// it again ...
	h.Unregister(other, register(t, h, other))
	ls = register(t, h, ch)
	defer h.Unregister(ch, ls)
	// ... and then the TryLock's reply says that the key was held.
	h.Saw(ch, tok, time.Minute)
	_, _, seen := h.Check(ch)
	require.False(t, seen, "a sighting from before the channel was dropped and subscribed again counts for the new subscription")

	// A sighting on the current subscription counts, until a message arrives.
	tok, ok = h.Peek(ch)
	require.True(t, ok)
	h.Saw(ch, tok, time.Minute)
	until, released, seen := h.Check(ch)
	require.True(t, seen)
	require.False(t, released)
	require.WithinDuration(t, time.Now().Add(time.Minute), until, 5*time.Second)
}

// TestHubReleasedHook: with HubConfig.Released, a release message goes to the hook
// (by channel) and wakes no listener, and Check still sees it; Close still wakes
// every listener.
func TestHubReleasedHook(t *testing.T) {
	released := make(chan string, 1)
	h := newHub(t, redisx.HubConfig{Released: func(ch string) { released <- ch }})
	ch := "hook-" + driver.NewToken()[:8]
	ls := register(t, h, ch)
	defer h.Unregister(ch, ls)
	tok, ok := h.Peek(ch)
	require.True(t, ok)
	h.Saw(ch, tok, time.Minute)
	c := redis.NewClient(&redis.Options{Addr: redisSrv.Addr()})
	defer c.Close()
	require.NoError(t, c.Publish(t.Context(), ch, "").Err())
	select {
	case got := <-released:
		require.Equal(t, ch, got)
	case <-time.After(5 * time.Second):
		t.Fatal("the hook did not get the release within 5s")
	}
	select {
	case <-ls.Woke():
		t.Fatal("a release woke the listener although the hook took it")
	default:
	}
	_, rel, seen := h.Check(ch)
	require.True(t, seen)
	require.True(t, rel, "Check does not see the release")
	h.Close()
	select {
	case <-ls.Woke():
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake the listener")
	}
}

// TestSawHolder: a sighting that names its holder's release payload (redlock's
// digest) is not undone by messages with other payloads (an earlier holder's
// release, another token's clean-up), but is by the holder's own, by an empty one,
// and by more messages than the hub keeps.
func TestSawHolder(t *testing.T) {
	h := newHub(t, redisx.HubConfig{})
	ch := "holder-" + driver.NewToken()[:8]
	ls := redisx.NewInboxListener(1)
	require.NoError(t, h.Register(ch, ls))
	defer h.Unregister(ch, ls)
	select {
	case c := <-ls.Confirmed():
		require.NoError(t, c.Err)
	case <-time.After(5 * time.Second):
		t.Fatal("not confirmed within 5s")
	}
	c := redis.NewClient(&redis.Options{Addr: redisSrv.Addr()})
	defer c.Close()
	publish := func(payloads ...string) {
		for _, p := range payloads {
			require.NoError(t, c.Publish(t.Context(), ch, p).Err())
		}
		want := len(payloads)
		require.Eventually(t, func() bool {
			want -= len(ls.Inbox().Take())
			return want == 0
		}, 5*time.Second, time.Millisecond)
	}
	released := func() bool {
		_, rel, seen := h.Check(ch)
		require.True(t, seen)
		return rel
	}
	for _, tc := range []struct {
		name     string
		payloads []string
		want     bool
	}{
		{"others", []string{"old", "cleanup"}, false},
		{"holder", []string{"old", "holder"}, true},
		{"empty", []string{""}, true},
		{"too many", []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}, true},
	} {
		tok, ok := h.Peek(ch)
		require.True(t, ok)
		h.SawHolder(ch, tok, time.Minute, "holder")
		publish(tc.payloads...)
		require.Equal(t, tc.want, released(), tc.name)
	}
}
