package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"go.uber.org/goleak"
)

// An Env holds the servers and temporary directories of one test binary. Main
// creates it and hands it to the setup function; when the tests end, Main runs the
// functions registered with Cleanup, stops every server, and removes the temporary
// directory. Its methods are safe for concurrent use.
type Env struct {
	root string // temporary directory holding every server's directory

	mu       sync.Mutex
	closed   bool
	servers  []*Server
	cleanups []func()
	leakOpts []goleak.Option
	seq      int
}

// newEnv creates an Env with a fresh temporary directory.
func newEnv() (*Env, error) {
	root, err := os.MkdirTemp("", "distlock-testenv-")
	if err != nil {
		return nil, fmt.Errorf("testenv: create temporary directory: %w", err)
	}
	// Servers may run as another user (PostgreSQL): let them reach their directories.
	if err := os.Chmod(root, 0o755); err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	return &Env{root: root}, nil
}

// TempDir returns a new, empty directory under the Env's temporary directory, which
// is removed when the tests end. It panics if the directory cannot be created (Main
// reports a panic in setup as a setup error).
func (e *Env) TempDir() string {
	d, err := e.tempDir("tmp")
	if err != nil {
		panic(err)
	}
	return d
}

func (e *Env) tempDir(prefix string) (string, error) {
	e.mu.Lock()
	e.seq++
	n := e.seq
	e.mu.Unlock()
	d := filepath.Join(e.root, fmt.Sprintf("%s-%d", sanitize(prefix), n))
	if err := os.Mkdir(d, 0o755); err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	return d, nil
}

// Cleanup registers f to run when the tests end, before the servers are stopped;
// functions run in the reverse order of registration. Use it to close clients that
// setup created (for example, one used to create a database), so that their
// goroutines are gone before the leak check.
func (e *Env) Cleanup(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cleanups = append(e.cleanups, f)
}

// IgnoreLeaks adds goleak options for the leak check that Main runs after the tests.
// Ignore only goroutines of client libraries that cannot be stopped, by function
// name (goleak.IgnoreTopFunction or goleak.IgnoreAnyFunction), with a comment why.
func (e *Env) IgnoreLeaks(opts ...goleak.Option) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.leakOpts = append(e.leakOpts, opts...)
}

// ExternalServer returns an External server named name at addr: one that testenv did
// not start (it came from an environment variable such as DISTLOCK_REDIS_ADDR).
// Kill, Restart and Pause fail the test on it; Stop does nothing.
func (e *Env) ExternalServer(name, addr string) *Server {
	return &Server{Name: name, env: e, external: true, addr: addr}
}

// register adds s to the servers that close stops.
func (e *Env) register(s *Server) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return fmt.Errorf("testenv: start %s: the Env is closed", s.Name)
	}
	e.servers = append(e.servers, s)
	return nil
}

// Servers returns the servers the Env started, in start order.
func (e *Env) Servers() []*Server {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*Server(nil), e.servers...)
}

// close runs the cleanups, stops every server (concurrently) and removes the
// temporary directory unless DISTLOCK_TESTENV_KEEP is set. It may be called more
// than once; later calls do nothing.
func (e *Env) close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	cleanups, servers := e.cleanups, e.servers
	e.cleanups, e.servers = nil, nil
	e.mu.Unlock()

	var errs []error
	for i := len(cleanups) - 1; i >= 0; i-- {
		if err := runCleanup(cleanups[i]); err != nil {
			errs = append(errs, err)
		}
	}
	stopErrs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() {
			if err := s.Stop(); err != nil {
				stopErrs[i] = fmt.Errorf("testenv: stop %s: %w", s, err)
			}
		})
	}
	wg.Wait()
	errs = append(errs, stopErrs...)
	if os.Getenv("DISTLOCK_TESTENV_KEEP") != "" {
		fmt.Fprintf(os.Stderr, "testenv: DISTLOCK_TESTENV_KEEP is set; kept %s\n", e.root)
	} else if err := os.RemoveAll(e.root); err != nil {
		errs = append(errs, fmt.Errorf("testenv: remove %s: %w", e.root, err))
	}
	return errors.Join(errs...)
}

func runCleanup(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("testenv: panic in an Env.Cleanup function: %v", r)
		}
	}()
	f()
	return nil
}
