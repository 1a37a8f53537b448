//go:build unix

package main

import (
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// runUnsupported is empty: run can stop CMD and its children (SIGTERM, then
// SIGKILL, to its process group) when the lease is lost.
const runUnsupported = ""

// A child is CMD, started by run.
//
// When distlock runs in the foreground of a terminal, CMD stays in distlock's
// process group, so that it can read the terminal and the keys that the terminal
// turns into signals (^C, ^\, ^Z) reach it directly. Otherwise (a script, cron,
// systemd, a background job) CMD gets a process group of its own, and every signal
// for CMD goes to that whole group, so that the children of a shell script stop too.
type child struct {
	cmd      *exec.Cmd
	ownGroup bool
	exit     exitWatch

	// done is closed once CMD has exited and been reaped; then seen is the time
	// at which its exit was first seen (before reaping it), and err is what
	// cmd.Wait returned.
	done chan struct{}
	seen time.Time
	err  error
}

// startChild starts path with argv.
func startChild(path string, argv []string, stdin io.Reader, stdout, stderr io.Writer, env []string) (*child, error) {
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Stdin: stdin, Stdout: stdout, Stderr: stderr}
	c := &child{cmd: cmd, ownGroup: !inTerminalForeground(stdin)}
	if c.ownGroup {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c.exit = watchExit(cmd.Process.Pid)
	c.done = make(chan struct{})
	go c.reap()
	return c, nil
}

// reap waits for CMD to exit, notes when it saw the exit, and reaps CMD.
func (c *child) reap() {
	seen, ok := c.exit.wait()
	c.err = c.cmd.Wait()
	if !ok {
		seen = time.Now()
	}
	c.seen = seen
	close(c.done)
}

// running reports whether CMD has not exited yet (true when it cannot tell).
// It does not reap CMD.
func (c *child) running() bool { return c.exit.running() }

// close releases what watches CMD; call it after done is closed.
func (c *child) close() { c.exit.close() }

// inTerminalForeground reports whether stdin is a terminal whose foreground process
// group is distlock's.
func inTerminalForeground(stdin io.Reader) bool {
	f, ok := stdin.(*os.File)
	if !ok || f == nil {
		return false
	}
	pgrp, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	if err != nil {
		return false
	}
	own, err := unix.Getpgid(0)
	return err == nil && pgrp == own
}

// signal sends sig to CMD: to its process group when it has its own.
func (c *child) signal(sig syscall.Signal) {
	pid := c.cmd.Process.Pid
	if c.ownGroup {
		pid = -pid
	}
	_ = syscall.Kill(pid, sig) // ESRCH: it has exited already
}

// forward passes on a signal that distlock received. In a terminal's foreground,
// SIGINT and SIGHUP come from the terminal, which sends them to CMD too: they are
// not sent twice.
func (c *child) forward(sig syscall.Signal) {
	if !c.ownGroup && (sig == syscall.SIGINT || sig == syscall.SIGHUP) {
		return
	}
	c.signal(sig)
}
