package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/zklock"
)

// Faults inside the ensemble (zkEns, whose nodes reach each other through fault
// proxies): a holder's server cut off from its peers, a leader change and a node
// that loses its data, under a holder.

// recorder wraps a Locker and keeps the latest Expires of every lease that its
// TryLock and Renew returned: the bound that its holder believed in.
type recorder struct {
	*zklock.Locker
	mu      sync.Mutex
	latest  time.Time
	renews  int
	renewed time.Time // when the last successful Renew returned
}

func (r *recorder) note(l distlock.Lease, renew bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l.Expires.After(r.latest) {
		r.latest = l.Expires
	}
	if renew {
		r.renews++
		r.renewed = time.Now()
	}
}

func (r *recorder) lastRenew() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.renewed
}

func (r *recorder) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	l, err := r.Locker.TryLock(ctx, key, ttl)
	if err == nil {
		r.note(l, false)
	}
	return l, err
}

func (r *recorder) Renew(ctx context.Context, lease distlock.Lease, ttl time.Duration) (distlock.Lease, error) {
	l, err := r.Locker.Renew(ctx, lease, ttl)
	if err == nil {
		r.note(l, true)
	}
	return l, err
}

func (r *recorder) state() (time.Time, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.latest, r.renews
}

// leaderIndex returns the index of the ensemble's leader once it serves.
func leaderIndex(t *testing.T) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	l, err := zkEns.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return zkEns.NodeIndex(l.Addr())
}

// otherAddrs returns the client addresses of every node but Nodes[i].
func otherAddrs(i int) []string {
	var addrs []string
	for j, s := range zkEns.Nodes {
		if j != i {
			addrs = append(addrs, s.Addr())
		}
	}
	return addrs
}

// contend makes d try to acquire key until it does, and returns the lease and the
// start of the successful attempt (the acquisition happened after it). Transport
// errors (the majority electing a leader) are retried. It fails t after d.
func contend(t *testing.T, l distlock.Locker, key string, within time.Duration) (distlock.Lease, time.Time) {
	t.Helper()
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		attempt := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		lease, err := l.TryLock(ctx, key, sessionTimeout)
		cancel()
		if err == nil {
			return lease, attempt
		}
		last = err
		time.Sleep(5 * time.Millisecond) // polling pace, bounded by the deadline
	}
	t.Fatalf("no acquisition of %q within %v: %v", key, within, last)
	return distlock.Lease{}, time.Time{}
}

// TestIsolatedServerHolder is issue 12's reproduction: holder C reaches only node i,
// which is cut off from its peers while C still reaches it; client D on the other
// nodes acquires once the leader has expired C's session. No answer of the isolated
// node may extend C's lease: D must acquire only after the latest Expires that C's
// calls returned, and after C's Held.Context ended. With DisconnectGrace set, C's
// Hold does not give up when node i drops its connection, so only Expires protects.
func TestIsolatedServerHolder(t *testing.T) {
	for _, role := range []string{"follower", "leader"} {
		for _, grace := range []time.Duration{0, 3 * sessionTimeout} {
			t.Run(fmt.Sprintf("%s/grace=%v", role, grace), func(t *testing.T) {
				li := leaderIndex(t)
				i := li
				if role == "follower" {
					i = (li + 1) % len(zkEns.Nodes)
				}
				c := newClient(t, []string{zkEns.Nodes[i].Addr()}, sessionTimeout, &zklock.Options{DisconnectGrace: grace}, false)
				d := newClient(t, otherAddrs(i), sessionTimeout, nil, false)
				rec := &recorder{Locker: c.l}
				key := uniqueKey(t)
				lc, err := rec.TryLock(ctxT(t), key, sessionTimeout)
				if err != nil {
					t.Fatal(err)
				}
				held := distlock.Hold(t.Context(), rec, lc, nil)
				ended := make(chan time.Time, 1)
				go func() {
					<-held.Context().Done()
					ended <- time.Now()
				}()
				// Let C renew a few times through a healthy ensemble first.
				require.Eventually(t, func() bool { _, n := rec.state(); return n >= 2 }, 5*time.Second, 10*time.Millisecond, "C renews")

				heal := zkEns.Isolate(t, i)
				isolated := time.Now()
				ld, acquired := contend(t, d.l, key, sessionTimeout+20*time.Second)
				rctx, cancel := context.WithTimeout(t.Context(), time.Second)
				_ = held.Release(rctx) // stops C's renewals (its Unlock fails: node i is cut off)
				cancel()
				latest, renews := rec.state()
				ctxEnd := <-ended
				t.Logf("isolated node %d (%s); D's winning attempt began %v later; C's latest Expires was %v after the isolation (margin %v, %d renewals in all); C's Held.Context ended %v after the isolation",
					i, role, acquired.Sub(isolated).Round(time.Millisecond), latest.Sub(isolated).Round(time.Millisecond),
					acquired.Sub(latest).Round(time.Millisecond), renews, ctxEnd.Sub(isolated).Round(time.Millisecond))
				if acquired.Before(latest) {
					t.Errorf("D acquired %v before the Expires of the lease that the isolated node's answers gave C: two holders", latest.Sub(acquired).Round(time.Millisecond))
				}
				if !ctxEnd.Before(acquired) {
					t.Errorf("C's Held.Context was still alive %v after D's winning attempt began", ctxEnd.Sub(acquired).Round(time.Millisecond))
				}
				if ld.Fence <= lc.Fence {
					t.Errorf("D's Fence %d is not above C's %d", ld.Fence, lc.Fence)
				}
				if err := d.l.Unlock(ctxT(t), ld); err != nil {
					t.Error(err)
				}
				heal()
				ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
				defer cancel()
				if err := zkEns.WaitServing(ctx); err != nil {
					t.Fatal(err)
				}
				if err := held.Err(); !errors.Is(err, distlock.ErrNotHeld) {
					t.Errorf("C's Held.Err() = %v, want ErrNotHeld", err)
				}
			})
		}
	}
}

// TestRenewCountsRelayLag: the leader hears of a session on a follower only from the
// follower's answers to its pings, so it may expire the session SessionTimeout after
// an earlier packet than the Renew. The test renews just before the client's next
// ping is due (its last packet is then a third of the session timeout old) and cuts
// the follower off at once, so that the Renew's own packet is (most likely) never
// reported: the lease's Expires must still come before the session's expiry frees
// the key. An Expires of start + SessionTimeout fails here even though the Renew
// went through the leader.
func TestRenewCountsRelayLag(t *testing.T) {
	li := leaderIndex(t)
	f := (li + 1) % len(zkEns.Nodes)
	c := newClient(t, []string{zkEns.Nodes[f].Addr()}, sessionTimeout, nil, true)
	d := newClient(t, otherAddrs(f), sessionTimeout, nil, false)
	key := uniqueKey(t)
	lc, err := c.l.TryLock(ctxT(t), key, sessionTimeout)
	if err != nil {
		t.Fatal(err)
	}
	// Find one of go-zookeeper's pings (12 bytes, every SessionTimeout/3) on an
	// otherwise idle connection.
	p := c.proxies[0]
	const pingBytes = 12
	var ping time.Time
	seen := p.Stats().BytesToServer
	require.Eventually(t, func() bool {
		n := p.Stats().BytesToServer
		if n-seen == pingBytes {
			ping = time.Now()
			return true
		}
		seen = n
		return false
	}, 5*time.Second, 10*time.Millisecond, "a ping from the idle client")
	// Renew shortly before the next ping is due. Placing the request in time is the
	// point of the test, not a way to order events.
	time.Sleep(time.Until(ping.Add(sessionTimeout/3 - 100*time.Millisecond)))
	// The lease's local Expires (capped at a part of the session timeout) may have
	// passed while the test waited for an idle ping, and a Renew after Expires is
	// ErrNotHeld; this test is about the session's relay lag, with the node and the
	// session alive, so it renews a copy whose Expires is still ahead.
	lc.Expires = time.Now().Add(time.Second)
	renewed, err := c.l.Renew(ctxT(t), lc, sessionTimeout)
	if err != nil {
		t.Fatal(err)
	}
	zkEns.Isolate(t, f)
	isolated := time.Now()
	ld, acquired := contend(t, d.l, key, sessionTimeout+20*time.Second)
	t.Logf("renewed %v after a ping; D's winning attempt began %v after the Renew returned; the Renew's Expires was %v after it (margin %v)",
		isolated.Sub(ping).Round(time.Millisecond), acquired.Sub(isolated).Round(time.Millisecond),
		renewed.Expires.Sub(isolated).Round(time.Millisecond), acquired.Sub(renewed.Expires).Round(time.Millisecond))
	if acquired.Before(renewed.Expires) {
		t.Errorf("D acquired %v before the Expires that Renew returned", renewed.Expires.Sub(acquired).Round(time.Millisecond))
	}
	if err := d.l.Unlock(ctxT(t), ld); err != nil {
		t.Error(err)
	}
}

// TestClusterFaultUnderHolder: a leader change, and a node that loses its data (the
// leader, or the node the holder talks to), under a holder C that renews with Hold
// while D tries to acquire the key. C may keep its lease (its session survives the
// fault: it reconnects, and a new leader gives every session a full timeout) or lose
// it; either way D acquires only after C released, or after C's latest Expires and the
// end of its Held.Context, and with a larger Fence.
func TestClusterFaultUnderHolder(t *testing.T) {
	for _, fault := range []string{"ChangeLeader", "LoseData leader", "LoseData holder's node"} {
		t.Run(strings.ReplaceAll(fault, " ", "_"), func(t *testing.T) {
			leaderIndex(t) // the ensemble serves
			c := newClient(t, ensembleAddrs(), sessionTimeout, nil, false)
			d := newClient(t, ensembleAddrs(), sessionTimeout, nil, false)
			rec := &recorder{Locker: c.l}
			key := uniqueKey(t)
			lc, err := rec.TryLock(ctxT(t), key, sessionTimeout)
			if err != nil {
				t.Fatal(err)
			}
			held := distlock.Hold(t.Context(), rec, lc, nil)
			ended := make(chan time.Time, 1)
			go func() {
				<-held.Context().Done()
				ended <- time.Now()
			}()
			type win struct {
				lease    distlock.Lease
				acquired time.Time // the winning TryLock began
				returned time.Time // it returned
				err      error
			}
			won := make(chan win, 1)
			stop := make(chan struct{})
			go func() {
				for {
					select {
					case <-stop:
						won <- win{err: errors.New("stopped")}
						return
					default:
					}
					attempt := time.Now()
					ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
					l, err := d.l.TryLock(ctx, key, sessionTimeout)
					cancel()
					if err == nil {
						won <- win{lease: l, acquired: attempt, returned: time.Now()}
						return
					}
					time.Sleep(5 * time.Millisecond) // contention pace
				}
			}()
			faulted := time.Now()
			switch fault {
			case "ChangeLeader":
				zkEns.ChangeLeader(t)
			case "LoseData leader":
				zkEns.LoseData(t, leaderIndex(t))
			case "LoseData holder's node":
				zkEns.LoseData(t, zkEns.NodeIndex(c.conn.Server()))
			}
			recovered := time.Now()
			t.Logf("%s took %v", fault, recovered.Sub(faulted).Round(time.Millisecond))
			// Let C renew after the fault (or fail for good) before it lets go.
			require.Eventually(t, func() bool {
				return held.Err() != nil || rec.lastRenew().After(recovered)
			}, 10*time.Second, 10*time.Millisecond, "C renews after the fault, or loses its lease")
			released := time.Now()
			rctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			relErr := held.Release(rctx)
			cancel()
			var w win
			select {
			case w = <-won:
			case <-time.After(sessionTimeout + 20*time.Second):
				close(stop)
				w = <-won
				t.Fatalf("D did not acquire after C released (%v)", relErr)
			}
			if w.err != nil {
				t.Fatal(w.err)
			}
			latest, renews := rec.state()
			ctxEnd := <-ended
			kept := relErr == nil
			t.Logf("C kept its lease across the fault: %v (Release: %v; %d renewals); D acquired %v after the fault began, %v after C's Release began",
				kept, relErr, renews, w.acquired.Sub(faulted).Round(time.Millisecond), w.acquired.Sub(released).Round(time.Millisecond))
			// D acquired before C's Release began if its TryLock returned before it. A
			// TryLock that began before and returned after acquired after the release
			// when C's Unlock deleted C's node (the node existed until then, and D wins
			// only once no lower node is left); when C's lease was lost, its node may
			// have gone earlier: count D's attempt start then.
			before := w.returned.Before(released) || relErr != nil && w.acquired.Before(released)
			if before && (w.acquired.Before(latest) || !ctxEnd.Before(w.acquired)) {
				t.Errorf("D acquired while C held: %v before C's latest Expires, C's Held.Context ended %v after", latest.Sub(w.acquired).Round(time.Millisecond), ctxEnd.Sub(w.acquired).Round(time.Millisecond))
			}
			if w.lease.Fence <= lc.Fence {
				t.Errorf("D's Fence %d is not above C's %d", w.lease.Fence, lc.Fence)
			}
			if err := d.l.Unlock(ctxT(t), w.lease); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestClientIsolate: a client that reaches the ensemble through its own proxies finds
// the node it is connected to, and isolating that node makes the client move to
// another one with its session (the harness's per-client Isolate).
func TestClientIsolate(t *testing.T) {
	leaderIndex(t)
	c := newClient(t, ensembleAddrs(), sessionTimeout, nil, true)
	i := c.node()
	if i < 0 {
		t.Fatalf("node() = -1 for a client connected to %s", c.conn.Server())
	}
	sid := c.conn.SessionID()
	heal := c.isolate(t)
	require.Eventually(t, func() bool {
		return c.conn.State() == zk.StateHasSession && c.node() >= 0 && c.node() != i
	}, 15*time.Second, 10*time.Millisecond, "the client moves to another node")
	if c.conn.SessionID() != sid {
		t.Fatalf("the session changed from %#x to %#x", sid, c.conn.SessionID())
	}
	heal()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := zkEns.WaitServing(ctx); err != nil {
		t.Fatal(err)
	}
}
