//go:build linux

package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY returns the master and the slave of a new pseudo-terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open the pty slave: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// TestTerminalForeground runs distlock as the foreground job of a terminal: CMD
// must be able to read the terminal (it stays in the foreground process group), and
// ^C must reach it.
func TestTerminalForeground(t *testing.T) {
	env, db := baseEnv(t), sqliteURL(t)
	master, slave := openPTY(t)
	cmd := exec.Command(bin, "run", "--backend", db, "k", "--", "sh", "-c",
		`trap 'echo "got INT"; exit 5' INT; echo ready; read line; echo "read $line"; while :; do sleep 0.1; done`)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	// A new session whose controlling terminal is the pty: distlock is its
	// foreground process group, as a shell's foreground job is.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	defer func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	}()
	lines := make(chan string, 100)
	go func() {
		// Ends when the test closes master (Cleanup) or the pty hangs up.
		sc := bufio.NewScanner(master)
		for sc.Scan() {
			lines <- strings.TrimRight(sc.Text(), "\r")
		}
		close(lines)
	}()
	var seen []string
	expect := func(want string) {
		t.Helper()
		timer := time.NewTimer(procTimeout)
		defer timer.Stop()
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("terminal closed before %q; seen %q", want, seen)
				}
				seen = append(seen, line)
				if strings.HasSuffix(line, want) { // after the echo of ^C, say
					return
				}
			case <-timer.C:
				t.Fatalf("no %q on the terminal within %v; seen %q", want, procTimeout, seen)
			}
		}
	}
	expect("ready")
	if _, err := master.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	expect("read hello")
	if _, err := master.Write([]byte{0x03}); err != nil { // ^C
		t.Fatal(err)
	}
	expect("got INT")
	select {
	case <-exited:
	case <-time.After(procTimeout):
		t.Fatalf("distlock did not exit after ^C; seen %q", seen)
	}
	if got := exitStatus(cmd.ProcessState, nil); got != 5 {
		t.Fatalf("exit %d, want CMD's 5; seen %q", got, seen)
	}
	for _, l := range seen {
		if strings.HasPrefix(l, "distlock") {
			t.Errorf("distlock printed %q", l)
		}
	}
}
