//go:build unix && !linux

package main

import "time"

// An exitWatch would see CMD exit without reaping it; on this system distlock sees
// the exit only when cmd.Wait returns.
type exitWatch struct{}

func watchExit(pid int) exitWatch { return exitWatch{} }

func (exitWatch) wait() (time.Time, bool) { return time.Time{}, false }

func (exitWatch) running() bool { return true }

func (exitWatch) close() {}
