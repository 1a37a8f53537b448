package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Pause stops every process of the server's process group with SIGSTOP and returns
// once they are all stopped: the server then accepts TCP connections (the kernel
// does) but answers nothing. Resume continues it; if the test does not, a t.Cleanup
// registered by Pause does, so that the server can be stopped at the end. It fails t
// on an External or stopped server.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	s.mustOwn(t, "Pause")
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	if p == nil || p.exited() {
		t.Fatalf("testenv: pause %s: the server is not running", s)
	}
	if s.paused {
		return
	}
	if err := syscall.Kill(-p.pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("testenv: pause %s: SIGSTOP process group %d: %v", s, p.pid, err)
	}
	s.paused = true
	t.Cleanup(func() {
		if err := s.resume(); err != nil {
			t.Errorf("testenv: resume %s after the test: %v", s, err)
		}
	})
	if err := waitGroupStopped(p.pid, 10*time.Second); err != nil {
		t.Fatalf("testenv: pause %s: %v", s, err)
	}
}

// Resume continues a server stopped by Pause (SIGCONT to its process group). Resuming
// a server that is not paused does nothing. It fails t on an External server.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	s.mustOwn(t, "Resume")
	if err := s.resume(); err != nil {
		t.Fatalf("testenv: resume %s: %v", s, err)
	}
}

func (s *Server) resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resumeLocked()
}

func (s *Server) resumeLocked() error {
	if !s.paused {
		return nil
	}
	s.paused = false
	if s.proc == nil {
		return nil
	}
	if err := syscall.Kill(-s.proc.pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("SIGCONT process group %d: %w", s.proc.pid, err)
	}
	return nil
}

// waitGroupStopped waits until every thread of every process in process group pgid
// is stopped (or dead), so that a paused server has certainly stopped answering.
func waitGroupStopped(pgid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	delay := time.Millisecond
	for {
		running, err := groupRunning(pgid)
		if err != nil || running == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d threads of process group %d still running %v after SIGSTOP", running, pgid, timeout)
		}
		time.Sleep(delay) // polling /proc; bounded by the deadline
		delay = min(delay*2, 20*time.Millisecond)
	}
}

// groupRunning counts the threads of process group pgid that are not stopped.
func groupRunning(pgid int) (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("read /proc: %w", err)
	}
	running := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		_, pg, ok := procStat(fmt.Sprintf("/proc/%d/stat", pid))
		if !ok || pg != pgid {
			continue
		}
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			continue // exited meanwhile
		}
		for _, t := range tasks {
			state, _, ok := procStat(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
			if ok && state != 'T' && state != 't' && state != 'Z' && state != 'X' {
				running++
			}
		}
	}
	return running, nil
}

// procStat reads the state and process group from a /proc stat file.
func procStat(path string) (state byte, pgrp int, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid pgrp ...; comm may contain spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return 0, 0, false
	}
	pg, err := strconv.Atoi(f[2])
	if err != nil || len(f[0]) != 1 {
		return 0, 0, false
	}
	return f[0][0], pg, true
}
