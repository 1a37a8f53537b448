//go:build !linux

package testenv

import "syscall"

// withDeathSignal returns a unchanged: only Linux kills a child when its parent
// dies (PR_SET_PDEATHSIG). Elsewhere the package builds (go build ./... for every
// GOOS), but a crashed test run may leave its servers behind.
func withDeathSignal(a *syscall.SysProcAttr) *syscall.SysProcAttr { return a }
