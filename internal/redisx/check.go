package redisx

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// A Profile selects the rules Check applies: what a setting does to locks depends on
// the backend.
type Profile int

const (
	// Single is package redislock: one deployment (a server, a Sentinel-managed
	// master or a Cluster) holds every lock and fence.
	Single Profile = iota
	// RedLockNode is one of RedLock's independent masters. Package redlock detects a
	// master that comes back empty after a restart (and keeps it out of quorums for a
	// while), so only a restart that brings back old data is unsafe.
	RedLockNode
)

// A Report is what a CheckServer call read from the Redis servers behind a client,
// and the settings it found that can free a held lock or repeat a fence.
type Report struct {
	// Servers describes each server that was read, in the order they were asked.
	Servers []Server
	// Findings lists each unsafe setting found, and each check that could not be
	// made (Unchecked), one line each. Empty when every check was made and passed.
	Findings []Finding
}

// A Server is what CheckServer read from one Redis server. Fields it could not read
// are empty.
type Server struct {
	Name     string            // the client's name for it: its address, or "node 2 (host:port)"
	Version  string            // redis_version
	Mode     string            // redis_mode: standalone, cluster or sentinel
	Role     string            // master or slave
	Replicas int               // connected_slaves of a master
	RunID    string            // run_id: changes at every restart
	Config   map[string]string // maxmemory-policy, maxmemory, appendonly, appendfsync, save; nil when CONFIG GET was refused
}

// A Finding is one unsafe setting, or one check that could not be made.
type Finding struct {
	Server    string // Server.Name; empty for a finding about several servers
	Setting   string // "maxmemory-policy", "appendonly", "appendfsync", "replication", "CONFIG", ...
	Value     string // the value read, if any
	Unchecked bool   // the setting could not be read (a command refused, a server unreachable)
	Message   string // one line: what the setting does to locks and fences, and what to set
}

// String formats f on one line: "server: setting=value: message".
func (f Finding) String() string {
	var b strings.Builder
	if f.Server != "" {
		b.WriteString(f.Server)
		b.WriteString(": ")
	}
	b.WriteString(f.Setting)
	if f.Value != "" {
		b.WriteString("=")
		b.WriteString(f.Value)
	}
	if f.Unchecked {
		b.WriteString(" (not checked)")
	}
	b.WriteString(": ")
	b.WriteString(f.Message)
	return b.String()
}

// OK reports whether every check was made and none found an unsafe setting.
func (r Report) OK() bool { return len(r.Findings) == 0 }

// String formats r: one line per server, then one per finding.
func (r Report) String() string {
	var b strings.Builder
	for _, s := range r.Servers {
		fmt.Fprintf(&b, "%s: redis %s %s %s, %d replica(s)", s.Name, orUnknown(s.Version), orUnknown(s.Mode), orUnknown(s.Role), s.Replicas)
		if s.Config != nil {
			fmt.Fprintf(&b, ", maxmemory-policy %s, maxmemory %s, appendonly %s, appendfsync %s, save %q",
				s.Config["maxmemory-policy"], s.Config["maxmemory"], s.Config["appendonly"], s.Config["appendfsync"], s.Config["save"])
		}
		b.WriteString("\n")
	}
	if r.OK() {
		b.WriteString("no unsafe setting found\n")
	}
	for _, f := range r.Findings {
		b.WriteString(f.String())
		b.WriteString("\n")
	}
	return b.String()
}

func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// configParams are the settings Check reads, one CONFIG GET each (Redis before 7
// takes one pattern per CONFIG GET).
var configParams = []string{"maxmemory-policy", "maxmemory", "appendonly", "appendfsync", "save"}

// Check reads the settings of every server behind c (each master of a Cluster, each
// shard of a Ring, else the one server c reaches) and reports those that break locks
// under profile p. A command the server refuses (CONFIG renamed or denied by an ACL,
// as on several managed services) gives an Unchecked finding, not an error; the error
// is for a server that could not be reached at all.
func Check(ctx context.Context, c redis.UniversalClient, p Profile) (Report, error) {
	var (
		mu  sync.Mutex
		r   Report
		one = func(ctx context.Context, node *redis.Client) error {
			name := node.Options().Addr
			if name == "" {
				name = "redis" // a Sentinel-managed client names no address
			}
			s, fs, err := CheckOne(ctx, node, name, p)
			mu.Lock()
			defer mu.Unlock()
			r.Servers = append(r.Servers, s)
			r.Findings = append(r.Findings, fs...)
			return err
		}
		err error
	)
	switch c := c.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, one)
	case *redis.Ring:
		err = c.ForEachShard(ctx, one)
	case *redis.Client:
		err = one(ctx, c)
	default:
		var s Server
		var fs []Finding
		s, fs, err = CheckOne(ctx, c, "redis", p)
		r.Servers, r.Findings = []Server{s}, fs
	}
	return r, err
}

// CheckOne reads one server's settings through c, which must reach that one server,
// in one round trip, and returns what it read and its findings under profile p,
// naming the server name. It returns an error only when the server could not be
// reached (not when it refused a command).
func CheckOne(ctx context.Context, c redis.Cmdable, name string, p Profile) (Server, []Finding, error) {
	s := Server{Name: name}
	pipe := c.Pipeline()
	cfg := make([]*redis.MapStringStringCmd, len(configParams))
	for i, param := range configParams {
		cfg[i] = pipe.ConfigGet(ctx, param)
	}
	info := pipe.Info(ctx) // the default sections hold server, persistence and replication
	_, _ = pipe.Exec(ctx)
	var fs []Finding
	for _, cmd := range append([]redis.Cmder{info}, toCmders(cfg)...) {
		if err := cmd.Err(); err != nil && !isServerError(err) {
			return s, nil, fmt.Errorf("redis: check %s: %w", name, err)
		}
	}
	if err := info.Err(); err != nil {
		fs = append(fs, Finding{Server: name, Setting: "INFO", Unchecked: true,
			Message: fmt.Sprintf("INFO is refused (%v): the role, replicas and version could not be checked", err)})
	} else {
		fields := parseInfo(info.Val())
		s.Version, s.Mode, s.Role, s.RunID = fields["redis_version"], fields["redis_mode"], fields["role"], fields["run_id"]
		s.Replicas, _ = strconv.Atoi(fields["connected_slaves"])
	}
	config := make(map[string]string)
	var refused error
	for i, cmd := range cfg {
		if err := cmd.Err(); err != nil {
			refused = err
			break
		}
		if v, ok := cmd.Val()[configParams[i]]; ok {
			config[configParams[i]] = v
		}
	}
	if refused != nil {
		fs = append(fs, Finding{Server: name, Setting: "CONFIG", Unchecked: true,
			Message: fmt.Sprintf("CONFIG GET is refused (%v): eviction and persistence could not be checked; ask for maxmemory-policy noeviction, appendonly yes and appendfsync always", refused)})
	} else {
		s.Config = config
	}
	fs = append(fs, judge(s, p)...)
	return s, fs, nil
}

func toCmders[T redis.Cmder](cmds []T) []redis.Cmder {
	out := make([]redis.Cmder, len(cmds))
	for i, c := range cmds {
		out[i] = c
	}
	return out
}

// isServerError reports whether err is an error reply of the server (a refused
// command), as opposed to a transport error.
func isServerError(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, redis.ErrClosed)
}

// judge returns the findings of what s holds under profile p.
func judge(s Server, p Profile) []Finding {
	var fs []Finding
	add := func(setting, value, msg string) {
		fs = append(fs, Finding{Server: s.Name, Setting: setting, Value: value, Message: msg})
	}
	if c := s.Config; c != nil {
		policy, maxmemory := c["maxmemory-policy"], c["maxmemory"]
		limit := "once maxmemory is reached"
		if maxmemory == "0" {
			limit = "once a maxmemory is set (none is now)"
		}
		switch {
		case strings.HasPrefix(policy, "volatile-"):
			add("maxmemory-policy", policy, "Redis evicts keys that have a time to live "+limit+
				": a held lock can vanish and a second client acquire it; set maxmemory-policy noeviction")
		case strings.HasPrefix(policy, "allkeys-"):
			add("maxmemory-policy", policy, "Redis evicts any key "+limit+
				": a held lock can vanish (two holders) and a fence counter too (fences repeat); set maxmemory-policy noeviction")
		}
		appendonly, fsync, save := c["appendonly"], c["appendfsync"], c["save"]
		switch {
		case appendonly == "no" && p == Single:
			add("appendonly", "no", "a restart loses the locks and fence increments that the last RDB snapshot lacks (all of them without one): "+
				"two holders until their ttl, and fences repeat; set appendonly yes and appendfsync always")
		case appendonly == "no" && save != "":
			add("appendonly", "no", fmt.Sprintf("with save %q a restart reloads the last RDB snapshot: locks and fence increments since it are lost, "+
				"and redlock cannot tell (it detects only a master that comes back empty); set appendonly yes and appendfsync always, or save \"\"", save))
		case appendonly == "yes" && fsync == "everysec":
			add("appendfsync", fsync, "a crash of the machine loses up to about a second of acknowledged writes: "+
				"recent locks (two holders) and fence increments (fences repeat); set appendfsync always")
		case appendonly == "yes" && fsync == "no":
			add("appendfsync", fsync, "a crash of the machine loses the writes the OS had not yet flushed (up to about 30s): "+
				"recent locks (two holders) and fence increments (fences repeat); set appendfsync always")
		}
	}
	switch {
	case s.Role == "slave" || s.Role == "replica":
		add("role", s.Role, "the client talks to a replica: lock writes fail on a read-only replica, "+
			"or stay on this replica alone; point the client at the master")
	case s.Replicas > 0 && p == Single:
		add("replication", strconv.Itoa(s.Replicas)+" replica(s)", "replication is asynchronous: a failover to a replica "+
			"can lose a lock just acknowledged (two holders) and step a fence counter back (fences repeat); "+
			"pass fences to the resource, or use a consensus store")
	case s.Replicas > 0:
		add("replication", strconv.Itoa(s.Replicas)+" replica(s)", "RedLock's masters must be independent: a failover to a replica "+
			"that missed a lock is a master that forgot it, which redlock cannot detect; run each master without replicas or failover")
	}
	if s.Mode == "cluster" && p == RedLockNode {
		add("redis_mode", s.Mode, "a RedLock master must be a standalone server: a Cluster node fails over to replicas "+
			"and moves keys when resharded")
	}
	return fs
}

// parseInfo parses the "field:value" lines of an INFO reply.
func parseInfo(s string) map[string]string {
	m := make(map[string]string)
	for line := range strings.SplitSeq(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}
