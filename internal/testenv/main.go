package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// Main runs a test binary with servers: call it from TestMain. It runs setup with a
// new Env; if setup fails (or panics) it prints the error to stderr, naming the
// install command `bash scripts/install.sh`, stops what setup started and exits with
// status 1, without running any test. Otherwise it runs the tests (m.Run), runs the
// Env's cleanups, stops every server, removes the temporary directories, checks with
// goleak that no goroutine started during the run is left (see Env.IgnoreLeaks), and
// exits with the tests' status (1 if they passed but cleanup or the leak check
// failed). Main does not return.
//
// On SIGINT or SIGTERM it stops the servers and exits with status 1. If the test
// binary dies otherwise (a panicking test, the -timeout panic), the kernel kills the
// server processes (PR_SET_PDEATHSIG).
func Main(m *testing.M, setup func(*Env) error) {
	os.Exit(run(m, setup))
}

func run(m *testing.M, setup func(*Env) error) (code int) {
	// The signal goroutines of the runtime are ignored by goleak by default; ours ends
	// before the leak check.
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigc)
	baseline := goleak.IgnoreCurrent()

	env, err := newEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	quit := make(chan struct{})
	handlerDone := make(chan struct{})
	go func() {
		defer close(handlerDone)
		select {
		case sig := <-sigc:
			fmt.Fprintf(os.Stderr, "testenv: got %v; stopping servers\n", sig)
			if err := env.close(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
			os.Exit(1)
		case <-quit:
		}
	}()
	stopHandler := func() {
		close(quit)
		<-handlerDone
	}
	defer func() {
		// Reached on a panic in m.Run's goroutine or after an early return.
		if err := env.close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()

	if err := runSetup(env, setup); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: setup failed: %v\n", err)
		if errors.Is(err, ErrNotInstalled) {
			fmt.Fprintln(os.Stderr, "testenv: a server binary is missing; install the servers with: bash scripts/install.sh")
		} else {
			fmt.Fprintln(os.Stderr, "testenv: (if a server is missing or too old, install the servers with: bash scripts/install.sh)")
		}
		stopHandler()
		return 1
	}

	code = m.Run()

	stopHandler()
	if err := env.close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	env.mu.Lock()
	opts := append([]goleak.Option{baseline}, env.leakOpts...)
	env.mu.Unlock()
	if err := goleak.Find(opts...); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: goroutines leaked by the tests: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// runSetup calls setup, turning a panic into an error.
func runSetup(env *Env, setup func(*Env) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	if setup == nil {
		return nil
	}
	return setup(env)
}
