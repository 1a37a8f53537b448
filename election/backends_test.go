package election_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/election"
	"github.com/distlock/distlock/internal/backendtest"
)

// A term is one leadership as its leader saw it: the times of its first and last
// actions, each taken while Leadership.Err was nil.
type term struct {
	term        uint64
	who         string
	first, last time.Time
}

// checkTerms fails t unless the terms' action windows are disjoint and ordered as
// their terms: once a leader has acted, no leader of an earlier term acts again.
func checkTerms(t *testing.T, terms []term) {
	t.Helper()
	slices.SortFunc(terms, func(a, b term) int { return a.first.Compare(b.first) })
	for i := 1; i < len(terms); i++ {
		prev, cur := terms[i-1], terms[i]
		if cur.term <= prev.term {
			t.Errorf("term %d (%s) acted first at %v, after term %d (%s): terms must increase",
				cur.term, cur.who, cur.first.Sub(terms[0].first), prev.term, prev.who)
		}
		if !prev.last.Before(cur.first) {
			t.Errorf("two leaders at once: term %d (%s) acted until %v, term %d (%s) from %v",
				prev.term, prev.who, prev.last.Sub(terms[0].first), cur.term, cur.who, cur.first.Sub(terms[0].first))
		}
	}
}

// TestOneLeaderAtATime: three candidates campaign over and over for 3s, each leading
// for a random while (a fifth of the terms for longer than the ttl) and then
// resigning; the windows in which the leaders acted never overlap, and terms
// increase from one to the next.
func TestOneLeaderAtATime(t *testing.T) {
	backendtest.Run(t, backends, func(t *testing.T, b backendtest.Backend) {
		cs := newCandidates(t, b, 3, testKey(t), &election.Options{TTL: b.TTL, Lock: distlock.LockOptions{MaxBackoff: 50 * time.Millisecond}})
		ctx := ctxFor(t, 3*time.Second)
		var (
			mu    sync.Mutex
			terms []term
			wg    sync.WaitGroup
		)
		for _, c := range cs {
			wg.Go(func() {
				for ctx.Err() == nil {
					lead, err := c.e.Campaign(ctx)
					if err != nil {
						if ctx.Err() == nil {
							t.Errorf("%s: Campaign: %v", c.name, err)
						}
						return
					}
					tm := term{term: lead.Term(), who: c.name}
					// Mostly short terms; one in five outlives the ttl, which
					// only renewals make safe.
					hold := time.Duration(rand.Int64N(int64(b.TTL / 4)))
					if rand.IntN(5) == 0 {
						hold = b.TTL + hold
					}
					for end := time.Now().Add(hold); ; {
						now := time.Now()
						if lead.Err() != nil {
							break
						}
						if tm.first.IsZero() {
							tm.first = now
						}
						tm.last = now
						if now.After(end) {
							break
						}
						time.Sleep(time.Millisecond)
					}
					if err := resign(t, lead); err != nil {
						t.Errorf("%s: Resign of term %d: %v", c.name, tm.term, err)
					}
					if !tm.first.IsZero() {
						mu.Lock()
						terms = append(terms, tm)
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		t.Logf("%d terms in 3s", len(terms))
		require.GreaterOrEqual(t, len(terms), 3, "too few terms: is Campaign woken when a leader resigns?")
		checkTerms(t, terms)
	})
}

// TestFailover: the leader of three candidates crashes (its client stops reaching
// the server, without resigning); another candidate leads within the backend's
// Freed bound, and only after the crashed leader's last Expires; the crashed
// leader's Context ends with a cause wrapping distlock.ErrNotHeld by its Expires.
func TestFailover(t *testing.T) {
	backendtest.Run(t, backends, func(t *testing.T, b backendtest.Backend) {
		cs := newCandidates(t, b, 3, testKey(t), &election.Options{TTL: b.TTL})
		ctx := ctxFor(t, 30*time.Second)
		type won struct {
			c    *candidate
			lead *election.Leadership
			at   time.Time
		}
		wins := make(chan won, len(cs))
		var wg sync.WaitGroup
		defer wg.Wait()
		stop, cancel := context.WithCancel(ctx)
		defer cancel()
		for _, c := range cs {
			wg.Go(func() {
				lead, err := c.e.Campaign(stop)
				if err != nil {
					return
				}
				wins <- won{c, lead, time.Now()}
				<-stop.Done()
				_ = resign(t, lead)
			})
		}
		first := <-wins
		expires := first.lead.Lease().Expires
		crashed := time.Now()
		first.c.c.Crash()
		var second won
		select {
		case second = <-wins:
		case <-time.After(b.Freed + 2*time.Second):
			t.Fatalf("no new leader %v after the leader crashed (bound %v)", b.Freed+2*time.Second, b.Freed)
		}
		took := second.at.Sub(crashed)
		t.Logf("failover took %v (ttl %v, bound %v)", took, b.TTL, b.Freed)
		require.LessOrEqual(t, took, b.Freed+time.Second, "failover slower than the backend frees a crashed client's key")
		require.True(t, second.at.After(expires), "the new leader (term %d) led %v before the crashed leader's Expires",
			second.lead.Term(), expires.Sub(second.at))
		require.Greater(t, second.lead.Term(), first.lead.Term())
		// The crashed leader's last Expires: its lease as last renewed (a renewal
		// may have succeeded after expires was read, before the Crash).
		last := first.lead.Lease().Expires
		if first.lead.Context().Err() == nil {
			select {
			case <-first.lead.Context().Done():
			case <-time.After(time.Until(last) + time.Second):
			}
		}
		require.Error(t, first.lead.Context().Err(), "the crashed leader's Context still alive %v after its last Expires", time.Since(last))
		require.ErrorIs(t, context.Cause(first.lead.Context()), distlock.ErrNotHeld)
		require.ErrorIs(t, first.lead.Err(), distlock.ErrNotHeld)
	})
}

// TestResignHandsOver: when the leader resigns, a waiting candidate leads promptly,
// long before the lease's ttl (10s) could have freed the key.
func TestResignHandsOver(t *testing.T) {
	backendtest.Run(t, backends, func(t *testing.T, b backendtest.Backend) {
		cs := newCandidates(t, b, 2, testKey(t), &election.Options{TTL: 10 * time.Second})
		ctx := ctxFor(t, 30*time.Second)
		a, err := cs[0].e.Campaign(ctx)
		require.NoError(t, err)
		type result struct {
			lead *election.Leadership
			err  error
			at   time.Time
		}
		done := make(chan result, 1)
		go func() {
			lead, err := cs[1].e.Campaign(ctx)
			done <- result{lead, err, time.Now()}
		}()
		// Let the second candidate start waiting (a Resign before it does proves
		// nothing about waking it).
		select {
		case r := <-done:
			t.Fatalf("the second candidate led (%v) while the first did", r.err)
		case <-time.After(300 * time.Millisecond):
		}
		resigned := time.Now()
		require.NoError(t, resign(t, a))
		require.ErrorIs(t, context.Cause(a.Context()), election.ErrResigned)
		require.ErrorIs(t, a.Err(), election.ErrResigned)
		r := <-done
		require.NoError(t, r.err)
		defer func() { require.NoError(t, resign(t, r.lead)) }()
		took := r.at.Sub(resigned)
		t.Logf("handover took %v", took)
		require.Less(t, took, 2*time.Second, "handover after Resign is not prompt")
		require.Greater(t, r.lead.Term(), a.Term())
	})
}

// TestCampaignBounded: Campaign returns when its context ends while another
// candidate leads, with an error wrapping distlock.ErrLocked and the context's
// error; TryCampaign returns ErrLocked at once.
func TestCampaignBounded(t *testing.T) {
	backendtest.Run(t, backends, func(t *testing.T, b backendtest.Backend) {
		cs := newCandidates(t, b, 2, testKey(t), &election.Options{TTL: 10 * time.Second})
		a, err := cs[0].e.Campaign(ctxFor(t, 10*time.Second))
		require.NoError(t, err)
		defer func() { require.NoError(t, resign(t, a)) }()

		start := time.Now()
		_, err = cs[1].e.Campaign(ctxFor(t, 300*time.Millisecond))
		took := time.Since(start)
		require.ErrorIs(t, err, distlock.ErrLocked)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Less(t, took, 2*time.Second, "Campaign outlived its context")

		_, err = cs[1].e.TryCampaign(ctxFor(t, 5*time.Second))
		require.ErrorIs(t, err, distlock.ErrLocked)
		require.NoError(t, a.Err())
	})
}

// TestLeaderAndObserve: Leader and Observe report the leader's term and owner label
// as leaders come and go, and no leader when there is none.
func TestLeaderAndObserve(t *testing.T) {
	backendtest.Run(t, backends, func(t *testing.T, b backendtest.Backend) {
		opts := &election.Options{TTL: 5 * time.Second, Poll: 50 * time.Millisecond}
		cs := newCandidates(t, b, 3, testKey(t), opts)
		watcher := cs[2].e
		ctx := ctxFor(t, 30*time.Second)

		_, err := watcher.Leader(ctx)
		require.ErrorIs(t, err, election.ErrNoLeader)
		require.ErrorIs(t, err, distlock.ErrNotHeld)

		octx, stop := context.WithCancel(ctx)
		ch, err := watcher.Observe(octx)
		require.NoError(t, err)
		defer func() {
			stop()
			for range ch { // Observe closes the channel when its context ends
			}
		}()
		next := func(what string) election.Leader {
			t.Helper()
			select {
			case l, ok := <-ch:
				require.True(t, ok, "Observe's channel closed early")
				return l
			case <-time.After(2 * time.Second): // Poll is 50ms
				t.Fatalf("Observe reported no %s within 2s", what)
				return election.Leader{}
			}
		}
		require.True(t, next("first value").IsZero(), "Observe's first value: a leader where there is none")

		check := func(l election.Leader, lead *election.Leadership, owner string) {
			t.Helper()
			require.Equal(t, lead.Term(), l.Term)
			if b.Owners {
				require.Equal(t, owner, l.Owner)
			}
			require.True(t, l.Expires.After(time.Now()), "the leader's Expires has passed")
			require.True(t, l.Expires.Before(time.Now().Add(opts.TTL+time.Second)), "the leader's Expires is after now + ttl")
		}
		a, err := cs[0].e.Campaign(ctx)
		require.NoError(t, err)
		check(next("leader"), a, cs[0].name)
		l, err := watcher.Leader(ctx)
		require.NoError(t, err)
		check(l, a, cs[0].name)

		require.NoError(t, resign(t, a))
		bLead, err := cs[1].e.Campaign(ctx)
		require.NoError(t, err)
		for l = next("second leader"); l.IsZero(); l = next("second leader") {
		}
		check(l, bLead, cs[1].name)

		require.NoError(t, resign(t, bLead))
		require.True(t, next("end of the leadership").IsZero(), "Observe reported a leader after the last one resigned")
		_, err = watcher.Leader(ctx)
		require.ErrorIs(t, err, election.ErrNoLeader)
	})
}
