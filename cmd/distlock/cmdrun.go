package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
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

// waitFlag is --wait (wait without limit) or --wait=TIMEOUT.
type waitFlag struct {
	on      bool
	timeout time.Duration // 0: no limit
}

func (w *waitFlag) IsBoolFlag() bool { return true }

func (w *waitFlag) String() string {
	switch {
	case w == nil || !w.on:
		return "false"
	case w.timeout > 0:
		return w.timeout.String()
	}
	return "true"
}

func (w *waitFlag) Set(s string) error {
	switch s {
	case "true":
		*w = waitFlag{on: true}
		return nil
	case "false":
		*w = waitFlag{}
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return fmt.Errorf("want --wait or --wait=DURATION (a positive duration such as 30s)")
	}
	*w = waitFlag{on: true, timeout: d}
	return nil
}

// runConfig is the parsed command line of run.
type runConfig struct {
	backend   string
	ttl       time.Duration
	wait      waitFlag
	minHold   time.Duration
	killAfter time.Duration
	owner     string
	verbose   bool
	key       string
	argv      []string
}

// parseRun parses run's arguments; the error is one line, for exit status 2.
func parseRun(args []string) (*runConfig, error) {
	c := &runConfig{}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.backend, "backend", "", "backend URL")
	fs.DurationVar(&c.ttl, "ttl", 30*time.Second, "lease ttl")
	fs.Var(&c.wait, "wait", "wait for the key")
	fs.DurationVar(&c.minHold, "min-hold", 0, "minimum hold")
	fs.DurationVar(&c.killAfter, "kill-after", 10*time.Second, "SIGKILL delay after loss")
	fs.StringVar(&c.owner, "owner", "", "owner label")
	fs.BoolVar(&c.verbose, "v", false, "verbose")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case c.ttl <= 0:
		return nil, fmt.Errorf("--ttl %v: must be positive", c.ttl)
	case c.minHold < 0:
		return nil, fmt.Errorf("--min-hold %v: must not be negative", c.minHold)
	case c.killAfter < 0:
		return nil, fmt.Errorf("--kill-after %v: must not be negative", c.killAfter)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return nil, errors.New("missing KEY and CMD: distlock run [flags] KEY -- CMD [ARGS...]")
	}
	c.key, rest = rest[0], rest[1:]
	if c.key == "" {
		return nil, errors.New("empty KEY")
	}
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}
	if len(rest) == 0 {
		return nil, fmt.Errorf("missing CMD after KEY %q: distlock run [flags] KEY -- CMD [ARGS...]", c.key)
	}
	c.argv = rest
	return c, nil
}

// cmdRun is "distlock run".
func cmdRun(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env []string) int {
	c, err := parseRun(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usageText)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "distlock run: %s\n", oneLine(err))
		return exitUsage
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

	r := &runner{c: c, stderr: stderr, ttl: c.ttl}
	if c.verbose {
		r.obs.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}

	// Open the backend and acquire the key, abandoning both on a signal.
	type acquired struct {
		b     *backend
		lease distlock.Lease
		err   error
	}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan acquired, 1)
	go func() {
		b, err := r.open(actx, env)
		if err != nil {
			done <- acquired{err: err}
			return
		}
		if b.maxTTL > 0 && b.maxTTL < r.ttl {
			if c.verbose {
				r.logf("the backend caps the ttl at %v (%s)", b.maxTTL, b.maxTTLWhy)
			}
			r.ttl = b.maxTTL
		}
		lease, err := r.acquire(actx, b.locker)
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
	obs    distlock.Observer
	ttl    time.Duration // the lease ttl: --ttl, or less if the backend caps it
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.stderr, "distlock run: "+format+"\n", args...)
}

// open opens the backend, bounded by opTimeout.
func (r *runner) open(ctx context.Context, env []string) (*backend, error) {
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return openBackend(octx, r.c.backend, env, openOptions{owner: r.c.owner, ttl: r.c.ttl})
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
	wctx := ctx
	if r.c.wait.timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, r.c.wait.timeout)
		defer cancel()
	}
	if r.c.verbose {
		// One attempt first, to say that the key is held before waiting for it.
		tctx, cancel := context.WithTimeout(wctx, opTimeout)
		lease, err := l.TryLock(tctx, r.c.key, r.ttl)
		cancel()
		switch {
		case err == nil:
			r.obs.Logger.Debug("distlock acquire", "key", r.c.key, "fence", lease.Fence)
			return lease, nil
		case errors.Is(err, distlock.ErrLocked):
			r.logf("%q is held by another owner; waiting", r.c.key)
		case errors.Is(err, distlock.ErrInvalid):
			return lease, err
		}
	}
	for {
		rctx, cancel := context.WithTimeout(wctx, opTimeout)
		lease, err := distlock.Lock(rctx, l, r.c.key, r.ttl, &distlock.LockOptions{Observer: r.obs})
		cancel()
		if err == nil || wctx.Err() != nil || errors.Is(err, distlock.ErrInvalid) {
			return lease, err
		}
		if !errors.Is(err, distlock.ErrLocked) {
			r.logf("waiting for %q: %s; still trying", r.c.key, oneLine(err))
		}
	}
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
	default:
		r.logf("cannot acquire %q: %s", r.c.key, oneLine(err))
		return exitFailed
	}
}

// unlock releases lease with a fresh bounded context, reporting a failure.
func (r *runner) unlock(l distlock.Locker, lease distlock.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := l.Unlock(ctx, lease); err != nil {
		r.logf("release %q: %s (the lease lapses at its ttl)", lease.Key, oneLine(err))
	}
}
