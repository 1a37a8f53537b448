package testenv

import "syscall"

// withDeathSignal makes the kernel kill the child (SIGKILL) if the test binary
// dies first (PR_SET_PDEATHSIG), so that a crashed or timed-out run leaves no
// servers behind. It returns a.
func withDeathSignal(a *syscall.SysProcAttr) *syscall.SysProcAttr {
	a.Pdeathsig = syscall.SIGKILL
	return a
}
