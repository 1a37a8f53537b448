package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// RedisWith returns a new redis-server started as Redis starts one, with extra
// command-line arguments after the common ones. A later argument overrides an earlier
// one, so RedisWith("--appendonly", "no") starts a server without persistence and
// RedisWith("--maxmemory", "100mb", "--maxmemory-policy", "volatile-lru") one that
// evicts. It is for tests of unsafe server settings, so it always starts a server of
// its own, even when DISTLOCK_REDIS_ADDR is set: an external server's settings are
// not ours to choose.
func (e *Env) RedisWith(extra ...string) (*Server, error) {
	return e.startRedis("redis-with", extra...)
}

// RestartEmpty restarts the standalone redis-server s with no data, as a crashed
// Redis without persistence comes back: it kills s (if running), as a crash would,
// deletes everything in its directory but its log, and starts it again on the same
// port with the same arguments. It fails t on an External server, and on a Cluster
// node (whose directory holds its cluster identity).
func (s *Server) RestartEmpty(t testing.TB) {
	t.Helper()
	s.Kill(t)
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		t.Fatalf("testenv: restart %s empty: %v", s, err)
	}
	for _, e := range entries {
		p := filepath.Join(s.Dir, e.Name())
		if p == s.Logs() {
			continue
		}
		if e.Name() == "nodes.conf" {
			t.Fatalf("testenv: restart %s empty: it is a Cluster node", s)
		}
		if err := os.RemoveAll(p); err != nil {
			t.Fatalf("testenv: restart %s empty: %v", s, err)
		}
	}
	s.Restart(t)
}

// RestartMinorityEmpty restarts a minority of servers empty (see RestartEmpty): the
// last (len(servers)-1)/2 of them, 2 of 5, so that repeated calls wipe the same
// servers and a majority keeps its data. It returns the servers it restarted. It is
// the RedLock harness's LoseMinority fault.
func RestartMinorityEmpty(t testing.TB, servers []*Server) []*Server {
	t.Helper()
	lost := servers[len(servers)-(len(servers)-1)/2:]
	for _, s := range lost {
		s.RestartEmpty(t)
	}
	return lost
}
