package testenv

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
