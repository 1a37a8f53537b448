package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A Server is one server process started by Env.StartProcess (or by a server-specific
// Env method), or an External server at an address given by an environment variable.
// Its methods are safe for concurrent use.
type Server struct {
	// Name names the server in messages.
	Name string
	// Dir is the server's data and working directory; empty for an External server.
	Dir string

	env      *Env
	spec     ProcessSpec
	external bool
	addr     string
	ports    []int
	logPath  string
	cred     *syscall.Credential
	expander *strings.Replacer // fills the templates of spec.Args and spec.Env

	mu     sync.Mutex // serialises starts, stops and signals
	proc   *proc      // the current process; nil when stopped
	paused bool
}

// proc is one run of a server's process.
type proc struct {
	cmd  *exec.Cmd
	pid  int // also the process group id (Setpgid)
	done chan struct{}
	err  error // the result of cmd.Wait, set before done is closed
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Addr returns the server's address, 127.0.0.1:port (for an External server, the
// address it was given).
func (s *Server) Addr() string { return s.addr }

// Port returns the port of Addr; 0 for an External server whose address has none.
func (s *Server) Port() int {
	if len(s.ports) > 0 {
		return s.ports[0]
	}
	_, p, err := net.SplitHostPort(s.addr)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(p)
	return n
}

// Ports returns all ports chosen for the server (ProcessSpec.Ports of them); nil for
// an External server.
func (s *Server) Ports() []int { return append([]int(nil), s.ports...) }

// External reports whether the server was not started by testenv but given by an
// environment variable. Kill, Restart and Pause fail the test on such a server.
func (s *Server) External() bool { return s.external }

// Logs returns the path of the server's log file (its stdout and stderr, appended
// across restarts); empty for an External server.
func (s *Server) Logs() string { return s.logPath }

// Pid returns the process id of the server's main process, or 0 when it is not
// running (or External).
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.exited() {
		return 0
	}
	return s.proc.pid
}

// Running reports whether the server's process is running (stopped by Pause counts
// as running). Always true for an External server.
func (s *Server) Running() bool {
	if s.external {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && !s.proc.exited()
}

func (s *Server) String() string {
	if s.external {
		return fmt.Sprintf("%s (external, %s)", s.Name, s.addr)
	}
	return fmt.Sprintf("%s (%s)", s.Name, s.addr)
}

func (s *Server) mustOwn(t testing.TB, op string) {
	t.Helper()
	if s.external {
		t.Fatalf("testenv: %s: cannot %s an external server (it came from an environment variable, so testenv did not start it and cannot signal it); unset the variable to let testenv start its own", s, op)
	}
}

// Kill kills the server's process group with SIGKILL, as a crash would, and returns
// once the main process has exited. The data directory is kept; Restart starts the
// server again. Killing a stopped server does nothing. It fails t on an External
// server or when the process does not die.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	s.mustOwn(t, "Kill")
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.killLocked(); err != nil {
		t.Fatalf("testenv: kill %s: %v", s, err)
	}
}

func (s *Server) killLocked() error {
	p := s.proc
	if p == nil {
		return nil
	}
	s.proc, s.paused = nil, false
	return killGroup(p)
}

// killGroup SIGKILLs p's process group and waits until p's main process has exited.
func killGroup(p *proc) error {
	if err := syscall.Kill(-p.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill process group %d: %w", p.pid, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("process %d did not exit within 10s of SIGKILL", p.pid)
	}
}

// Restart starts the server again on the same ports, in the same directory, with
// the same arguments, and returns once it is ready (ProcessSpec.Ready). If the server
// is running it is stopped first, gracefully (as Stop). It fails t on an External
// server or when the server does not become ready; the message includes the end of
// its log.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.mustOwn(t, "Restart")
	if err := s.restart(); err != nil {
		t.Fatalf("testenv: restart %s: %v", s, err)
	}
}

func (s *Server) restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.stopLocked(); err != nil {
		return err
	}
	var err error
	for range startAttempts {
		if err = s.startLocked(); err == nil || !errors.Is(err, errExited) {
			return err
		}
	}
	return err
}

// Stop stops the server gracefully: it resumes it if paused, sends
// ProcessSpec.StopSignal to its main process, waits up to StopTimeout, then kills its
// whole process group. Stopping a stopped or External server does nothing. The Env
// stops every server it started when the tests end; Stop is for tests that need it
// earlier. Restart starts a stopped server again.
func (s *Server) Stop() error {
	if s.external {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopLocked()
}

func (s *Server) stopLocked() error {
	p := s.proc
	if p == nil {
		return nil
	}
	if err := s.resumeLocked(); err != nil {
		return err
	}
	s.proc = nil
	if !p.exited() {
		if err := p.cmd.Process.Signal(s.spec.StopSignal); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return errors.Join(fmt.Errorf("signal %v: %w", s.spec.StopSignal, err), killGroup(p))
		}
		select {
		case <-p.done:
		case <-time.After(s.spec.StopTimeout):
			fmt.Fprintf(os.Stderr, "testenv: %s did not stop within %v of %v; killing it\n", s, s.spec.StopTimeout, s.spec.StopSignal)
		}
	}
	// Also kill what is left of the group (children the main process did not reap).
	return killGroup(p)
}
