package zklock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
)

// TestCloseDuringQuorumLoss is issue 28's item 3: a Locker closed while its
// ensemble has no quorum must still delete its lease's node once the quorum
// returns, however long that takes, while its Session lives on (Close never closes
// it). A new leader gives every session a full timeout from its election, so the
// holder's session survives a quorum loss longer than its timeout, and a deletion
// that gave up after a fixed session timeout left a lock that nobody held for the
// rest of the session. Close itself returns at once, without waiting for a server
// that cannot answer. The holder's member stays up; the two others are paused for
// longer than the session timeout. Closing the Session ends the background work.
func TestCloseDuringQuorumLoss(t *testing.T) {
	const st = 4 * time.Second
	// The holder's member is the leader: it loses the quorum, and the election
	// after the pause makes a new leader, which gives the session a full timeout.
	// (Had the leader been paused with a follower, it would have kept leading and
	// expired the session, unheard of during the pause, at once.)
	i := leaderIndex(t)
	c := newClient(t, []string{zkEns.Nodes[i].Addr()}, st, nil, false)
	d := newClient(t, ensembleAddrs(), st, nil, false)
	key := uniqueKey(t)
	kp := keyPath(key)
	lease, err := c.l.TryLock(ctxT(t), key, st)
	require.NoError(t, err)
	lost := c.l.Lost(lease)
	sid := c.conn.SessionID()
	var paused []int
	for j := range zkEns.Nodes {
		if j != i {
			zkEns.Nodes[j].Pause(t)
			paused = append(paused, j)
		}
	}
	pausedAt := time.Now()
	// Close once the leader has stepped down and dropped the holder's connection:
	// a delete that reached it before would be committed after the pause anyway.
	require.Eventually(t, func() bool { return c.conn.State() != zk.StateHasSession }, 3*st/2, 5*time.Millisecond,
		"the holder's member drops its clients when it loses the quorum")
	closeStart := time.Now()
	require.NoError(t, c.l.Close())
	closeTook := time.Since(closeStart)
	select {
	case <-lost:
	default:
		t.Error("Lost open after Close")
	}
	// Past the session timeout after Close, the moment the old deletion gave up.
	time.Sleep(time.Until(pausedAt.Add(3 * st / 2))) // a point in time, not an event
	for _, j := range paused {
		zkEns.Nodes[j].Resume(t)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	require.NoError(t, zkEns.WaitServing(ctx))
	resumed := time.Now()
	t.Logf("Close took %v; quorum back %v after the pause began", closeTook.Round(time.Millisecond), resumed.Sub(pausedAt).Round(time.Millisecond))
	if closeTook >= time.Second {
		t.Errorf("Close blocked its caller for %v while the ensemble had no quorum", closeTook.Round(time.Millisecond))
	}

	// The holder's session survives: its member serves again within the full
	// timeout that the new leader gives it.
	requireState(t, c.conn, zk.StateHasSession, 2*st)
	require.Equal(t, sid, c.conn.SessionID(), "the test needs the holder's session to survive")
	require.Eventually(t, func() bool {
		names, _, err := d.conn.Children(kp) // d may still be reconnecting
		return errors.Is(err, zk.ErrNoNode) || err == nil && len(names) == 0
	}, st, 10*time.Millisecond,
		"the closed Locker's lock node is still there %v after the quorum returned, with its session alive (%v)", st, c.conn.State())
	t.Logf("the node was gone %v after the quorum returned", time.Since(resumed).Round(time.Millisecond))
	ld, err := d.l.TryLock(ctxT(t), key, st)
	require.NoError(t, err, "a second client's TryLock after the node was deleted")
	require.NoError(t, d.l.Unlock(ctxT(t), ld))
	_, err = d.l.Inspect(ctxT(t), key)
	require.ErrorIs(t, err, distlock.ErrNotHeld)
	c.sess.Close()
	require.True(t, c.l.BackgroundDone(5*time.Second), "the closed Locker's goroutines run on after its Session was closed")
}

// TestCloseCleanupEndsWithSession: the deletions that Close leaves running while the
// server cannot be reached end when the Session is closed (ZooKeeper deletes a
// closed session's nodes), and no sooner: Close returns at once.
func TestCloseCleanupEndsWithSession(t *testing.T) {
	c := newClient(t, standaloneAddrs(), sessionTimeout, nil, true)
	obs := newClient(t, standaloneAddrs(), sessionTimeout, nil, false)
	key := uniqueKey(t)
	_, err := c.l.TryLock(ctxT(t), key, sessionTimeout)
	require.NoError(t, err)
	c.cut()
	requireState(t, c.conn, zk.StateConnecting, 5*time.Second)
	closeStart := time.Now()
	require.NoError(t, c.l.Close())
	require.Less(t, time.Since(closeStart), 100*time.Millisecond, "Close waited for an unreachable server")
	require.False(t, c.l.BackgroundDone(sessionTimeout/2), "Close's deletion gave up while the session may live")
	require.NotEmpty(t, children(t, obs.conn, keyPath(key)), "the test needs the node to stay while the client is cut off")
	c.sess.Close()
	require.True(t, c.l.BackgroundDone(5*time.Second), "the closed Locker's goroutines run on after its Session was closed")
	require.Eventually(t, func() bool { return len(children(t, obs.conn, keyPath(key))) == 0 }, 2*sessionTimeout+time.Second, 10*time.Millisecond,
		"the node of a closed Session stays")
}
