package testenv

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// orphanEnv makes the test binary start servers and then wait to be killed
// (runOrphanHelper), to check that its servers die with it.
const orphanEnv = "TESTENV_HELPER_ORPHAN"

// orphanUser is the user the helper's second server runs as: another user when the
// tests run as root (so that PR_SET_PDEATHSIG is known to survive the change of
// credentials), else the current user.
func orphanUser() string {
	if os.Geteuid() == 0 {
		return "nobody"
	}
	return ""
}

// runOrphanHelper starts a redis-server and a sleep (as orphanUser), prints
// "pids <redis> <sleep> <temporary directory>", and blocks until it is killed.
func runOrphanHelper() int {
	env, err := newEnv()
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	r, err := env.Redis()
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	s, err := env.StartProcess(ProcessSpec{
		Name:  "sleeper",
		Bin:   "/bin/sleep",
		Args:  []string{"3600"},
		User:  orphanUser(),
		Ready: func(context.Context, string) error { return nil },
	})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("pids", r.Pid(), s.Pid(), env.root)
	select {}
}

func TestServersDieWithTestBinary(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), orphanEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "pids" {
		t.Fatalf("helper said %q", line)
	}
	// The helper dies without cleaning up; remove its directory.
	defer os.RemoveAll(f[3])
	var pids []int
	for _, s := range f[1:3] {
		pid, err := strconv.Atoi(s)
		if err != nil || pid <= 0 {
			t.Fatalf("helper said %q", line)
		}
		pids = append(pids, pid)
	}
	if u := orphanUser(); u != "" {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pids[1]))
		if err != nil || !strings.Contains(string(b), "\nUid:\t65534\t") {
			t.Fatalf("sleeper does not run as %s: %v\n%s", u, err, b)
		}
	}
	// Kill the helper as a crash or the -timeout panic would end it: no cleanup.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("server process %d outlived the test binary by 10s", pid)
			}
			time.Sleep(10 * time.Millisecond) // polling /proc, bounded by the deadline
		}
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	state, _, ok := procStat(fmt.Sprintf("/proc/%d/stat", pid))
	return ok && state != 'Z' && state != 'X'
}
