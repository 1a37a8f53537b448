package conformance

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const mS = time.Millisecond

var bounds = Bounds{Ctx: 50 * mS, Clock: 10 * mS}

// acq is a successful TryLock by client c of key k with token tok and fence f,
// invoked at inv, returned at ret, for ttl.
func acq(c int, k, tok string, f uint64, inv, ret, ttl time.Duration) Event {
	return Event{Client: c, Op: OpTryLock, Key: k, TTL: ttl, Invoke: inv, Return: ret, Token: tok, Fence: f, Expires: inv + ttl}
}

func renew(c int, k, tok string, inv, ret, ttl time.Duration, out string) Event {
	e := Event{Client: c, Op: OpRenew, Key: k, TTL: ttl, Invoke: inv, Return: ret, Token: tok, Fence: 1, Outcome: out} // the tests renew fence 1
	if out == "" {
		e.Expires = inv + ttl
	}
	return e
}

func unlock(c int, k, tok string, inv, ret time.Duration, out string) Event {
	return Event{Client: c, Op: OpUnlock, Key: k, Invoke: inv, Return: ret, Token: tok, Outcome: out}
}

func rules(vs []Violation) []string {
	var r []string
	for _, v := range vs {
		r = append(r, v.Rule)
	}
	return r
}

func TestCheckExclusion(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    []Event
		want []string
	}{
		{"expired then acquired", []Event{
			acq(1, "k", "a", 1, 0, 5*mS, 100*mS),
			acq(2, "k", "b", 2, 90*mS, 101*mS, 100*mS),
		}, nil},
		{"acquired before Expires", []Event{
			acq(1, "k", "a", 1, 0, 5*mS, 100*mS),
			acq(2, "k", "b", 2, 90*mS, 99*mS, 100*mS),
		}, []string{rMutex}},
		{"renewed, then acquired before the new Expires", []Event{
			acq(1, "k", "a", 1, 0, 5*mS, 100*mS),
			renew(1, "k", "a", 50*mS, 55*mS, 100*mS, ""),
			acq(2, "k", "b", 2, 120*mS, 130*mS, 100*mS),
		}, []string{rMutex}},
		{"a Renew of unknown outcome extends nothing", []Event{
			acq(1, "k", "a", 1, 0, 5*mS, 100*mS),
			renew(1, "k", "a", 50*mS, 95*mS, 100*mS, OutCtx),
			acq(2, "k", "b", 2, 120*mS, 130*mS, 100*mS),
		}, nil},
		{"a Renew that returned after Expires still told its holder", []Event{
			acq(1, "k", "a", 1, 0, 5*mS, 100*mS),
			renew(1, "k", "a", 50*mS, 101*mS, 100*mS, ""),
			acq(2, "k", "b", 2, 110*mS, 120*mS, 100*mS),
		}, []string{rMutex}},
		{"acquired in the gap before a late Renew's return, and expired before it", []Event{
			acq(1, "k", "a", 1, 0, 5*mS, 100*mS),
			renew(1, "k", "a", 50*mS, 120*mS, 100*mS, ""),
			acq(2, "k", "b", 2, 100*mS, 101*mS, 10*mS),
		}, nil},
		{"unlocked, then acquired during the Unlock", []Event{
			acq(1, "k", "a", 1, 0, 5*mS, time.Second),
			unlock(1, "k", "a", 50*mS, 60*mS, ""),
			acq(2, "k", "b", 2, 55*mS, 58*mS, 100*mS),
		}, nil},
		{"acquired before the Unlock was invoked", []Event{
			acq(1, "k", "a", 1, 0, 5*mS, time.Second),
			acq(2, "k", "b", 2, 20*mS, 30*mS, 100*mS),
			unlock(1, "k", "a", 50*mS, 60*mS, ""),
		}, []string{rMutex}},
		{"other keys do not conflict", []Event{
			acq(1, "k", "a", 1, 0, 5*mS, time.Second),
			acq(2, "j", "b", 1, 0, 5*mS, time.Second),
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, rules(Check(tc.h, bounds)))
		})
	}
}

func TestCheckFences(t *testing.T) {
	h := []Event{
		acq(1, "k", "a", 5, 0, 5*mS, 100*mS),
		acq(2, "k", "b", 5, 200*mS, 205*mS, 100*mS),
	}
	vs := Check(h, bounds)
	require.Equal(t, []string{rFence}, rules(vs))
	require.Len(t, vs[0].Events, 2, "the excerpt is the two acquisitions")
	// Concurrent acquisitions (neither returned before the other started) are not
	// ordered by time, so rule 3 does not judge them; rule 1 does.
	h[1].Invoke, h[1].Return, h[1].Expires = 3*mS, 6*mS, 103*mS
	require.Equal(t, []string{rMutex}, rules(Check(h, bounds)))
}

func TestCheckCalls(t *testing.T) {
	late := unlock(1, "k", "a", 0, 200*mS, OutCtx)
	late.Deadline = 100 * mS
	onTime := late
	onTime.Return = 140 * mS
	past := acq(1, "k", "a", 1, 0, 120*mS, 100*mS)
	long := acq(2, "j", "b", 1, 0, 5*mS, 100*mS)
	long.Expires = 200 * mS
	require.Equal(t, []string{rContext}, rules(Check([]Event{late}, bounds)))
	require.Empty(t, Check([]Event{onTime}, bounds))
	require.Equal(t, []string{rLease}, rules(Check([]Event{past}, bounds)))
	require.Equal(t, []string{rLease}, rules(Check([]Event{long}, bounds)))
}

func TestCheckHeld(t *testing.T) {
	end := func(at time.Duration) Event {
		return Event{Client: 1, Op: OpHeldEnd, Key: "k", Invoke: 10 * mS, Return: at, Token: "a"}
	}
	base := []Event{
		acq(1, "k", "a", 1, 0, 5*mS, 100*mS),
		renew(1, "k", "a", 30*mS, 35*mS, 100*mS, ""),      // Expires 130ms
		renew(1, "k", "a", 60*mS, 200*mS, 100*mS, OutCtx), // unknown: extends nothing
	}
	require.Empty(t, Check(append(base, end(170*mS)), bounds))
	vs := Check(append(base, end(190*mS)), bounds)
	require.Equal(t, []string{rHold}, rules(vs))
	require.Contains(t, vs[0].What, "60ms after")
	late := end(210 * mS)
	late.Invoke = 180 * mS // Hold called after the lease's Expires
	require.Empty(t, Check(append(base, late), bounds), "a Held of an expired lease ends at once")
	late.Return = 240 * mS
	require.Equal(t, []string{rHold}, rules(Check(append(base, late), bounds)), "... not 60ms later")
}

func TestWriteHistory(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteHistory(&buf, []Event{acq(1, "k", "a", 1, 0, 5*mS, 100*mS), unlock(1, "k", "a", 6*mS, 7*mS, "")}))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2)
	require.Contains(t, lines[0], `"op":"TryLock"`)
}

func TestCheckLocked(t *testing.T) {
	locked := func(c int, inv, ret time.Duration) Event {
		return Event{Client: c, Op: OpTryLock, Key: "k", TTL: 100 * mS, Invoke: inv, Return: ret, Outcome: OutLocked}
	}
	b := Bounds{Ctx: 50 * mS, Clock: 10 * mS, Grace: 30 * mS}
	held := acq(1, "k", "a", 1, 0, 5*mS, 100*mS)
	require.Empty(t, Check([]Event{held, locked(2, 50*mS, 55*mS)}, b), "held")
	require.Empty(t, Check([]Event{held, locked(2, 120*mS, 125*mS)}, b), "within the grace after Expires")
	require.Equal(t, []string{rErrors}, rules(Check([]Event{held, locked(2, 140*mS, 145*mS)}, b)), "past the grace")
	require.Equal(t, []string{rErrors}, rules(Check([]Event{locked(2, 0, 5*mS)}, b)), "nobody ever held it")
	unknown := Event{Client: 1, Op: OpTryLock, Key: "k", TTL: 100 * mS, Invoke: 0, Return: 20 * mS, Outcome: OutCtx}
	require.Empty(t, Check([]Event{unknown, locked(2, 50*mS, 55*mS)}, b), "an attempt of unknown outcome may hold it")
	released := []Event{held, unlock(1, "k", "a", 20*mS, 25*mS, ""), locked(2, 50*mS, 55*mS)}
	require.Equal(t, []string{rErrors}, rules(Check(released, b)), "after an Unlock that returned nil")
	renewed := []Event{held, renew(1, "k", "a", 80*mS, 300*mS, 100*mS, OutCtx), locked(2, 150*mS, 155*mS)}
	require.Empty(t, Check(renewed, b), "a Renew of unknown outcome may have extended it")
	b.Session = true
	closed := Event{Client: 1, Op: OpClose, Invoke: 200 * mS, Return: 201 * mS}
	require.Empty(t, Check([]Event{held, locked(2, 150*mS, 155*mS)}, b), "a session keeps it")
	require.Equal(t, []string{rErrors}, rules(Check([]Event{held, closed, locked(2, 300*mS, 305*mS)}, b)), "after its client closed, and the grace")
}

func TestCheckCloseEndsLeases(t *testing.T) {
	h := []Event{
		acq(1, "k", "a", 1, 0, 5*mS, time.Second),
		{Client: 1, Op: OpClose, Invoke: 50 * mS, Return: 51 * mS},
		acq(2, "k", "b", 2, 60*mS, 65*mS, time.Second),
	}
	require.Empty(t, Check(h, bounds), "a closed client's leases end at its Close")
	h[1].Client = 3
	require.Equal(t, []string{rMutex}, rules(Check(h, bounds)), "another client's Close ends nothing")
}

func TestCheckRenewals(t *testing.T) {
	held := acq(1, "k", "a", 1, 0, 5*mS, 100*mS)
	require.Empty(t, Check([]Event{held, renew(1, "k", "a", 90*mS, 95*mS, 100*mS, "")}, bounds))
	late := renew(1, "k", "a", 101*mS, 103*mS, 100*mS, "")
	require.Equal(t, []string{rOwner}, rules(Check([]Event{held, late}, bounds)), "a Renew invoked after Expires succeeded")
	other := renew(1, "k", "a", 50*mS, 55*mS, 100*mS, "")
	other.Fence = 2
	require.Equal(t, []string{rOwner}, rules(Check([]Event{held, other}, bounds)), "a Renew returned another fence")
	afterUnlock := []Event{held, unlock(1, "k", "a", 10*mS, 20*mS, ""), renew(1, "k", "a", 30*mS, 35*mS, 100*mS, "")}
	require.Equal(t, []string{rOwner}, rules(Check(afterUnlock, bounds)), "a Renew after an Unlock that returned nil")
	unknownUnlock := []Event{held, unlock(1, "k", "a", 10*mS, 20*mS, OutCtx), renew(1, "k", "a", 30*mS, 35*mS, 100*mS, "")}
	require.Empty(t, Check(unknownUnlock, bounds), "an Unlock of unknown outcome may not have applied")
}

func TestCheckCleanup(t *testing.T) {
	b := Bounds{Ctx: 50 * mS, Clock: 10 * mS, Grace: 30 * mS, Cleanup: 100 * mS}
	abandoned := Event{Client: 1, Op: OpTryLock, Key: "k", TTL: time.Minute, Invoke: 0, Return: 20 * mS, Outcome: OutCtx}
	locked := Event{Client: 2, Op: OpTryLock, Key: "k", TTL: time.Minute, Invoke: 100 * mS, Return: 105 * mS, Outcome: OutLocked}
	require.Empty(t, Check([]Event{abandoned, locked}, b), "within the clean-up bound")
	locked.Invoke, locked.Return = 200*mS, 205*mS
	require.Equal(t, []string{rErrors}, rules(Check([]Event{abandoned, locked}, b)), "the abandoned attempt's lock outlived its clean-up")
	partition := Event{Client: 1, Op: OpFault, Invoke: 10 * mS, Return: 300 * mS, Err: "Partition"}
	locked.Invoke, locked.Return = 350*mS, 355*mS
	require.Empty(t, Check([]Event{abandoned, partition, locked}, b), "its client was partitioned: the bounded clean-up may give up")
	partition.Invoke, partition.Return = 130*mS, 140*mS
	require.Equal(t, []string{rErrors}, rules(Check([]Event{abandoned, partition, locked}, b)), "a partition after the clean-up's bound")
	crash := Event{Client: 1, Op: OpFault, Invoke: 30 * mS, Return: 31 * mS, Err: "Crash"}
	require.Empty(t, Check([]Event{abandoned, crash, locked}, b), "its client crashed: the lock lapses by its ttl")
}

func TestCheckWaits(t *testing.T) {
	b := Bounds{Ctx: 50 * mS, Clock: 10 * mS, Grace: 30 * mS, Wait: 100 * mS}
	held := acq(1, "k", "a", 1, 0, 5*mS, time.Second)
	lock := Event{Client: 2, Op: OpLock, Key: "k", TTL: time.Second, Invoke: 10 * mS, Return: 500 * mS, Token: "b", Fence: 2, Expires: 1500 * mS}
	quick := []Event{held, unlock(1, "k", "a", 400*mS, 420*mS, ""), lock}
	require.Empty(t, Check(quick, b), "woken 80ms after the release")
	slow := []Event{held, unlock(1, "k", "a", 100*mS, 120*mS, ""), lock}
	require.Equal(t, []string{rWaiter}, rules(Check(slow, b)), "waited 380ms on a free key")
	b.Wait = 0
	require.Empty(t, Check(slow, b), "not checked")
}
