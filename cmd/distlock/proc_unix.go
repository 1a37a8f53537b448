//go:build unix

package main

import (
	"io"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

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
	return c, nil
}

// inTerminalForeground reports whether stdin is a terminal whose foreground process
// group is distlock's.
func inTerminalForeground(stdin io.Reader) bool {
	f, ok := stdin.(*os.File)
	if !ok || f == nil {
		return false
	}
	pgrp, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	return err == nil && pgrp == unix.Getpgrp()
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
