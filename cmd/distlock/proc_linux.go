package main

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// An exitWatch sees CMD exit without reaping it, through a pidfd (Linux 5.4), so
// that the time of the exit is read as soon as the kernel reports it, and CMD's
// liveness can be checked at any moment without a race with the reaper.
type exitWatch struct {
	fd int // -1: no pidfd (old kernel); then nothing is known before cmd.Wait
}

// watchExit opens a pidfd for pid, a child that has not been reaped yet (so the
// pid cannot have been reused).
func watchExit(pid int) exitWatch {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return exitWatch{fd: -1}
	}
	return exitWatch{fd: fd}
}

// wait blocks until CMD has exited, and returns the time right after the kernel
// said so; ok is false when it could not wait.
func (w exitWatch) wait() (seen time.Time, ok bool) {
	if w.fd < 0 {
		return time.Time{}, false
	}
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, w.fd, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err == nil {
			return time.Now(), true
		}
		if !errors.Is(err, unix.EINTR) {
			return time.Time{}, false
		}
	}
}

// running reports whether CMD has not exited (true when it cannot tell).
func (w exitWatch) running() bool {
	if w.fd < 0 {
		return true
	}
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PIDFD, w.fd, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	switch {
	case errors.Is(err, unix.ECHILD):
		return false // reaped already
	case err != nil:
		return true
	}
	return info.Signo == 0 // WNOHANG leaves it zero while CMD runs
}

func (w exitWatch) close() {
	if w.fd >= 0 {
		unix.Close(w.fd)
	}
}
