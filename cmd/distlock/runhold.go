package main

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/distlock/distlock"
)

// hold runs CMD while it keeps lease alive, and returns the exit status.
//
// The status is decided from the clocks, never from which event distlock happens
// to handle first when it wakes to find both CMD finished and the lease ended (after
// distlock was stopped, say): CMD's own status when distlock saw CMD exit before the
// lease ended, exitLost otherwise. CMD's exit time is known only to lie between the
// last moment distlock saw CMD running and the moment it saw the exit (both bounds
// are taken without reaping CMD); when the lease ended in between, CMD may have run
// without the lease, and the status is exitLost.
func (r *runner) hold(ctx context.Context, l distlock.Locker, lease distlock.Lease, path string, stdin io.Reader, stdout io.Writer, env []string, sigc <-chan os.Signal) int {
	acquiredAt := time.Now()
	clock := newLeaseClock(lease)
	hctx, stopHold := context.WithCancel(ctx)
	defer stopHold()
	h := distlock.Hold(hctx, clock.track(l), lease, &distlock.HoldOptions{TTL: r.ttl, Observer: r.obs})
	release := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		if err := h.Release(rctx); err != nil && !errors.Is(err, distlock.ErrNotHeld) {
			r.logf("release %q: %s (the lease lapses at its ttl)", r.c.key, oneLine(err))
		}
	}

	startedAt := time.Now()
	if _, ended := clock.endedBy(startedAt); ended || h.Context().Err() != nil {
		why := expiredWhy + " (was distlock stopped?)"
		if h.Context().Err() != nil {
			why = oneLine(context.Cause(h.Context()))
		}
		release()
		r.logf("the lease on %q (fence %d) ended before CMD started: %s; not running CMD", r.c.key, lease.Fence, why)
		return exitFailed
	}
	cmdEnv := withEnv(env,
		"DISTLOCK_KEY="+r.c.key,
		"DISTLOCK_FENCE="+strconv.FormatUint(lease.Fence, 10))
	ch, err := startChild(path, r.c.argv, stdin, stdout, r.stderr, cmdEnv)
	if err != nil {
		release()
		r.logf("%s", oneLine(err))
		if errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.ENOEXEC) {
			return exitNoExec
		}
		if errors.Is(err, os.ErrNotExist) {
			return exitNotFound
		}
		return exitNoExec
	}
	defer ch.close()

	w := &cmdWatch{r: r, ch: ch, key: r.c.key, fence: lease.Fence, lastRunning: startedAt}
	deadline := time.NewTimer(time.Until(clock.deadline()))
	defer deadline.Stop()
	lostc := h.Context().Done()
wait:
	for {
		select {
		case <-ch.done:
			break wait
		case sig := <-sigc:
			ch.forward(sig.(syscall.Signal))
		case <-lostc:
			lostc = nil
			why := expiredWhy
			if _, early := clock.lostBy(time.Now()); early {
				why = oneLine(context.Cause(h.Context()))
			}
			w.leaseEnded(why)
		case <-deadline.C:
			now := time.Now()
			end, over := clock.endedBy(now)
			if !over {
				// Renewed meanwhile. CMD's liveness now narrows its exit time,
				// should distlock see the exit late.
				if ch.running() {
					w.lastRunning = now
				}
				deadline.Reset(end.Sub(now))
				continue
			}
			w.leaseEnded(expiredWhy)
		case <-w.killc:
			w.kill()
		}
	}
	w.stopKill()
	status := exitStatus(ch.cmd.ProcessState, ch.err)
	if end, _ := clock.endedBy(ch.seen); !ch.seen.Before(end) {
		release()
		w.report(status, end)
		return exitLost
	}

	// CMD exited inside the lease.
	if wait := time.Until(acquiredAt.Add(r.c.minHold)); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-h.Context().Done(): // lost during --min-hold: CMD's work was done
		case sig := <-sigc:
			t.Stop()
			// Stop renewing and leave the lease to lapse at its ttl.
			stopHold()
			r.logf("got %v during --min-hold; leaving %q to expire at its ttl", sig, r.c.key)
			return status
		}
		t.Stop()
	}
	release()
	return status
}

// A cmdWatch is what hold knows about CMD once the lease may have ended.
type cmdWatch struct {
	r     *runner
	ch    *child
	key   string
	fence uint64
	// lastRunning is the latest time at which CMD was known to be running
	// before the lease ended.
	lastRunning time.Time
	// ranPastEnd: CMD was seen running after the lease had ended.
	ranPastEnd bool
	ended      bool
	killTimer  *time.Timer
	killc      <-chan time.Time
}

// expiredWhy says why the lease ended when it was not lost early.
const expiredWhy = "it expired before a renewal succeeded"

// leaseEnded handles the end of the lease, which is now past: if CMD still runs,
// it runs without the lease, and is stopped. If CMD has exited, the exit that hold
// sees next decides the status.
func (w *cmdWatch) leaseEnded(why string) {
	if w.ended {
		return
	}
	w.ended = true
	if !w.ch.running() {
		return
	}
	w.ranPastEnd = true
	w.r.logf("lost the lease on %q (fence %d): %s; sending SIGTERM to CMD, SIGKILL in %v",
		w.key, w.fence, why, w.r.c.killAfter)
	w.ch.signal(syscall.SIGTERM)
	w.killTimer = time.NewTimer(w.r.c.killAfter)
	w.killc = w.killTimer.C
}

func (w *cmdWatch) kill() {
	w.killc = nil
	w.r.logf("CMD still running %v after SIGTERM; sending SIGKILL", w.r.c.killAfter)
	w.ch.signal(syscall.SIGKILL)
}

func (w *cmdWatch) stopKill() {
	if w.killTimer != nil {
		w.killTimer.Stop()
	}
}

// report explains the exit status exitLost: CMD's exit was seen after the lease
// ended at end.
func (w *cmdWatch) report(status int, end time.Time) {
	switch {
	case w.ranPastEnd:
		w.r.logf("CMD stopped (status %d) after the lease on %q was lost; exiting %d", status, w.key, exitLost)
		return
	case !w.lastRunning.Before(end):
		w.r.logf("CMD exited (status %d) after the lease on %q (fence %d) ended: it ran without the lease; exiting %d",
			status, w.key, w.fence, exitLost)
		return
	}
	w.r.logf("CMD exited (status %d), but distlock saw the exit only %v after the lease on %q (fence %d) ended, "+
		"having last seen CMD running %v before it ended (was distlock stopped or starved of CPU?): "+
		"CMD may have run without the lease; exiting %d",
		status, w.ch.seen.Sub(end).Round(time.Millisecond), w.key, w.fence,
		end.Sub(w.lastRunning).Round(time.Millisecond), exitLost)
}

// exitStatus is the status to pass through for CMD: its exit code, or 128+N when
// signal N killed it.
func exitStatus(ps *os.ProcessState, err error) int {
	if ps == nil {
		return exitFailed
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	if code := ps.ExitCode(); code >= 0 {
		return code
	}
	return exitFailed
}
