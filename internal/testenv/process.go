package testenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Defaults of ProcessSpec.
const (
	DefaultReadyTimeout = 30 * time.Second
	DefaultStopTimeout  = 5 * time.Second
)

// logTailLines is how many lines of a server's log an error about it includes.
const logTailLines = 30

// startAttempts is how often StartProcess (and Restart) starts a server whose process
// exits before it is ready: another process may have taken a port between FreePorts
// and the server's bind.
const startAttempts = 3

// ErrNotInstalled is wrapped by the errors of LookBin (and so of every Env method
// that needs a binary) when a server binary cannot be found.
var ErrNotInstalled = errors.New("not installed; install with: bash scripts/install.sh")

// errExited marks a server process that exited before it was ready.
var errExited = errors.New("exited before it was ready")

// A ProcessSpec describes a server process for Env.StartProcess.
//
// Args and Env are templates: before each start, every occurrence of
//
//	{port}   the first port (the port of Addr); same as {port0}
//	{port0}, {port1}, ...  the ports chosen for this server, in order (see Ports)
//	{addr}   127.0.0.1:{port}
//	{dir}    the server's directory (Dir)
//
// is replaced by its value. The ports stay the same across Restart.
type ProcessSpec struct {
	// Name names the server in messages; required.
	Name string
	// Bin is the executable; find it with LookBin. Required.
	Bin string
	// Args are the arguments (templates, see above).
	Args []string
	// Ports is how many free loopback ports to choose; zero means 1. The first is the
	// port of Server.Addr.
	Ports int
	// Dir is the server's data and working directory, which holds its log file. Empty
	// means a new directory under the Env's temporary directory. It is created if
	// missing.
	Dir string
	// Env holds extra environment variables ("KEY=value", templates) added to the
	// test binary's environment.
	Env []string
	// User, when not empty, runs the server as that user (the test binary must then
	// run as root or as that user); Dir and everything in it are chowned to it.
	// PostgreSQL, for one, refuses to run as root.
	User string
	// Prepare, if set, is called before every start (the first, each retry with new
	// ports, and each Restart) once the ports are chosen: write config files that name
	// s.Port(), s.Ports() or s.Dir here. It must be idempotent.
	Prepare func(s *Server) error
	// Ready reports whether the server at addr (127.0.0.1:port) answers; StartProcess
	// and Restart poll it with backoff until it returns nil, the process exits, or
	// ReadyTimeout passes. Each call gets a context bounded by the remaining time. Nil
	// means "accepts a TCP connection". Where it can, Ready should also check that the
	// server answering is this one (for example, that it reports this Dir): another
	// test binary may win the race for a free port, and then its server answers while
	// this one fails to bind. (Ready's success is ignored if the process has exited.)
	Ready func(ctx context.Context, addr string) error
	// ReadyTimeout bounds the wait for Ready; zero means DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// StopSignal is sent to the server's main process by Stop; zero means SIGTERM.
	// If the process has not exited StopTimeout later, its whole process group is
	// killed (SIGKILL).
	StopSignal syscall.Signal
	// StopTimeout: zero means DefaultStopTimeout.
	StopTimeout time.Duration
}

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

// Pause stops every process of the server's process group with SIGSTOP and returns
// once they are all stopped: the server then accepts TCP connections (the kernel
// does) but answers nothing. Resume continues it; if the test does not, a t.Cleanup
// registered by Pause does, so that the server can be stopped at the end. It fails t
// on an External or stopped server.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	s.mustOwn(t, "Pause")
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	if p == nil || p.exited() {
		t.Fatalf("testenv: pause %s: the server is not running", s)
	}
	if s.paused {
		return
	}
	if err := syscall.Kill(-p.pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("testenv: pause %s: SIGSTOP process group %d: %v", s, p.pid, err)
	}
	s.paused = true
	t.Cleanup(func() {
		if err := s.resume(); err != nil {
			t.Errorf("testenv: resume %s after the test: %v", s, err)
		}
	})
	if err := waitGroupStopped(p.pid, 10*time.Second); err != nil {
		t.Fatalf("testenv: pause %s: %v", s, err)
	}
}

// Resume continues a server stopped by Pause (SIGCONT to its process group). Resuming
// a server that is not paused does nothing. It fails t on an External server.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	s.mustOwn(t, "Resume")
	if err := s.resume(); err != nil {
		t.Fatalf("testenv: resume %s: %v", s, err)
	}
}

func (s *Server) resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resumeLocked()
}

func (s *Server) resumeLocked() error {
	if !s.paused {
		return nil
	}
	s.paused = false
	if s.proc == nil {
		return nil
	}
	if err := syscall.Kill(-s.proc.pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("SIGCONT process group %d: %w", s.proc.pid, err)
	}
	return nil
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

// startLocked starts the server's process with its current ports and waits until it
// is ready. On failure the process is killed.
func (s *Server) startLocked() error {
	s.expand()
	if s.spec.Prepare != nil {
		if err := s.spec.Prepare(s); err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		if err := s.chown(); err != nil {
			return err
		}
	}
	p, err := s.launch()
	if err != nil {
		return err
	}
	s.proc = p
	if err := s.waitReady(p); err != nil {
		s.proc = nil
		return errors.Join(err, killGroup(p))
	}
	return nil
}

// expand sets the template replacer for the current ports.
func (s *Server) expand() {
	r := []string{"{port}", strconv.Itoa(s.ports[0]), "{addr}", s.addr, "{dir}", s.Dir}
	for i, p := range s.ports {
		r = append(r, "{port"+strconv.Itoa(i)+"}", strconv.Itoa(p))
	}
	// Longest placeholders first is not needed: "{port}" never prefixes "{port1}"
	// because of the closing brace.
	s.expander = strings.NewReplacer(r...)
}

func (s *Server) launch() (*proc, error) {
	args := make([]string, len(s.spec.Args))
	for i, a := range s.spec.Args {
		args[i] = s.expander.Replace(a)
	}
	env := os.Environ()
	for _, e := range s.spec.Env {
		env = append(env, s.expander.Replace(e))
	}
	logf, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "=== testenv %s: %s %s\n", time.Now().Format(time.RFC3339Nano), s.spec.Bin, strings.Join(args, " "))
	cmd := exec.Command(s.spec.Bin, args...)
	cmd.Dir = s.Dir
	cmd.Env = env
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = withDeathSignal(&syscall.SysProcAttr{ // no orphans if the test binary dies
		Setpgid:    true, // signals reach the whole server, not the test binary
		Credential: s.cred,
	})
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.spec.Bin, err)
	}
	p := &proc{cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// waitReady polls Ready with backoff until it succeeds, p exits or the timeout passes.
func (s *Server) waitReady(p *proc) error {
	ready := s.spec.Ready
	if ready == nil {
		ready = DialReady
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.spec.ReadyTimeout)
	defer cancel()
	delay := 5 * time.Millisecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	var last error
	for {
		select {
		case <-p.done:
			return fmt.Errorf("%s %w (%v); last lines of %s:\n%s", s.Name, errExited, p.err, s.logPath, tailFile(s.logPath, logTailLines))
		case <-ctx.Done():
			return fmt.Errorf("%s was not ready within %v (last check: %v); last lines of %s:\n%s", s.Name, s.spec.ReadyTimeout, last, s.logPath, tailFile(s.logPath, logTailLines))
		case <-timer.C:
		}
		if last = ready(ctx, s.addr); last == nil {
			if p.exited() {
				// Something else answered on our port.
				continue
			}
			return nil
		}
		timer.Reset(delay)
		delay = min(delay*2, 250*time.Millisecond)
	}
}

// DialReady is the default ProcessSpec.Ready: it succeeds once addr accepts a TCP
// connection.
func DialReady(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// StartProcess starts the server described by spec on free loopback ports and returns
// once spec.Ready reports it ready. The Env stops it when the tests end. If the
// process exits before it is ready (for example because another process took its
// port), StartProcess tries again with new ports, three times in all. Errors name
// the server and include the last lines of its log.
func (e *Env) StartProcess(spec ProcessSpec) (*Server, error) {
	if spec.Name == "" || spec.Bin == "" {
		return nil, fmt.Errorf("testenv: StartProcess: Name and Bin are required (got Name %q, Bin %q)", spec.Name, spec.Bin)
	}
	if spec.Ports == 0 {
		spec.Ports = 1
	}
	if spec.Ports < 0 {
		return nil, fmt.Errorf("testenv: StartProcess %s: Ports %d is negative", spec.Name, spec.Ports)
	}
	if spec.ReadyTimeout <= 0 {
		spec.ReadyTimeout = DefaultReadyTimeout
	}
	if spec.StopSignal == 0 {
		spec.StopSignal = syscall.SIGTERM
	}
	if spec.StopTimeout <= 0 {
		spec.StopTimeout = DefaultStopTimeout
	}
	spec.Args = append([]string(nil), spec.Args...)
	spec.Env = append([]string(nil), spec.Env...)
	s := &Server{Name: spec.Name, Dir: spec.Dir, env: e, spec: spec}
	if s.Dir == "" {
		d, err := e.tempDir(spec.Name)
		if err != nil {
			return nil, err
		}
		s.Dir = d
	} else {
		d, err := filepath.Abs(s.Dir)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		s.Dir = d
	}
	s.logPath = filepath.Join(s.Dir, sanitize(spec.Name)+".log")
	if spec.User != "" {
		cred, err := credentialFor(spec.User)
		if err != nil {
			return nil, fmt.Errorf("testenv: StartProcess %s: %w", spec.Name, err)
		}
		s.cred = cred
	}
	if err := s.chown(); err != nil {
		return nil, err
	}
	if err := e.register(s); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	for range startAttempts {
		ports, perr := FreePorts(spec.Ports)
		if perr != nil {
			return nil, perr
		}
		s.ports = ports
		s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
		if err = s.startLocked(); err == nil {
			return s, nil
		}
		if !errors.Is(err, errExited) {
			break
		}
	}
	return nil, fmt.Errorf("testenv: start %s: %w", spec.Name, err)
}

// chown gives s.Dir and everything in it to the server's user, if it has one.
func (s *Server) chown() error {
	if s.cred == nil {
		return nil
	}
	uid, gid := int(s.cred.Uid), int(s.cred.Gid)
	return filepath.WalkDir(s.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
}

// credentialFor returns the credential to run a process as the named user, or nil
// when the test binary already runs as that user.
func credentialFor(name string) (*syscall.Credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("look up user %q: %w", name, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %q has uid %q: %w", name, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %q has gid %q: %w", name, u.Gid, err)
	}
	if int(uid) == os.Geteuid() {
		return nil, nil
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("running a server as user %q needs root (the tests run as uid %d)", name, os.Geteuid())
	}
	var groups []uint32
	if ids, err := u.GroupIds(); err == nil {
		for _, id := range ids {
			if g, err := strconv.ParseUint(id, 10, 32); err == nil {
				groups = append(groups, uint32(g))
			}
		}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}, nil
}

// RunCommand runs bin with args in dir (empty: the current directory) as the named
// user (empty: the current user) and returns its combined output. The error includes
// the output. Use it for one-shot tools such as initdb or redis-cli; ctx bounds it.
func RunCommand(ctx context.Context, userName, dir, bin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.SysProcAttr = withDeathSignal(&syscall.SysProcAttr{})
	if userName != "" {
		cred, err := credentialFor(userName)
		if err != nil {
			return nil, fmt.Errorf("testenv: run %s: %w", bin, err)
		}
		cmd.SysProcAttr.Credential = cred
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("testenv: %s %s: %w; output:\n%s", bin, strings.Join(args, " "), err, lastLines(out.Bytes(), logTailLines))
	}
	return out.Bytes(), nil
}

// LookBin finds the executable (or file) name: first in PATH, then in each
// candidate, which is an absolute path or a filepath.Glob pattern naming either a
// directory that holds name (/usr/lib/postgresql/*/bin) or a file itself
// (/usr/share/zookeeper/lib/zookeeper-*.jar). When a pattern matches several paths,
// the highest version wins (/usr/lib/postgresql/17 before /usr/lib/postgresql/9).
// The error wraps ErrNotInstalled and names what was searched.
func LookBin(name string, candidates ...string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs, nil
		}
		return p, nil
	}
	for _, c := range candidates {
		matches, _ := filepath.Glob(c)
		sort.Slice(matches, func(i, j int) bool { return versionLess(matches[j], matches[i]) })
		for _, m := range matches {
			fi, err := os.Stat(m)
			if err != nil {
				continue
			}
			if fi.IsDir() {
				p := filepath.Join(m, name)
				if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
					return p, nil
				}
				continue
			}
			if fi.Mode().IsRegular() {
				return m, nil
			}
		}
	}
	where := "PATH"
	if len(candidates) > 0 {
		where += ", " + strings.Join(candidates, ", ")
	}
	return "", fmt.Errorf("testenv: %s not found (searched %s): %w", name, where, ErrNotInstalled)
}

// versionLess compares a and b as strings whose runs of digits compare as numbers.
func versionLess(a, b string) bool {
	for a != "" && b != "" {
		ca, ra := chunk(a)
		cb, rb := chunk(b)
		if ca != cb {
			na, ea := strconv.ParseUint(ca, 10, 64)
			nb, eb := strconv.ParseUint(cb, 10, 64)
			if ea == nil && eb == nil {
				return na < nb
			}
			return ca < cb
		}
		a, b = ra, rb
	}
	return len(a) < len(b)
}

// chunk splits s into its leading run of digits or of non-digits, and the rest.
func chunk(s string) (string, string) {
	digit := s[0] >= '0' && s[0] <= '9'
	i := 1
	for i < len(s) && (s[i] >= '0' && s[i] <= '9') == digit {
		i++
	}
	return s[:i], s[i:]
}

// sanitize makes name usable as a file name.
func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == 0 || r == ' ' {
			return '_'
		}
		return r
	}, name)
}

// tailFile returns the last n lines of the file at path, or a note why it cannot.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	return lastLines(b, n)
}

func lastLines(b []byte, n int) string {
	b = bytes.TrimRight(b, "\n")
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return "\t" + strings.Join(lines, "\n\t")
}

// waitGroupStopped waits until every thread of every process in process group pgid
// is stopped (or dead), so that a paused server has certainly stopped answering.
func waitGroupStopped(pgid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	delay := time.Millisecond
	for {
		running, err := groupRunning(pgid)
		if err != nil || running == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d threads of process group %d still running %v after SIGSTOP", running, pgid, timeout)
		}
		time.Sleep(delay) // polling /proc; bounded by the deadline
		delay = min(delay*2, 20*time.Millisecond)
	}
}

// groupRunning counts the threads of process group pgid that are not stopped.
func groupRunning(pgid int) (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("read /proc: %w", err)
	}
	running := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		_, pg, ok := procStat(fmt.Sprintf("/proc/%d/stat", pid))
		if !ok || pg != pgid {
			continue
		}
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			continue // exited meanwhile
		}
		for _, t := range tasks {
			state, _, ok := procStat(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
			if ok && state != 'T' && state != 't' && state != 'Z' && state != 'X' {
				running++
			}
		}
	}
	return running, nil
}

// procStat reads the state and process group from a /proc stat file.
func procStat(path string) (state byte, pgrp int, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid pgrp ...; comm may contain spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return 0, 0, false
	}
	pg, err := strconv.Atoi(f[2])
	if err != nil || len(f[0]) != 1 {
		return 0, 0, false
	}
	return f[0][0], pg, true
}
