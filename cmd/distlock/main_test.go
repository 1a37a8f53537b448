package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock/internal/testenv"
)

// bin is the distlock binary under test, built by TestMain.
var bin string

// procTimeout bounds every distlock process a test runs.
const procTimeout = 90 * time.Second

// envTestBin, when set, names a distlock binary for the tests to run instead of
// building this package: a build of an older commit, to show that a new test
// fails on the code as it was.
const envTestBin = "DISTLOCK_TEST_BIN"

func TestMain(m *testing.M) {
	testenv.Main(m, func(env *testenv.Env) error {
		var err error
		if bin = os.Getenv(envTestBin); bin == "" {
			if bin, err = buildBinary(env.TempDir()); err != nil {
				return err
			}
		}
		return startServers(env)
	})
}

// buildBinary builds this package into dir (with -race when the tests run with it).
func buildBinary(dir string) (string, error) {
	gotool, err := goTool()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "distlock")
	args := []string{"build", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, ".")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, gotool, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out, nil
}

// goTool is the go command on PATH: go test puts its own GOROOT/bin first there.
func goTool() (string, error) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go command is not on PATH: %w", err)
	}
	return gotool, nil
}

// baseEnv is the process environment without DISTLOCK_* variables, with the user
// cache directory in a temporary directory of t (so the default SQLite file is the
// test's own).
func baseEnv(t *testing.T) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DISTLOCK_") && !strings.HasPrefix(kv, "XDG_CACHE_HOME=") {
			env = append(env, kv)
		}
	}
	return append(env, "XDG_CACHE_HOME="+t.TempDir())
}

// sqliteURL returns the URL of a fresh SQLite database file for t.
func sqliteURL(t *testing.T) string {
	return "sqlite://" + filepath.Join(t.TempDir(), "locks.db")
}

// A dlProc is one running distlock process.
type dlProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	lines  chan string // lines of stdout
	stdout syncBuffer
	stderr syncBuffer
	stdin  io.WriteCloser
	done   chan struct{}
	code   int
	start  time.Time
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startDL starts distlock with args and env; its stdin is a pipe (Close it with
// closeStdin).
func startDL(t *testing.T, env []string, args ...string) *dlProc {
	t.Helper()
	p := &dlProc{t: t, lines: make(chan string, 1000), done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env
	p.cmd.Stdout = &lineWriter{p: p}
	p.cmd.Stderr = &p.stderr
	// If distlock dies and leaves CMD behind holding its stdout, Wait returns anyway.
	p.cmd.WaitDelay = 5 * time.Second
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		p.code = exitStatus(p.cmd.ProcessState, err)
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
			return
		default:
		}
		// SIGTERM first: distlock forwards it to CMD's process group.
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// A lineWriter is distlock's stdout: it keeps the output and sends each line to
// p.lines.
type lineWriter struct {
	p       *dlProc
	partial []byte
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.p.stdout.Write(b)
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		select {
		case w.p.lines <- string(w.partial[:i]):
		default: // nobody is reading that many lines
		}
		w.partial = w.partial[i+1:]
	}
	return len(b), nil
}

// waitLine waits until distlock's stdout has printed want as a whole line.
func (p *dlProc) waitLine(want string) {
	p.t.Helper()
	timer := time.NewTimer(procTimeout)
	defer timer.Stop()
	for {
		select {
		case line := <-p.lines:
			if line == want {
				return
			}
		case <-p.done:
			// Drain what was printed before the exit.
			for {
				select {
				case line := <-p.lines:
					if line == want {
						return
					}
				default:
					p.t.Fatalf("distlock %v exited (%d) before printing %q; stdout:\n%s\nstderr:\n%s", p.cmd.Args[1:], p.code, want, p.stdout.String(), p.stderr.String())
				}
			}
		case <-timer.C:
			p.t.Fatalf("distlock %v did not print %q within %v; stdout:\n%s\nstderr:\n%s", p.cmd.Args[1:], want, procTimeout, p.stdout.String(), p.stderr.String())
		}
	}
}

// waitStderr waits until distlock's stderr contains want.
func (p *dlProc) waitStderr(want string) {
	p.t.Helper()
	waitFor(p.t, fmt.Sprintf("distlock %v to print %q to stderr", p.cmd.Args[1:], want), func() bool {
		return strings.Contains(p.stderr.String(), want)
	})
}

// wait waits for distlock to exit and returns its status.
func (p *dlProc) wait() int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(procTimeout):
		p.cmd.Process.Kill()
		<-p.done
		p.t.Fatalf("distlock %v did not exit within %v; stdout:\n%s\nstderr:\n%s", p.cmd.Args[1:], procTimeout, p.stdout.String(), p.stderr.String())
		return -1
	}
}

// expect waits for exit and checks the status.
func (p *dlProc) expect(code int) {
	p.t.Helper()
	if got := p.wait(); got != code {
		p.t.Fatalf("distlock %v exited %d, want %d; stdout:\n%s\nstderr:\n%s", p.cmd.Args[1:], got, code, p.stdout.String(), p.stderr.String())
	}
}

func (p *dlProc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v: %v", sig, err)
	}
}

func (p *dlProc) closeStdin() {
	p.t.Helper()
	if err := p.stdin.Close(); err != nil {
		p.t.Fatal(err)
	}
}

// runDL runs distlock to completion and returns its status, stdout and stderr.
func runDL(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	p := startDL(t, env, args...)
	p.closeStdin()
	code := p.wait()
	return code, p.stdout.String(), p.stderr.String()
}

// waitFor polls cond every 20ms until it holds, failing t after procTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(procTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", procTimeout, what)
		}
		<-tick.C
	}
}
