package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/distlock/distlock"
)

// Timeouts of distlock's own calls to the backend.
const (
	// opTimeout bounds opening the backend, one TryLock, one Inspect, and each
	// round of waiting (after which the wait starts over, so that a call that hangs
	// on an unreachable server is abandoned).
	opTimeout = 15 * time.Second
	// releaseTimeout bounds the final Unlock.
	releaseTimeout = 5 * time.Second
	// closeTimeout bounds the wait for a Locker's Close (see closeLocker).
	closeTimeout = 3 * time.Second
)

// forwarded are the signals that run forwards to CMD.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// cmdRun is "distlock run".
func cmdRun(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env []string) int {
	c, err := parseRun(args)
	if isHelp(err) {
		fmt.Fprint(stdout, usageText)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "distlock run: %s\n", oneLine(err))
		return exitUsage
	}
	if runUnsupported != "" {
		fmt.Fprintf(stderr, "distlock run: %s\n", runUnsupported)
		return exitFailed
	}
	// Resolve CMD before touching the lock, so that a typo costs nothing.
	path, err := exec.LookPath(c.argv[0])
	if err != nil {
		fmt.Fprintf(stderr, "distlock run: %s\n", oneLine(err))
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return exitNotFound
		}
		return exitNoExec
	}

	// From here on, the forwarded signals are ours to handle.
	sigc := make(chan os.Signal, 8)
	signal.Notify(sigc, forwarded...)
	defer signal.Stop(sigc)

	r := &runner{c: c, stderr: stderr, ttl: c.ttl, red: redactorFor(c.backend, env)}
	if c.verbose {
		r.obs.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}

	// Open the backend and acquire the key, abandoning both on a signal. --wait's
	// timeout bounds both: with --wait, opening is retried through an outage.
	type acquired struct {
		b     *backend
		lease distlock.Lease
		err   error
	}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan acquired, 1)
	go func() {
		wctx := actx
		if c.wait.timeout > 0 {
			var cancel context.CancelFunc
			wctx, cancel = context.WithTimeout(actx, c.wait.timeout)
			defer cancel()
		}
		b, err := r.open(wctx, env)
		if err != nil {
			done <- acquired{err: &openError{err}}
			return
		}
		if b.maxTTL > 0 && b.maxTTL < r.ttl {
			if c.verbose {
				r.logf("the backend caps the ttl at %v (%s)", b.maxTTL, b.maxTTLWhy)
			}
			r.ttl = b.maxTTL
		}
		lease, err := r.acquire(wctx, b.locker)
		done <- acquired{b: b, lease: lease, err: err}
	}()
	var a acquired
	select {
	case a = <-done:
		cancel()
	case sig := <-sigc:
		cancel()
		a = <-done
		if a.err == nil {
			r.unlock(a.b.locker, a.lease)
		}
		if a.b != nil {
			a.b.close()
		}
		fmt.Fprintf(stderr, "distlock run: got %v while acquiring %q; not running CMD\n", sig, c.key)
		return 128 + int(sig.(syscall.Signal))
	}
	if a.err != nil {
		if a.b != nil {
			a.b.close()
		}
		return r.acquireFailed(a.err)
	}
	defer a.b.close()
	return r.hold(ctx, a.b.locker, a.lease, path, stdin, stdout, env, sigc)
}

// A runner runs one CMD under one key.
type runner struct {
	c      *runConfig
	stderr io.Writer
	red    *redactor // every line on stderr goes through it
	obs    distlock.Observer
	ttl    time.Duration // the lease ttl: --ttl, or less if the backend caps it
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprint(r.stderr, r.red.text(fmt.Sprintf("distlock run: "+format, args...))+"\n")
}

// open opens the backend, each attempt bounded by opTimeout. Without --wait it
// makes one attempt. With --wait it tries again, with jittered backoff, until ctx
// (--wait's timeout) ends, unless the error is permanent: a server that is
// restarting or unreachable does not end the wait.
func (r *runner) open(ctx context.Context, env []string) (*backend, error) {
	var last string
	for attempt := 0; ; attempt++ {
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		b, err := openBackend(octx, r.c.backend, env, openOptions{owner: r.c.owner, ttl: r.c.ttl})
		cancel()
		if err == nil {
			if last != "" {
				r.logf("the backend answers again")
			}
			return b, nil
		}
		if !r.c.wait.on || permanent(err) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("the backend did not answer within --wait %v: %w", r.c.wait.timeout, err)
		}
		// The outage once; how its cause changes (refused, then "starting up")
		// only with -v.
		if msg := oneLine(err); msg != last && (last == "" || r.c.verbose) {
			r.logf("cannot open the backend: %s; still trying (--wait)", msg)
			last = msg
		}
		t := time.NewTimer(openBackoff(attempt))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("the backend did not answer within --wait %v: %w", r.c.wait.timeout, err)
		}
	}
}

// openBackoff returns the pause before attempt n+1 to open the backend: full
// jitter, 100ms doubling up to 2s.
func openBackoff(n int) time.Duration {
	ceil := 2 * time.Second
	if n < 5 {
		ceil = 100 * time.Millisecond << n
	}
	return time.Duration(rand.Int64N(int64(ceil))) + time.Millisecond
}

// acquire takes the key: one TryLock, or Lock (in rounds of at most opTimeout, so
// that a call that hangs is abandoned and retried) until --wait's timeout.
func (r *runner) acquire(ctx context.Context, l distlock.Locker) (distlock.Lease, error) {
	if !r.c.wait.on {
		tctx, cancel := context.WithTimeout(ctx, opTimeout)
		defer cancel()
		start := time.Now()
		lease, err := l.TryLock(tctx, r.c.key, r.ttl)
		if err == nil && r.obs.Logger != nil {
			r.obs.Logger.Debug("distlock acquire", "key", r.c.key, "fence", lease.Fence, "took", time.Since(start))
		}
		return lease, err
	}
	wctx := ctx // bounded by --wait's timeout already
	// One attempt first, to say at once why distlock waits: the key is held (with
	// -v), or the backend does not answer.
	tctx, cancel := context.WithTimeout(wctx, opTimeout)
	lease, err := l.TryLock(tctx, r.c.key, r.ttl)
	cancel()
	switch {
	case err == nil:
		if r.obs.Logger != nil {
			r.obs.Logger.Debug("distlock acquire", "key", r.c.key, "fence", lease.Fence)
		}
		return lease, nil
	case errors.Is(err, distlock.ErrInvalid) || wctx.Err() != nil || permanent(err):
		return lease, err
	case errors.Is(err, distlock.ErrLocked):
		if r.c.verbose {
			r.logf("%q is held by another owner; waiting", r.c.key)
		}
	}
	last := ""
	for {
		if err != nil && !errors.Is(err, distlock.ErrLocked) {
			// Once; each distinct error after it with -v (Lock ends each
			// round with its last attempt's error).
			if msg := oneLine(lastOf(err)); msg != last && (last == "" || r.c.verbose) {
				r.logf("waiting for %q: %s; still trying (--wait)", r.c.key, msg)
				last = msg
			}
		}
		rctx, cancel := context.WithTimeout(wctx, opTimeout)
		lease, err = distlock.Lock(rctx, l, r.c.key, r.ttl, &distlock.LockOptions{Observer: r.obs})
		cancel()
		if err == nil || wctx.Err() != nil || errors.Is(err, distlock.ErrInvalid) || permanent(err) {
			return lease, err
		}
	}
}

// lastOf returns the first error that err joins (Lock joins its last attempt's
// error with its context's), or err.
func lastOf(err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		if errs := j.Unwrap(); len(errs) > 0 {
			return errs[0]
		}
	}
	return err
}

// acquireFailed reports why the key was not acquired and returns the exit status.
func (r *runner) acquireFailed(err error) int {
	switch {
	case isUsage(err):
		r.logf("%s", oneLine(err))
		return exitUsage
	case errors.Is(err, distlock.ErrInvalid):
		r.logf("%s", oneLine(err))
		return exitUsage
	case errors.Is(err, distlock.ErrLocked):
		if r.c.wait.on {
			r.logf("%q is still held by another owner after waiting %v; not running CMD", r.c.key, r.c.wait.timeout)
		} else {
			r.logf("%q is held by another owner; not running CMD (use --wait to wait for it)", r.c.key)
		}
		return exitHeld
	}
	var oe *openError
	if errors.As(err, &oe) {
		r.logf("cannot open the backend: %s", oneLine(oe.err))
	} else {
		r.logf("cannot acquire %q: %s", r.c.key, oneLine(err))
	}
	return exitFailed
}

// An openError is a failure to open the backend.
type openError struct{ err error }

func (e *openError) Error() string { return e.err.Error() }
func (e *openError) Unwrap() error { return e.err }

// unlock releases lease with a fresh bounded context, reporting a failure.
func (r *runner) unlock(l distlock.Locker, lease distlock.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := l.Unlock(ctx, lease); err != nil {
		r.logf("release %q: %s (the lease lapses at its ttl)", lease.Key, oneLine(err))
	}
}
