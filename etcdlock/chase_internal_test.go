package etcdlock

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// simLease is a leader's view of one lease: granted at 0 with a TTL of granted
// seconds, refreshed at the times in refreshes (a refresh that comes after the
// lease expired fails: the lease is dead).
type simLease struct {
	granted   int64
	refreshes []time.Duration
}

// expiry returns the lease's expiry as the leader knows it at t.
func (s simLease) expiry(t time.Duration) time.Duration {
	e := time.Duration(s.granted) * time.Second
	for _, r := range s.refreshes {
		if r > t || r >= e {
			break
		}
		e = r + time.Duration(s.granted)*time.Second
	}
	return e
}

// death returns when the lease expires for good.
func (s simLease) death() time.Duration { return s.expiry(time.Duration(1 << 62)) }

// TestChaseStateSimulated drives chaseState with the answers a leader gives for
// leases refreshed at random times, with random round trips: a verdict of
// expired comes only when the lease has expired at the leader by the verdict
// probe's lookup (whatever the refreshes and round trips), and, once the
// refreshes stop, soon after the lease's expiry (with round trips up to 60ms).
func TestChaseStateSimulated(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Unix(1_000_000, 0)
	worst := time.Duration(0)
	for trial := range 20000 {
		granted := int64(2 + rng.IntN(3)) // 2..4 s
		s := simLease{granted: granted}
		at := time.Duration(0)
		for range rng.IntN(8) {
			// Mostly in time, sometimes late (the lease dies).
			at += time.Duration(rng.Int64N(int64(granted)*int64(time.Second)+300*int64(time.Millisecond))) + 50*time.Millisecond
			s.refreshes = append(s.refreshes, at)
		}
		maxRTT := time.Duration(1+rng.IntN(60)) * time.Millisecond
		slow := trial%4 == 0 // round trips up to 1.5s: safety only
		if slow {
			maxRTT = time.Duration(1+rng.IntN(1500)) * time.Millisecond
		}
		var c chaseState
		now := time.Duration(granted)*time.Second - chaseLead + time.Duration(rng.Int64N(int64(time.Second)))
		now = max(now, 0)
		probes := 0
		var trace []string
		for {
			probes++
			if probes > 500 {
				t.Fatalf("trial %d: more than 500 probes (lease %+v)", trial, s)
			}
			rtt := time.Duration(rng.Int64N(int64(maxRTT))) + 100*time.Microsecond
			lookup := now + time.Duration(rng.Int64N(int64(rtt)))
			rem := s.expiry(lookup) - lookup
			p := ttlProbe{sent: base.Add(now), recv: base.Add(now + rtt), ttl: int64(rem.Seconds()), granted: granted, member: 1, term: 1}
			expired, next := c.observe(p)
			trace = append(trace, fmt.Sprintf("probe at %v (rtt %v): %v left, ttl %d: expired %v, next %v", now, rtt, rem, p.ttl, expired, next.Sub(base)))
			if expired {
				if rem > 0 {
					t.Fatalf("trial %d: verdict expired at %v while the lease had %v left (lease %+v, rtt up to %v)", trial, lookup, rem, s, maxRTT)
				}
				if slow || c.calm {
					break // only safety: a chase that saw a refresh probes seldom
				}
				if late := lookup - s.death(); late > worst {
					worst = late
				}
				if late := lookup - s.death(); late > 250*time.Millisecond {
					t.Log(strings.Join(trace, "\n"))
					t.Fatalf("trial %d: verdict %v after the lease died (lease %+v, rtt up to %v, %d probes)", trial, late, s, maxRTT, probes)
				}
				break
			}
			if next.IsZero() {
				t.Fatalf("trial %d: the chase gave up on a lease of %ds", trial, granted)
			}
			now = max(next.Sub(base), now+rtt)
		}
	}
	t.Logf("latest verdict: %v after the lease's expiry", worst)
}

// TestChaseVerdict checks the rule on hand-made chains.
func TestChaseVerdict(t *testing.T) {
	b := time.Unix(1_000_000, 0)
	ms := func(n int) time.Time { return b.Add(time.Duration(n) * time.Millisecond) }
	p := func(sent, recv int, ttl, granted int64) ttlProbe {
		return ttlProbe{sent: ms(sent), recv: ms(recv), ttl: ttl, granted: granted, member: 1, term: 7, bracketed: true}
	}
	unbracketed := func(q ttlProbe) ttlProbe { q.bracketed = false; return q }
	for _, tc := range []struct {
		name  string
		chain []ttlProbe
		want  bool
	}{
		{"expired by a second", []ttlProbe{p(0, 10, -1, 3)}, true},
		{"one zero", []ttlProbe{p(0, 10, 0, 3)}, false},
		{"two zeros a second apart", []ttlProbe{p(0, 10, 0, 3), p(1020, 1030, 0, 3)}, true},
		{"second too soon", []ttlProbe{p(0, 10, 0, 3), p(1000, 1010, 0, 3)}, false},
		{"link too long", []ttlProbe{p(0, 10, 0, 3), p(1020, 2000, 0, 3)}, false},
		{"2s lease: link too long", []ttlProbe{p(0, 10, 0, 2), p(1020, 1030, 0, 2)}, false},
		{"2s lease: three links", []ttlProbe{p(0, 10, 0, 2), p(500, 510, 0, 2), p(1020, 1030, 0, 2)}, true},
		{"a one in the chain", []ttlProbe{p(0, 10, 0, 3), p(500, 510, 1, 3), p(1020, 1030, 0, 3)}, false},
		{"another term", []ttlProbe{p(0, 10, 0, 3), {sent: ms(1020), recv: ms(1030), granted: 3, member: 1, term: 8, bracketed: true}}, false},
		{"another member, same term", []ttlProbe{p(0, 10, 0, 3), {sent: ms(1020), recv: ms(1030), granted: 3, member: 2, term: 7, bracketed: true}}, true},
		{"first not bracketed", []ttlProbe{unbracketed(p(0, 10, 0, 3)), p(1020, 1030, 0, 3)}, false},
		{"expired, not bracketed", []ttlProbe{unbracketed(p(0, 10, -1, 3))}, false},
	} {
		if got := chaseVerdict(tc.chain); got != tc.want {
			t.Errorf("%s: chaseVerdict = %v, want %v", tc.name, got, tc.want)
		}
	}
}
