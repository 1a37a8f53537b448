package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Environment variables that point the Redis methods at servers testenv does not
// start (for example, started with docker-compose).
const (
	// EnvRedisAddr is host:port of one Redis server, for Env.Redis.
	EnvRedisAddr = "DISTLOCK_REDIS_ADDR"
	// EnvRedLockAddrs is a comma-separated list of independent Redis servers, for
	// Env.RedisNodes.
	EnvRedLockAddrs = "DISTLOCK_REDLOCK_ADDRS"
	// EnvRedisClusterAddrs is a comma-separated list of the masters of a Redis
	// Cluster, for Env.RedisCluster.
	EnvRedisClusterAddrs = "DISTLOCK_REDIS_CLUSTER_ADDRS"
)

// redisOpTimeout bounds one command of the raw RESP client used for readiness checks.
const redisOpTimeout = 2 * time.Second

// Redis returns a new redis-server on a free loopback port, with its own directory.
// It persists every write before acknowledging it (append-only file with
// appendfsync always, no RDB snapshots), so that data (such as fence counters)
// survives Kill and Restart. Each call starts another server.
//
// If DISTLOCK_REDIS_ADDR is set, Redis instead returns an External server at that
// address, after checking that it answers PING.
func (e *Env) Redis() (*Server, error) {
	if addr := os.Getenv(EnvRedisAddr); addr != "" {
		return e.externalRedis("redis", EnvRedisAddr, addr)
	}
	return e.startRedis("redis")
}

// RedisNodes returns n independent redis-servers (as Redis starts them), for RedLock.
//
// If DISTLOCK_REDLOCK_ADDRS is set, RedisNodes instead returns External servers at
// the first n of its comma-separated addresses (it must hold at least n), after
// checking that each answers PING.
func (e *Env) RedisNodes(n int) ([]*Server, error) {
	if n <= 0 {
		return nil, fmt.Errorf("testenv: RedisNodes(%d): n must be positive", n)
	}
	if v := os.Getenv(EnvRedLockAddrs); v != "" {
		addrs := splitAddrs(v)
		if len(addrs) < n {
			return nil, fmt.Errorf("testenv: %s=%q has %d addresses; the tests need %d", EnvRedLockAddrs, v, len(addrs), n)
		}
		nodes := make([]*Server, n)
		for i, a := range addrs[:n] {
			s, err := e.externalRedis(fmt.Sprintf("redis-node-%d", i), EnvRedLockAddrs, a)
			if err != nil {
				return nil, err
			}
			nodes[i] = s
		}
		return nodes, nil
	}
	nodes := make([]*Server, n)
	for i := range nodes {
		s, err := e.startRedis(fmt.Sprintf("redis-node-%d", i))
		if err != nil {
			return nil, err
		}
		nodes[i] = s
	}
	return nodes, nil
}

// A Cluster is a Redis Cluster whose masters each own part of the hash slots (no
// replicas).
type Cluster struct {
	// Nodes are the masters, one Server each.
	Nodes []*Server
}

// Addrs returns the masters' addresses, for redis.ClusterOptions.Addrs.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

func (c *Cluster) external() bool { return len(c.Nodes) > 0 && c.Nodes[0].External() }

// WaitOK waits until every node reports cluster_state:ok and knows all the others,
// for example after a node was restarted. It returns ctx's error, with the last state
// seen, if that does not happen before ctx is done.
func (c *Cluster) WaitOK(ctx context.Context) error {
	delay := 10 * time.Millisecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	var last error
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("testenv: Redis Cluster %v not ok: %w (last: %v)", c.Addrs(), ctx.Err(), last)
		case <-timer.C:
		}
		if last = c.check(ctx, !c.external()); last == nil {
			return nil
		}
		timer.Reset(delay)
		delay = min(delay*2, 250*time.Millisecond)
	}
}

// check returns nil when every node says the cluster is ok with all slots assigned
// and, if all, knows exactly the Cluster's nodes.
func (c *Cluster) check(ctx context.Context, all bool) error {
	for _, s := range c.Nodes {
		info, err := RedisCommand(ctx, s.Addr(), "CLUSTER", "INFO")
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %w", s, err)
		}
		text, _ := info.(string)
		fields := parseInfo(text)
		if fields["cluster_state"] != "ok" || fields["cluster_slots_assigned"] != "16384" ||
			(all && fields["cluster_known_nodes"] != strconv.Itoa(len(c.Nodes))) {
			return fmt.Errorf("%s: cluster_state=%s cluster_slots_assigned=%s cluster_known_nodes=%s",
				s, fields["cluster_state"], fields["cluster_slots_assigned"], fields["cluster_known_nodes"])
		}
	}
	return nil
}

// RedisCluster returns a new Redis Cluster of masters redis-servers (at least 3, as
// redis-cli requires), each persisting as Redis does, with cluster-node-timeout
// 2000ms and no replicas, created with `redis-cli --cluster create`. It returns once
// every node reports cluster_state:ok.
//
// If DISTLOCK_REDIS_CLUSTER_ADDRS is set, RedisCluster instead returns a Cluster of
// External servers at its comma-separated addresses (at least masters of them), after
// checking that every node reports cluster_state:ok.
func (e *Env) RedisCluster(masters int) (*Cluster, error) {
	if masters < 3 {
		return nil, fmt.Errorf("testenv: RedisCluster(%d): a Redis Cluster needs at least 3 masters", masters)
	}
	if v := os.Getenv(EnvRedisClusterAddrs); v != "" {
		addrs := splitAddrs(v)
		if len(addrs) < masters {
			return nil, fmt.Errorf("testenv: %s=%q has %d addresses; the tests need %d", EnvRedisClusterAddrs, v, len(addrs), masters)
		}
		c := &Cluster{}
		for i, a := range addrs {
			c.Nodes = append(c.Nodes, e.ExternalServer(fmt.Sprintf("redis-cluster-%d", i), a))
		}
		// The external cluster may have replicas that the variable does not list, so
		// only its state is checked.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.check(ctx, false); err != nil {
			return nil, fmt.Errorf("testenv: %s=%s: %w", EnvRedisClusterAddrs, v, err)
		}
		return c, nil
	}
	cli, err := LookBin("redis-cli")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Nodes: make([]*Server, masters)}
	for i := range c.Nodes {
		s, err := e.startRedis(fmt.Sprintf("redis-cluster-%d", i),
			"--cluster-enabled", "yes",
			"--cluster-config-file", "{dir}/nodes.conf",
			"--cluster-node-timeout", "2000")
		if err != nil {
			return nil, err
		}
		c.Nodes[i] = s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if _, err := RunCommand(ctx, "", "", cli, args...); err != nil {
		return nil, fmt.Errorf("testenv: create Redis Cluster: %w", err)
	}
	if err := c.WaitOK(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// startRedis starts one redis-server named name with the common arguments plus extra.
func (e *Env) startRedis(name string, extra ...string) (*Server, error) {
	bin, err := LookBin("redis-server")
	if err != nil {
		return nil, err
	}
	dir, err := e.tempDir(name)
	if err != nil {
		return nil, err
	}
	// Redis reports its directory after resolving symbolic links (getcwd).
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, err
	}
	args := []string{
		"--port", "{port}",
		"--bind", "127.0.0.1",
		"--protected-mode", "no",
		"--dir", "{dir}",
		"--daemonize", "no",
		"--logfile", "", // stdout, which is the Server's log file in its directory
		"--save", "",
		"--appendonly", "yes",
		"--appendfsync", "always",
	}
	return e.StartProcess(ProcessSpec{
		Name: name,
		Bin:  bin,
		Args: append(args, extra...),
		Dir:  dir,
		Ready: func(ctx context.Context, addr string) error {
			if err := redisPing(ctx, addr); err != nil {
				return err
			}
			// Make sure the server on this port is ours, not one that won a race
			// for the port while ours failed to bind.
			got, err := RedisCommand(ctx, addr, "CONFIG", "GET", "dir")
			if err != nil {
				return err
			}
			if a, ok := got.([]any); !ok || len(a) != 2 || a[1] != realDir {
				return fmt.Errorf("the Redis at %s is not ours: CONFIG GET dir = %v, want %s", addr, got, realDir)
			}
			return nil
		},
	})
}

// externalRedis returns an External server at addr (named by variable) once it
// answers PING.
func (e *Env) externalRedis(name, variable, addr string) (*Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := redisPing(ctx, addr); err != nil {
		return nil, fmt.Errorf("testenv: %s=%s: Redis does not answer PING: %w", variable, addr, err)
	}
	return e.ExternalServer(name, addr), nil
}

func redisPing(ctx context.Context, addr string) error {
	got, err := RedisCommand(ctx, addr, "PING")
	if err != nil {
		return err
	}
	if got != "PONG" {
		return fmt.Errorf("PING answered %v", got)
	}
	return nil
}

// A RedisError is an error reply of a Redis server.
type RedisError string

func (e RedisError) Error() string { return "redis: " + string(e) }

// RedisCommand sends one command to the Redis server at addr on a new connection
// and returns its reply: a string (simple or bulk), an int64, nil (null), or []any,
// or a RedisError for an error reply. It is bounded by ctx and by 2s, and starts no
// goroutine; it is meant for readiness checks and test set-up (FLUSHALL, CONFIG
// SET, DEBUG SLEEP), not for the code under test.
func RedisCommand(ctx context.Context, addr string, args ...string) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, redisOpTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		return nil, err
	}
	return readRESP(bufio.NewReader(c))
}

// readRESP reads one RESP2 reply.
func readRESP(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("redis: empty reply line")
	}
	switch body := line[1:]; line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, RedisError(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("redis: bad bulk length %q", body)
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("redis: bad array length %q", body)
		}
		if n < 0 {
			return nil, nil
		}
		a := make([]any, n)
		for i := range a {
			if a[i], err = readRESP(r); err != nil {
				var re RedisError
				if !errors.As(err, &re) {
					return nil, err
				}
				a[i] = re
			}
		}
		return a, nil
	default:
		return nil, fmt.Errorf("redis: unexpected reply %q", line)
	}
}

// parseInfo parses "key:value" lines (INFO, CLUSTER INFO).
func parseInfo(s string) map[string]string {
	m := make(map[string]string)
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}

func splitAddrs(v string) []string {
	var addrs []string
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
}
