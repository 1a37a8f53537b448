package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// echoSpec runs the test binary as an echo server on {port}, writing a marker file
// {dir}/started-N on each start.
func echoSpec(name string) ProcessSpec {
	return ProcessSpec{
		Name:  name,
		Bin:   os.Args[0],
		Args:  []string{"-test.run=^$"},
		Env:   []string{helperEnv + "={addr}", "TESTENV_HELPER_DIR={dir}"},
		Ready: echoReady,
	}
}

// runEchoServer answers each line with "echo: " + line, and "pid" with its pid.
func runEchoServer(addr string) int {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 3
	}
	fmt.Println("helper listening on", addr)
	for {
		c, err := l.Accept()
		if err != nil {
			return 4
		}
		go func() {
			defer c.Close()
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				line := sc.Text()
				if line == "pid" {
					line = fmt.Sprint(os.Getpid())
				}
				fmt.Fprintf(c, "echo: %s\n", line)
			}
		}()
	}
}

// echoCall sends line to the echo server at addr and returns its answer, bounded by
// ctx.
func echoCall(ctx context.Context, addr, line string) (string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := fmt.Fprintf(c, "%s\n", line); err != nil {
		return "", err
	}
	ans, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(ans, "\n"), nil
}

func echoReady(ctx context.Context, addr string) error {
	ans, err := echoCall(ctx, addr, "ready")
	if err != nil {
		return err
	}
	if ans != "echo: ready" {
		return fmt.Errorf("unexpected answer %q", ans)
	}
	return nil
}

func mustEcho(t *testing.T, s *Server, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := echoReady(ctx, s.Addr()); err != nil {
		t.Fatalf("%s does not answer within %v: %v", s, within, err)
	}
}

func TestEchoServerBasics(t *testing.T) {
	if !strings.HasPrefix(echoSrv.Addr(), "127.0.0.1:") {
		t.Fatalf("Addr %q is not on 127.0.0.1", echoSrv.Addr())
	}
	if echoSrv.External() {
		t.Fatal("External() = true for a started server")
	}
	if !strings.HasPrefix(echoSrv.Logs(), echoSrv.Dir) {
		t.Fatalf("Logs %q not in Dir %q", echoSrv.Logs(), echoSrv.Dir)
	}
	mustEcho(t, echoSrv, 5*time.Second)
	b, err := os.ReadFile(echoSrv.Logs())
	if err != nil || !strings.Contains(string(b), "helper listening on "+echoSrv.Addr()) {
		t.Fatalf("log %s: %q, %v", echoSrv.Logs(), b, err)
	}
}

func TestKillRestart(t *testing.T) {
	s := echoSrv
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pid1, err := echoCall(ctx, s.Addr(), "pid")
	if err != nil {
		t.Fatal(err)
	}
	s.Kill(t)
	if s.Running() {
		t.Fatal("Running() after Kill")
	}
	if err := DialReady(ctx, s.Addr()); err == nil {
		t.Fatal("killed server still accepts connections")
	}
	s.Kill(t) // killing a dead server does nothing
	s.Restart(t)
	pid2, err := echoCall(ctx, s.Addr(), "pid")
	if err != nil {
		t.Fatal(err)
	}
	if pid1 == pid2 {
		t.Fatalf("same pid %s after Restart", pid1)
	}
	if got := "echo: " + fmt.Sprint(s.Pid()); got != pid2 {
		t.Fatalf("Pid() = %s, server says %s", got, pid2)
	}
	// Restart of a running server stops it first.
	s.Restart(t)
	mustEcho(t, s, 5*time.Second)
}

func TestPauseResume(t *testing.T) {
	s := echoSrv
	s.Pause(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := echoCall(ctx, s.Addr(), "hello")
	cancel()
	if err == nil {
		t.Fatal("paused server answered")
	}
	s.Resume(t)
	mustEcho(t, s, 5*time.Second)
}

func TestPauseResumedByCleanup(t *testing.T) {
	s := echoSrv
	t.Run("pause", func(t *testing.T) {
		s.Pause(t) // not resumed: the cleanup must do it
	})
	mustEcho(t, s, 5*time.Second)
}

func TestStopAndStartAgain(t *testing.T) {
	s := echoSrv
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil { // idempotent
		t.Fatal(err)
	}
	if s.Running() || s.Pid() != 0 {
		t.Fatal("running after Stop")
	}
	s.Restart(t)
	mustEcho(t, s, 5*time.Second)
}

func TestExternalServerRefusesSignals(t *testing.T) {
	ext := (&Env{}).ExternalServer("ext", "127.0.0.1:1")
	for _, op := range []struct {
		name string
		f    func(testing.TB)
	}{{"Kill", ext.Kill}, {"Restart", ext.Restart}, {"Pause", ext.Pause}, {"Resume", ext.Resume}} {
		ft := &fatalRecorder{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			op.f(ft)
		}()
		<-done
		if !strings.Contains(ft.msg, "external server") {
			t.Errorf("%s on an external server: message %q", op.name, ft.msg)
		}
	}
	if err := ext.Stop(); err != nil {
		t.Fatal(err)
	}
	if !ext.External() || ext.Logs() != "" || ext.Port() != 1 {
		t.Fatalf("External %v Logs %q Port %d", ext.External(), ext.Logs(), ext.Port())
	}
}

// fatalRecorder records Fatalf instead of failing the test; Fatalf ends the calling
// goroutine, as testing's does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestStartFailureIncludesLog(t *testing.T) {
	env, err := newEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer env.close()
	_, err = env.StartProcess(ProcessSpec{
		Name: "failing",
		Bin:  "/bin/sh",
		Args: []string{"-c", "echo bad config on port {port}; exit 7"},
	})
	if !errors.Is(err, errExited) || !strings.Contains(err.Error(), "bad config on port") {
		t.Fatalf("err = %v; want an early-exit error with the log", err)
	}
	_, err = env.StartProcess(ProcessSpec{
		Name:         "silent",
		Bin:          "/bin/sleep",
		Args:         []string{"60"},
		ReadyTimeout: 300 * time.Millisecond,
	})
	if err == nil || !strings.Contains(err.Error(), "not ready within") {
		t.Fatalf("err = %v; want a timeout", err)
	}
	if err := env.close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(env.root); !os.IsNotExist(err) {
		t.Fatalf("temp dir %s still there: %v", env.root, err)
	}
}

func TestTemplatesAndPrepare(t *testing.T) {
	env, err := newEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer env.close()
	prepared := 0
	s, err := env.StartProcess(ProcessSpec{
		Name:  "tmpl",
		Bin:   "/bin/sh",
		Ports: 2,
		Args:  []string{"-c", `echo "$0 $1 $2 $3 $FOO" > args; exec sleep 60`, "{port}", "{port1}", "{addr}", "{dir}"},
		Env:   []string{"FOO={port0}"},
		Prepare: func(s *Server) error {
			prepared++
			return os.WriteFile(filepath.Join(s.Dir, "conf"), []byte(fmt.Sprint(s.Ports())), 0o644)
		},
		Ready: func(ctx context.Context, addr string) error {
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ps := s.Ports()
	if len(ps) != 2 || ps[0] == ps[1] || s.Port() != ps[0] {
		t.Fatalf("Ports() = %v, Port() = %d", ps, s.Port())
	}
	want := fmt.Sprintf("%d %d 127.0.0.1:%d %s %d\n", ps[0], ps[1], ps[0], s.Dir, ps[0])
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(s.Dir, "args"))
		if string(b) == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("args = %q, want %q", b, want)
		}
		time.Sleep(10 * time.Millisecond) // polling a file, bounded by the deadline
	}
	if prepared != 1 {
		t.Fatalf("Prepare ran %d times", prepared)
	}
	s.Restart(t)
	if prepared != 2 {
		t.Fatalf("Prepare ran %d times after Restart", prepared)
	}
}

func TestLookBin(t *testing.T) {
	if p, err := LookBin("sh"); err != nil || !filepath.IsAbs(p) {
		t.Fatalf("LookBin(sh) = %q, %v", p, err)
	}
	dir := t.TempDir()
	for _, v := range []string{"9", "17", "12"} {
		d := filepath.Join(dir, v, "bin")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "no-such-tool-xyz"), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p, err := LookBin("no-such-tool-xyz", "/nonexistent/*/bin", filepath.Join(dir, "*", "bin"))
	if want := filepath.Join(dir, "17", "bin", "no-such-tool-xyz"); err != nil || p != want {
		t.Fatalf("LookBin = %q, %v; want %q", p, err, want)
	}
	_, err = LookBin("no-such-tool-abc", "/nonexistent")
	if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "bash scripts/install.sh") {
		t.Fatalf("err = %v", err)
	}
}

func TestFreePorts(t *testing.T) {
	ps, err := FreePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ps {
		if p <= 0 || seen[p] {
			t.Fatalf("ports %v", ps)
		}
		seen[p] = true
	}
}
