package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Environment variables of the etcd methods.
const (
	// EnvEtcdEndpoints is a comma-separated list of the client endpoints
	// (host:port or http://host:port) of an etcd cluster that testenv does not start
	// (for example, started with docker-compose), for Env.Etcd and Env.EtcdCluster.
	EnvEtcdEndpoints = "DISTLOCK_ETCD_ENDPOINTS"
	// EnvEtcdBin names an etcd server binary to use instead of the one that
	// scripts/build-etcd.sh builds into the cache directory (see EtcdBin).
	EnvEtcdBin = "DISTLOCK_ETCD_BIN"
)

// EtcdVersion is the version of go.etcd.io/etcd/server/v3 that tools/etcd pins and
// scripts/build-etcd.sh builds; EtcdBin looks for that build. A test checks that it
// matches tools/etcd/go.mod.
const EtcdVersion = "v3.6.16"

// Timing of the etcd members that testenv starts. Elections are quick (a leader that
// is killed is replaced within about a second) and the smallest lease TTL the server
// grants, 3/2 of the election timeout rounded up to whole seconds, is 1s.
const (
	EtcdHeartbeat       = 50 * time.Millisecond
	EtcdElectionTimeout = 600 * time.Millisecond
	// EtcdMinLeaseTTL is the smallest lease TTL these members grant; a Grant of
	// less is raised to it.
	EtcdMinLeaseTTL = time.Second
)

// EtcdBin returns the etcd server binary: $DISTLOCK_ETCD_BIN if set, else the one
// scripts/build-etcd.sh built into <user cache dir>/distlock/etcd-<EtcdVersion>/etcd
// (the user cache dir is $XDG_CACHE_HOME, or $HOME/.cache). It does not look in PATH,
// where an old etcd (Debian's 3.4) may be. It checks that the binary reports etcd
// 3.6 or newer. The error wraps ErrNotInstalled when the binary is missing.
func EtcdBin() (string, error) {
	bin := os.Getenv(EnvEtcdBin)
	where := EnvEtcdBin + "=" + bin
	if bin == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("testenv: etcd: no cache directory (%v): %w", err, ErrNotInstalled)
		}
		bin = filepath.Join(cache, "distlock", "etcd-"+EtcdVersion, "etcd")
		where = bin + ", where scripts/build-etcd.sh builds it"
	}
	fi, err := os.Stat(bin)
	if err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("testenv: etcd %s not found (%s): %w", EtcdVersion, where, ErrNotInstalled)
	}
	if err := checkEtcdVersion(bin); err != nil {
		return "", err
	}
	return bin, nil
}

var etcdVersionRE = regexp.MustCompile(`etcd Version: (\d+)\.(\d+)\.`)

// checkEtcdVersion runs bin --version and requires etcd 3.6 or newer.
func checkEtcdVersion(bin string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("testenv: %s --version: %v: %s", bin, err, out)
	}
	m := etcdVersionRE.FindSubmatch(out)
	if m == nil {
		return fmt.Errorf("testenv: %s --version printed no etcd version: %q", bin, out)
	}
	major, _ := strconv.Atoi(string(m[1]))
	minor, _ := strconv.Atoi(string(m[2]))
	if major < 3 || major == 3 && minor < 6 {
		return fmt.Errorf("testenv: %s is etcd %d.%d; the tests need 3.6 or newer: %w", bin, major, minor, ErrNotInstalled)
	}
	return nil
}

// Etcd returns a new single-member etcd cluster on free loopback ports (client and
// peer), with its own data directory; its Addr is the client endpoint. The member
// persists its data across Kill and Restart, elects itself within a second, and logs
// to its log file (Server.Logs). Each call starts another cluster.
//
// If DISTLOCK_ETCD_ENDPOINTS is set, Etcd instead returns an External server at its
// first endpoint, after checking that the cluster has a leader.
func (e *Env) Etcd() (*Server, error) {
	if v := os.Getenv(EnvEtcdEndpoints); v != "" {
		c, err := e.externalEtcd(v)
		if err != nil {
			return nil, err
		}
		return c.Members[0], nil
	}
	c, err := e.startEtcdCluster("etcd", 1, false)
	if err != nil {
		return nil, err
	}
	return c.Members[0], nil
}

// An EtcdCluster is an etcd cluster of one Server per member.
type EtcdCluster struct {
	// Members are the cluster's members; each Server's Addr is its client endpoint.
	Members []*Server

	boot *etcdBoot // how the members were configured; nil for External members
}

// EtcdCluster returns a new etcd cluster of n members on loopback, each with its own
// free client and peer ports and data directory, started together; it returns once
// every member answers and the cluster has a leader. Members persist their data
// across Kill and Restart of any of them.
//
// If DISTLOCK_ETCD_ENDPOINTS is set, EtcdCluster instead returns External members,
// one per endpoint in it (however many there are), after checking that the cluster
// has a leader; tests that kill or pause members then fail with a clear message.
func (e *Env) EtcdCluster(n int) (*EtcdCluster, error) {
	return e.etcdCluster(n, false)
}

// etcdCluster is EtcdCluster, with peer proxies when proxied.
func (e *Env) etcdCluster(n int, proxied bool) (*EtcdCluster, error) {
	if n <= 0 {
		return nil, fmt.Errorf("testenv: etcd cluster of %d members: n must be positive", n)
	}
	if v := os.Getenv(EnvEtcdEndpoints); v != "" {
		return e.externalEtcd(v)
	}
	var errs []error
	for range startAttempts {
		name := "etcd-cluster"
		if proxied {
			name = "etcd-proxied"
		}
		e.mu.Lock()
		name += "-" + strconv.Itoa(e.seq+1)
		e.mu.Unlock()
		c, err := e.startEtcdCluster(name, n, proxied)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if errors.Is(err, ErrNotInstalled) {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// Endpoints returns the members' client endpoints (host:port), for clientv3.Config.
func (c *EtcdCluster) Endpoints() []string {
	eps := make([]string, len(c.Members))
	for i, s := range c.Members {
		eps[i] = s.Addr()
	}
	return eps
}

// Leader returns the member that every running member (one that answers within
// ctx) names as leader, or an error when they answer nothing, name no leader, or
// disagree.
func (c *EtcdCluster) Leader(ctx context.Context) (*Server, error) {
	byID := make(map[uint64]*Server)
	var leader uint64
	var errs []error
	answered := 0
	for _, s := range c.Members {
		if !s.Running() {
			continue
		}
		st, err := EtcdStatus(ctx, s.Addr())
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s, err))
			continue
		}
		answered++
		byID[st.MemberID] = s
		switch {
		case st.Leader == 0:
			return nil, fmt.Errorf("testenv: %s has no leader", s)
		case leader == 0:
			leader = st.Leader
		case leader != st.Leader:
			return nil, fmt.Errorf("testenv: members disagree on the leader (%x and %x)", leader, st.Leader)
		}
	}
	if answered == 0 {
		return nil, fmt.Errorf("testenv: no etcd member answered: %w", errors.Join(errs...))
	}
	s := byID[leader]
	if s == nil {
		return nil, fmt.Errorf("testenv: the leader %x is not a member that answered (%w)", leader, errors.Join(errs...))
	}
	return s, nil
}

// WaitLeader polls Leader until it succeeds or ctx ends, for example after the leader
// was killed.
func (c *EtcdCluster) WaitLeader(ctx context.Context) (*Server, error) {
	delay := 10 * time.Millisecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	var last error
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("testenv: etcd cluster %v has no leader: %w (last: %v)", c.Endpoints(), ctx.Err(), last)
		case <-timer.C:
		}
		s, err := c.Leader(ctx)
		if err == nil {
			return s, nil
		}
		last = err
		timer.Reset(delay)
		delay = min(delay*2, 200*time.Millisecond)
	}
}

// Pause stops every member (SIGSTOP) until Resume; see Server.Pause.
func (c *EtcdCluster) Pause(t testing.TB) {
	t.Helper()
	for _, s := range c.Members {
		s.Pause(t)
	}
}

// Resume continues every paused member; see Server.Resume.
func (c *EtcdCluster) Resume(t testing.TB) {
	t.Helper()
	for _, s := range c.Members {
		s.Resume(t)
	}
}

// Restart stops every member, starts them all again on the same ports with the same
// data, and returns once they answer and the cluster has a leader. (Members are
// restarted together because a member is ready only once a quorum answers.) It fails
// t on External members.
func (c *EtcdCluster) Restart(t testing.TB) {
	t.Helper()
	for _, s := range c.Members {
		s.mustOwn(t, "Restart")
	}
	errs := make([]error, len(c.Members))
	var wg sync.WaitGroup
	for i, s := range c.Members {
		wg.Go(func() { errs[i] = s.Stop() })
	}
	wg.Wait()
	for i, s := range c.Members {
		wg.Go(func() { errs[i] = errors.Join(errs[i], s.restart()) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("testenv: restart etcd cluster: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
}

// externalEtcd returns the External members at the endpoints in v once they have a
// leader.
func (e *Env) externalEtcd(v string) (*EtcdCluster, error) {
	c := &EtcdCluster{}
	for i, ep := range splitAddrs(v) {
		ep = strings.TrimPrefix(strings.TrimPrefix(ep, "http://"), "https://")
		c.Members = append(c.Members, e.ExternalServer(fmt.Sprintf("etcd-%d", i), ep))
	}
	if len(c.Members) == 0 {
		return nil, fmt.Errorf("testenv: %s=%q names no endpoint", EnvEtcdEndpoints, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.WaitLeader(ctx); err != nil {
		return nil, fmt.Errorf("%w (from %s)", err, EnvEtcdEndpoints)
	}
	return c, nil
}
