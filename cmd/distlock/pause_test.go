//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// pauseTTL is the lease ttl of the pause tests: each run stops distlock for a
// little longer than this.
const pauseTTL = time.Second

// pauseRounds is how many times each pause case runs on each backend: the exit
// status must be the same every time, not a coin toss between CMD's exit and the
// lease's end.
const pauseRounds = 3

// Scripts for CMD: each prints "ready PID" first.
const (
	// readThenExit exits 7 once its stdin gives a line or ends.
	readThenExit = `echo "ready $$"; read x; exit 7`
	// runOn runs until SIGTERM. It waits in the shell, not in a vfork of sleep, so
	// that SIGSTOP finds it stopped rather than waiting in state D for a child that
	// was stopped before it could exec.
	runOn = `trap 'echo "got TERM"; kill $! 2>/dev/null; exit 0' TERM; echo "ready $$"; sleep 1000 & wait`
)

// A pausedRun is one distlock run that a test stops with SIGSTOP and resumes.
type pausedRun struct {
	t      *testing.T
	pid    int // distlock
	cmdPid int // CMD
	start  time.Time
	// stop and cont send SIGSTOP and SIGCONT (to distlock alone, or to its whole
	// process group); finish makes CMD's read return.
	stop, cont, finish func()
	// wait returns distlock's exit status and what it printed (stderr, or the
	// whole terminal).
	wait func() (int, string)
}

// startPaused starts distlock run --ttl pauseTTL with stdin a pipe (so CMD has a
// process group of its own) and returns it once CMD has started; stop and cont
// signal distlock alone.
func startPaused(t *testing.T, backend string, flags []string, script string) *pausedRun {
	t.Helper()
	env := baseEnv(t)
	p := startDL(t, env, runArgs(t, backend, flags, script)...)
	r := &pausedRun{t: t, pid: p.cmd.Process.Pid, start: p.start}
	r.stop = func() { p.signal(syscall.SIGSTOP) }
	r.cont = func() { p.signal(syscall.SIGCONT) }
	r.finish = p.closeStdin
	r.wait = func() (int, string) {
		code := p.wait()
		return code, p.stdout.String() + p.stderr.String()
	}
	t.Cleanup(func() { syscall.Kill(r.pid, syscall.SIGCONT) })
	timer := time.NewTimer(procTimeout)
	defer timer.Stop()
	for r.cmdPid == 0 {
		select {
		case line := <-p.lines:
			r.cmdPid = readyPid(t, line)
		case <-p.done:
			t.Fatalf("distlock exited %d before CMD started; stderr: %s", p.code, p.stderr.String())
		case <-timer.C:
			t.Fatalf("CMD did not start within %v; stderr: %s", procTimeout, p.stderr.String())
		}
	}
	return r
}

// startPausedInTerminal starts distlock as the foreground job of a new terminal,
// where CMD shares distlock's process group (as it does under an interactive
// shell), and returns it once CMD has started; stop and cont signal that whole
// process group, as ^Z, a frozen container or a paused machine stop both.
func startPausedInTerminal(t *testing.T, backend string, flags []string, script string) *pausedRun {
	t.Helper()
	master, slave := openPTY(t)
	cmd := exec.Command(bin, runArgs(t, backend, flags, script)...)
	cmd.Env = baseEnv(t)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	r := &pausedRun{t: t, start: time.Now()}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.pid = cmd.Process.Pid
	// Only distlock and CMD keep the terminal open now: once they have exited,
	// reading the master ends.
	slave.Close()
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	var mu sync.Mutex
	var out strings.Builder
	lines := make(chan string, 100)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		sc := bufio.NewScanner(master)
		for sc.Scan() {
			line := strings.TrimRight(sc.Text(), "\r")
			mu.Lock()
			out.WriteString(line + "\n")
			mu.Unlock()
			select {
			case lines <- line:
			default:
			}
		}
	}()
	output := func() string {
		mu.Lock()
		defer mu.Unlock()
		return out.String()
	}
	t.Cleanup(func() {
		syscall.Kill(-r.pid, syscall.SIGCONT)
		select {
		case <-exited:
		default:
			syscall.Kill(-r.pid, syscall.SIGKILL)
			<-exited
		}
		master.Close()
		<-readerDone
	})
	r.stop = func() { signalGroup(t, r.pid, syscall.SIGSTOP) }
	r.cont = func() { signalGroup(t, r.pid, syscall.SIGCONT) }
	r.finish = func() {
		if _, err := master.Write([]byte("go\n")); err != nil {
			t.Fatal(err)
		}
	}
	r.wait = func() (int, string) {
		timer := time.NewTimer(procTimeout)
		defer timer.Stop()
		select {
		case <-exited:
		case <-timer.C:
			t.Fatalf("distlock did not exit within %v; terminal:\n%s", procTimeout, output())
		}
		// All that distlock and CMD wrote is read once they have closed the
		// terminal.
		select {
		case <-readerDone:
		case <-timer.C:
			t.Fatalf("the terminal stayed open %v after distlock exited; terminal:\n%s", procTimeout, output())
		}
		return exitStatus(cmd.ProcessState, nil), output()
	}
	timer := time.NewTimer(procTimeout)
	defer timer.Stop()
	for r.cmdPid == 0 {
		select {
		case line := <-lines:
			if strings.HasPrefix(line, "ready ") {
				r.cmdPid = readyPid(t, line)
			}
		case <-exited:
			t.Fatalf("distlock exited before CMD started; terminal:\n%s", output())
		case <-timer.C:
			t.Fatalf("CMD did not start within %v; terminal:\n%s", procTimeout, output())
		}
	}
	return r
}

// runArgs are the arguments of a pause test's run: the key is the test's name.
func runArgs(t *testing.T, backend string, flags []string, script string) []string {
	args := []string{"run", "--ttl", pauseTTL.String()}
	if backend != "" {
		args = append(args, "--backend", backend)
	}
	args = append(args, flags...)
	return append(args, t.Name(), "--", "sh", "-c", script)
}

func readyPid(t *testing.T, line string) int {
	t.Helper()
	s, ok := strings.CutPrefix(line, "ready ")
	pid, err := strconv.Atoi(s)
	if !ok || err != nil {
		t.Fatalf("CMD printed %q, want ready PID", line)
	}
	return pid
}

func signalGroup(t *testing.T, pgid int, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(-pgid, sig); err != nil {
		t.Fatalf("signal %v to process group %d: %v", sig, pgid, err)
	}
}

// procStates returns the state letters of the threads of pid (R, S, T, Z, ...),
// or nil once pid is gone.
func procStates(pid int) []byte {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	var states []byte
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		// pid (comm) S ...: comm may hold spaces and parentheses.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
			states = append(states, b[i+2])
		}
	}
	return states
}

// stopped waits until every thread of pid is stopped, and returns the time then:
// every renewal distlock made began before it, so the lease ends before it plus
// the ttl.
func (r *pausedRun) stopped(pid int) time.Time {
	r.t.Helper()
	deadline := time.Now().Add(procTimeout)
	for {
		states := procStates(pid)
		stopped := len(states) > 0
		for _, s := range states {
			stopped = stopped && (s == 'T' || s == 't')
		}
		if stopped {
			break
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("process %d did not stop within %v: its threads are in states %q", pid, procTimeout, states)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Now()
}

// pastLease returns when the lease of distlock, stopped at stoppedAt, has ended
// for certain; sleepPastLease sleeps until then.
func pastLease(stoppedAt time.Time) time.Time { return stoppedAt.Add(pauseTTL) }

func sleepPastLease(stoppedAt time.Time) { time.Sleep(time.Until(pastLease(stoppedAt))) }

// cmdExited waits until CMD has exited (a zombie, or reaped) and returns the time
// then.
func (r *pausedRun) cmdExited() time.Time {
	r.t.Helper()
	waitFor(r.t, "CMD to exit", func() bool {
		states := procStates(r.cmdPid)
		return len(states) == 0 || states[0] == 'Z'
	})
	return time.Now()
}

// cmdReaped waits until distlock has reaped CMD (so it has seen the exit).
func (r *pausedRun) cmdReaped() {
	r.t.Helper()
	waitFor(r.t, "distlock to reap CMD", func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", r.cmdPid))
		return errors.Is(err, os.ErrNotExist)
	})
}

// expect waits for distlock's exit and checks its status and output.
func (r *pausedRun) expect(code int, want []string, unwanted []string) {
	r.t.Helper()
	got, out := r.wait()
	if got != code {
		r.t.Fatalf("distlock exited %d, want %d; output:\n%s", got, code, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			r.t.Fatalf("output lacks %q:\n%s", w, out)
		}
	}
	for _, u := range unwanted {
		if strings.Contains(out, u) {
			r.t.Fatalf("output has %q:\n%s", u, out)
		}
	}
}

const (
	mayHaveRun = "CMD may have run without the lease; exiting 124"
	lostLease  = "lost the lease on"
)

// TestPausedExitStatus stops distlock (alone, or with CMD in its terminal's
// process group) past its lease's end, and checks that the exit status says
// whether CMD exited inside the lease, the same way every time: CMD's status when
// distlock saw CMD exit before the lease ended, 124 when CMD ran on past the end,
// and 124 when CMD exited while distlock was stopped across the end (CMD may
// have run without the lease: distlock cannot tell).
func TestPausedExitStatus(t *testing.T) {
	backends := []struct{ name, url string }{
		{"sqlite-default", ""}, // the SQLite file in the user cache directory
		{"redis", backendURLs["redis"]},
	}
	cases := []struct {
		name     string
		terminal bool // stop the whole process group (distlock and CMD)
		flags    []string
		script   string
		run      func(r *pausedRun)
	}{{
		name:   "distlock stopped, CMD exits inside the lease",
		script: readThenExit,
		run: func(r *pausedRun) {
			r.stop()
			s := r.stopped(r.pid)
			r.finish()
			if e := r.cmdExited(); !e.Before(r.start.Add(pauseTTL)) {
				// The lease began after r.start, so it ends after r.start+ttl.
				r.t.Logf("CMD exited %v after distlock started: maybe after the lease ended", e.Sub(r.start))
			}
			sleepPastLease(s)
			r.cont()
			r.expect(exitLost, []string{"CMD exited (status 7)", mayHaveRun}, []string{lostLease})
		},
	}, {
		name:   "distlock stopped, CMD exits after the lease ended",
		script: readThenExit,
		run: func(r *pausedRun) {
			r.stop()
			sleepPastLease(r.stopped(r.pid))
			r.finish()
			r.cmdExited()
			r.cont()
			r.expect(exitLost, []string{"CMD exited (status 7)", mayHaveRun}, []string{lostLease})
		},
	}, {
		name:   "distlock stopped, CMD runs on",
		script: runOn,
		run: func(r *pausedRun) {
			r.stop()
			sleepPastLease(r.stopped(r.pid))
			r.cont()
			r.expect(exitLost, []string{"got TERM", lostLease, "CMD stopped (status 0)"}, []string{mayHaveRun})
		},
	}, {
		name:   "CMD exits inside the lease, then distlock is stopped",
		flags:  []string{"--min-hold", "1h"},
		script: readThenExit,
		run: func(r *pausedRun) {
			r.finish()
			r.cmdReaped()
			r.stop()
			sleepPastLease(r.stopped(r.pid))
			r.cont()
			r.expect(7, nil, []string{lostLease, mayHaveRun})
		},
	}, {
		name:     "process group stopped, CMD runs on",
		terminal: true,
		script:   runOn,
		run: func(r *pausedRun) {
			r.stop()
			s := r.stopped(r.pid)
			r.stopped(r.cmdPid)
			sleepPastLease(s)
			r.cont()
			r.expect(exitLost, []string{"got TERM", lostLease}, []string{mayHaveRun})
		},
	}, {
		name:     "process group stopped, CMD exits as it resumes",
		terminal: true,
		script:   readThenExit,
		run: func(r *pausedRun) {
			r.stop()
			s := r.stopped(r.pid)
			r.stopped(r.cmdPid)
			r.finish() // CMD reads it once it runs again
			sleepPastLease(s)
			r.cont()
			r.expect(exitLost, []string{"CMD ", "exiting 124"}, nil)
		},
	}, {
		name:     "CMD exits inside the lease, then the process group is stopped",
		terminal: true,
		flags:    []string{"--min-hold", "1h"},
		script:   readThenExit,
		run: func(r *pausedRun) {
			r.finish()
			r.cmdReaped()
			r.stop()
			sleepPastLease(r.stopped(r.pid))
			r.cont()
			r.expect(7, nil, []string{lostLease, mayHaveRun})
		},
	}}
	for _, b := range backends {
		for _, c := range cases {
			t.Run(b.name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				for i := range pauseRounds {
					t.Run(strconv.Itoa(i), func(t *testing.T) {
						start := startPaused
						if c.terminal {
							start = startPausedInTerminal
						}
						c.run(start(t, b.url, c.flags, c.script))
					})
				}
			})
		}
	}
}
