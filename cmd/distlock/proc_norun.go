//go:build !unix

package main

import (
	"errors"
	"io"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// runUnsupported says why run refuses on this system (Windows): distlock cannot
// stop CMD and its children gracefully when the lease is lost (there is no SIGTERM,
// and no process group to send it to), and it will not promise an exclusion it
// cannot enforce. status and check work.
const runUnsupported = "run is not supported on " + runtime.GOOS + ": distlock could not stop CMD when the lease is lost (no SIGTERM, no process groups); status and check work; use distlock run under WSL, Linux, macOS or a BSD"

// A child would be CMD; on this system none is ever started.
type child struct {
	cmd  *exec.Cmd
	done chan struct{}
	seen time.Time
	err  error
}

func startChild(path string, argv []string, stdin io.Reader, stdout, stderr io.Writer, env []string) (*child, error) {
	return nil, errors.New(runUnsupported)
}

func (c *child) running() bool              { return false }
func (c *child) close()                     {}
func (c *child) signal(sig syscall.Signal)  {}
func (c *child) forward(sig syscall.Signal) {}
