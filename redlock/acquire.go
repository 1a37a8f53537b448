package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/redisx"
)

// TryLock makes one attempt to acquire key for ttl on a quorum of the nodes.
//
// Phase 1 runs a script on every node at once that takes the node's lock if it is
// free (SET NX PX, on the node's clock) and increments the node's fence counter for
// key. Given a quorum of locks, the Lease's Fence is the largest counter among the
// nodes it locked. Where every locked node returned that largest value (the usual
// case) the attempt is done in one round trip; otherwise phase 2 raises the counter
// to the Fence on the nodes that lag, and a quorum of locked nodes must then hold a
// counter at least the Fence before TryLock succeeds. See the package documentation
// for why that makes fences increase across different majorities.
//
// The Lease's Expires is the time taken before phase 1 was sent, plus ttl, minus the
// clock-drift allowance (Options.DriftFactor and DriftConst); TryLock fails unless Expires is still ahead when
// the quorum is complete. Each node gets NodeTimeout(ttl) per phase: a slow or dead
// node is counted as failed, not waited for.
//
// A failed attempt removes the locks it made (and any it may have made, on nodes
// whose outcome is unknown) on every node, with a fresh context bounded by
// Options.CleanupTimeout, never the caller's dead one. It returns an error
// wrapping distlock.ErrLocked, naming the owner that holds the most nodes, when
// other owners hold the key on nodes that answered and keep this attempt from a
// quorum that the answering nodes could otherwise have given. Otherwise (too few
// nodes answered, the quorum took longer than the validity, ctx ended) it returns
// an error that does not wrap ErrLocked and names each failing node. Every error is
// an *distlock.OpError.
func (l *Locker) TryLock(ctx context.Context, key string, ttl time.Duration) (distlock.Lease, error) {
	start := time.Now() // before anything else: Expires counts from here
	if err := l.group.Enter(); err != nil {
		return distlock.Lease{}, opError("TryLock", key, err)
	}
	defer l.group.Leave()
	lease, err := l.tryLockChecked(ctx, key, ttl, start)
	if err != nil {
		return distlock.Lease{}, opError("TryLock", key, err)
	}
	return lease, nil
}

func (l *Locker) tryLockChecked(ctx context.Context, key string, ttl time.Duration, start time.Time) (distlock.Lease, error) {
	if err := driver.ValidateKey(key, MaxKeyLen); err != nil {
		return distlock.Lease{}, err
	}
	if err := l.checkTTL(ttl); err != nil {
		return distlock.Lease{}, err
	}
	if err := ctx.Err(); err != nil {
		return distlock.Lease{}, err
	}
	l.queue.Attempt(key) // a woken waiter's attempt ends its handoff
	attempt := func() (distlock.Lease, error) {
		lease, err := l.tryLock(ctx, key, ttl, start, true)
		if err != nil && !errors.Is(err, distlock.ErrLocked) {
			l.queue.AttemptFailed(key) // nobody may take the key: wake the next waiter
		}
		return lease, err
	}
	if !l.uses(useFlights) {
		return attempt()
	}
	return l.flights.run(ctx, key, start, attempt)
}

// tryLock is one attempt of TryLock, whose call began at start. Its steps: phase
// 1 on every node (lock the key, count its fence), the nodes kept out
// (nodestate.go: when it finds a fresh deployment and bootstrap is set, it brings
// the nodes in and makes one more attempt), the quorum, phase 2 (raise the lagging
// counters), and the validity left. A step that fails releases what the attempt
// locked.
func (l *Locker) tryLock(ctx context.Context, key string, ttl time.Duration, start time.Time, bootstrap bool) (distlock.Lease, error) {
	a := l.newAcquisition(ctx, key, ttl, start)
	a.phase1()
	defer a.settleEarly()
	if again, err := l.settleNodes(ctx, a.res, bootstrap && len(a.locked) == 0); again {
		a.att.decide(l, a.token, a.res, false, 0)
		return l.tryLock(ctx, key, ttl, start, false)
	} else if err != nil {
		return a.fail(err)
	}
	if len(a.locked) < l.quorum {
		return a.fail(a.noQuorum())
	}
	if err := a.phase2(); err != nil {
		return a.fail(err)
	}
	if now := time.Now(); !a.expires.After(now) {
		return a.fail(fmt.Errorf("the quorum took %v, more than ttl %v less the drift allowance %v; released",
			now.Sub(start), ttl, l.drift(ttl)))
	}
	return a.succeed(), nil
}

// An acquisition is the state of one attempt of TryLock (tryLock).
type acquisition struct {
	l       *Locker
	ctx     context.Context
	key     string
	n       redisx.Names
	token   string
	start   time.Time // when the TryLock began
	ms      int64     // ttl in ms
	nt      time.Duration
	expires time.Time
	att     *attempt // the answers that come after phase 1 stopped waiting (attempt.go)
	seen    peeks    // the hubs' channels before phase 1 (sighting.go)
	mode    string   // the attempt's part in the key's turns (turns.go)
	score   int64    // since when l waits on the key, when mode is not turnNone
	// Phase 1's replies, by node, and the nodes by reply.
	res                  []reply[phase1]
	locked, held, failed []int
	fence                int64 // the largest counter among the locked nodes
}

// newAcquisition prepares an attempt on key for ttl whose TryLock began at start.
func (l *Locker) newAcquisition(ctx context.Context, key string, ttl time.Duration, start time.Time) *acquisition {
	a := &acquisition{l: l, ctx: ctx, key: key, n: l.names(key), token: driver.NewToken(), start: start,
		ms: redisx.Millis(ttl), nt: l.NodeTimeout(ttl), expires: start.Add(ttl - l.drift(ttl)), att: &attempt{}}
	a.seen = l.peek(a.n) // for a Wait that follows (sighting.go)
	a.mode = l.turnMode(key, a.seen)
	if a.mode != turnNone {
		a.score = l.turnSince(key, start.UnixMicro()) // since when l waits on key
	}
	return a
}

// phase1 runs the acquire script on every node at once and sorts the replies. It
// lingers for the slower nodes once decided (see fanout): a lease that holds more
// than a bare quorum survives a node's loss, and Unlock right after TryLock finds
// every lock made. Answers later still join the lease or are released (settle).
func (a *acquisition) phase1() {
	l := a.l
	// The script's keys and arguments, built once for all the nodes; with the
	// key's turns (turns.go) when l waits on the key.
	call := acquireCall{
		keys: []string{a.n.Lock, a.n.Fence, l.state.marker, l.state.quarantine},
		args: []any{a.token, a.ms, l.opts.Owner, l.quarantineMS},
	}
	if a.mode != turnNone {
		call.keys = append(call.keys, turnsName(a.n, a.key))
		call.args = append(call.args, l.idArg, a.mode, a.score, a.start.UnixMicro())
	}
	a.res = fanout(a.ctx, l, nil, a.nt,
		func(ctx context.Context, i int) (phase1, error) { return l.acquireOn(ctx, i, call) },
		a.late, l.decidedAcquire, true)
	for i, r := range a.res {
		switch {
		case r.err != nil:
			a.failed = append(a.failed, i)
		case r.v.out != nil: // took nothing: counts as neither locked nor held
		case r.v.locked:
			a.locked = append(a.locked, i)
			a.fence = max(a.fence, r.v.fence)
		default:
			a.held = append(a.held, i)
		}
	}
}

// noQuorum is the error of an attempt that locked fewer than a quorum of nodes.
// When it is contention, the attempt's sightings (sighting.go), turns (turns.go)
// and the release it came too early for (retry.go) are recorded for the Waits that
// follow.
func (a *acquisition) noQuorum() error {
	l := a.l
	err := l.noQuorum(a.ctx, a.key, a.res, a.locked, a.held)
	if !errors.Is(err, distlock.ErrLocked) {
		return err
	}
	if l.uses(useSightings) {
		l.saw(a.n, a.seen, a.res, a.held)
	}
	l.queued(a.key, a.mode != turnNone)
	if a.mode != turnNone && l.uses(useRetry) {
		digests := make([]string, 0, len(a.held))
		for _, i := range a.held {
			digests = append(digests, a.res[i].v.digest)
		}
		l.releasing(a.key, len(a.locked), digests)
	}
	return err
}

// phase2 raises the lagging counters to the fence. Only locked nodes count towards
// the quorum: when fewer than a quorum of them record the fence already, it raises
// the lagging locked nodes and waits until a quorum records it (or returns the
// error); otherwise it raises them in the background, bounded, which keeps the
// counters in step for later acquisitions.
func (a *acquisition) phase2() error {
	l := a.l
	ok := 0
	var lagLocked []int
	for i, r := range a.res {
		switch {
		case r.err != nil, r.v.out != nil:
		case !r.v.locked:
			// Another owner's lock: phase 1 did not read its counter, which that
			// owner's own attempt incremented. Raising it is not needed for
			// safety (only locked nodes count); a later phase 2 raises it if it lags.
		case r.v.fence >= a.fence:
			ok++
		default:
			lagLocked = append(lagLocked, i)
		}
	}
	raise := func(ctx context.Context, i int) (bool, error) { return l.raiseOn(ctx, i, a.n, a.token, a.fence) }
	if ok >= l.quorum {
		if len(lagLocked) > 0 {
			// Not needed for this lease: raise in the background, bounded.
			l.group.Go(func() {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), l.opts.CleanupTimeout)
				defer cancel()
				fanout(cctx, l, lagLocked, a.nt, raise, nil, nil, false)
			})
		}
		return nil
	}
	res2 := fanout(a.ctx, l, lagLocked, a.nt, raise, nil, func(res []reply[bool]) bool {
		more := 0
		for _, i := range lagLocked {
			if r := res[i]; r.answered && r.err == nil && r.v {
				more++
			}
		}
		return ok+more >= l.quorum
	}, false)
	for _, i := range lagLocked {
		if r := res2[i]; r.err == nil && r.v {
			ok++
		}
	}
	if ok >= l.quorum {
		return nil
	}
	errs := nodeErrors(l, res2)
	if a.ctx.Err() != nil {
		errs = append(errs, a.ctx.Err())
	}
	return fmt.Errorf("fence %d recorded on only %d of %d nodes (quorum %d); released: %w",
		a.fence, ok, len(l.nodes), l.quorum, errors.Join(errs...))
}

// fail ends a failed attempt with err. It waits for the release of the locks that
// answered (they answer fast); the nodes whose outcome is unknown are cleaned up
// in the background. An attempt that found the key held while l waits on it joins
// the key's turns where it releases (turns.go).
func (a *acquisition) fail(err error) (distlock.Lease, error) {
	l := a.l
	a.att.decide(l, a.token, a.res, false, 0)
	c := newReleaseCall(a.n, a.token)
	if a.mode != turnNone && errors.Is(err, distlock.ErrLocked) {
		c = newJoinCall(a.n, a.key, a.token, l.id, a.score, a.ms)
	}
	l.release(a.ctx, a.locked, c, a.nt)
	l.release(a.ctx, a.failed, c, 0)
	return distlock.Lease{}, err
}

// succeed ends a successful attempt: its lease.
func (a *acquisition) succeed() distlock.Lease {
	l := a.l
	a.att.decide(l, a.token, a.res, true, a.fence)
	l.acquired(a.key, a.token)
	l.queued(a.key, a.mode == turnAgain)
	l.took(a.key)
	return distlock.Lease{Key: a.key, Token: a.token, Fence: uint64(a.fence), Expires: a.expires}
}

// noQuorum builds the error of an attempt that locked fewer than a quorum of nodes.
func (l *Locker) noQuorum(ctx context.Context, key string, res []reply[phase1], locked, held []int) error {
	answered := len(locked) + len(held)
	if len(held) > 0 && answered >= l.quorum && ctx.Err() == nil {
		// The answering nodes could have made a quorum: other owners took it.
		owners := make(map[string]int)
		digests := make(map[string]int)
		var holdFor time.Duration
		for _, i := range held {
			owners[res[i].v.owner]++
			digests[res[i].v.digest]++
			holdFor = max(holdFor, res[i].v.holdFor)
		}
		l.learn(key, digests, len(l.nodes)-len(held)) // for the Waits (herd.go)
		top, most := "", 0
		for o, c := range owners {
			if c > most || (c == most && o < top) {
				top, most = o, c
			}
		}
		return fmt.Errorf("held by %q on %d of %d nodes (%d held by others in all, %d answered, quorum %d) for up to %v more: %w",
			top, most, len(l.nodes), len(held), answered, l.quorum, holdFor, distlock.ErrLocked)
	}
	errs := nodeErrors(l, res)
	for i, r := range res {
		if r.err == nil && r.v.out != nil {
			errs = append(errs, fmt.Errorf("%s: %v", l.nodes[i].Name, r.v.out))
		}
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return fmt.Errorf("locked %d of %d nodes, %d held by others, %d failed or kept out (quorum %d); released: %w",
		len(locked), len(l.nodes), len(held), len(l.nodes)-answered, l.quorum, errors.Join(errs...))
}

// decidedAcquire reports whether phase 1's answers so far decide TryLock's result,
// including which error it returns: a quorum locked; or a quorum is out of reach
// and either other owners' locks are what keeps it so among enough answering nodes
// to call it contention (ErrLocked), or so many nodes failed that it cannot be
// contention (another error).
func (l *Locker) decidedAcquire(res []reply[phase1]) bool {
	locked, held, failed, waiting, out := 0, 0, 0, 0, 0
	for _, r := range res {
		switch {
		case r.answered && r.err == nil && r.v.out != nil:
			failed++
			out++
		case r.err != nil:
			failed++
		case !r.answered && r.suspect: // neither failed nor waited for
		case !r.answered:
			waiting++
		case r.v.locked:
			locked++
		default:
			held++
		}
	}
	if out > 0 && waiting > 0 {
		// A node that does not count yet: hear every other node, to bring a
		// fresh deployment in at once (nodestate.go), or to know each node's state.
		return false
	}
	q := l.quorum
	return locked >= q || failed > len(l.nodes)-q || (locked+waiting < q && held > 0 && locked+held >= q)
}
