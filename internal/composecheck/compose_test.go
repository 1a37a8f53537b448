package composecheck

import (
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/distlock/distlock/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serverVars are testenv's variables that name servers, each checked by a
// function of the test. notServerVars are its other DISTLOCK_ variables.
var (
	serverVars = []string{
		testenv.EnvRedisAddr, testenv.EnvRedLockAddrs, testenv.EnvRedisClusterAddrs,
		testenv.EnvZooKeeperAddrs, testenv.EnvEtcdEndpoints, testenv.EnvPostgresURL,
		testenv.EnvMySQLDSN,
	}
	notServerVars = map[string]string{
		testenv.EnvEtcdBin:      "an etcd binary to run, not a server",
		"DISTLOCK_TESTENV_KEEP": "keeps testenv's temporary directories",
	}
)

func TestServices(t *testing.T) {
	c := load(t) // unknown keys and values of the wrong shape fail here
	for _, name := range c.names {
		s := c.services[name]
		image := s.Image
		if i := strings.LastIndex(image, ":"); i < 0 || i < strings.LastIndex(image, "/") || strings.HasSuffix(image, ":latest") {
			t.Errorf("service %s: image %q has no pinned tag", name, image)
		}
		if s.NetworkMode == "host" && s.Ports != nil {
			t.Errorf("service %s: network_mode host cannot publish ports", name)
		}
		if hc := s.Healthcheck; hc != nil {
			if len(hc.Test) < 2 || hc.Test[0] != "CMD" && hc.Test[0] != "CMD-SHELL" {
				t.Errorf("service %s: healthcheck test %q: want [CMD, ...] or [CMD-SHELL, command]", name, hc.Test)
			}
		}
		for _, d := range slices.Sorted(maps.Keys(s.DependsOn)) {
			other, ok := c.services[d]
			if !ok {
				t.Errorf("service %s depends on unknown service %s", name, d)
				continue
			}
			switch cond := s.DependsOn[d].Condition; cond {
			case "service_healthy":
				if other.Healthcheck == nil {
					t.Errorf("service %s waits for %s to be healthy, which has no healthcheck", name, d)
				}
			case "service_started", "service_completed_successfully":
			default:
				t.Errorf("service %s: depends_on %s: condition %q", name, d, cond)
			}
		}
	}
}

// serviceAt returns the service that serves the host address addr (127.0.0.1:port):
// one that publishes port, or one on the host's network whose command says
// --port port.
func (c *compose) serviceAt(t *testing.T, variable, addr string) (string, *service) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Errorf("%s: %q: %v", variable, addr, err)
		return "", nil
	}
	if host != "127.0.0.1" {
		t.Errorf("%s: %q: want host 127.0.0.1", variable, addr)
	}
	p, _ := strconv.Atoi(port)
	if name, ok := c.byPort[p]; ok {
		return name, c.services[name]
	}
	for _, name := range c.names {
		s := c.services[name]
		if s.NetworkMode != "host" {
			continue
		}
		cmd := s.Command
		if i := slices.Index(cmd, "--port"); i >= 0 && i+1 < len(cmd) && cmd[i+1] == port {
			return name, s
		}
	}
	t.Errorf("%s: no service listens on %s", variable, addr)
	return "", nil
}

// containerPort returns the container port that s publishes as hostPort.
func containerPort(s *service, hostPort string) string {
	for _, p := range s.Ports {
		if parts := strings.Split(p, ":"); len(parts) == 3 && parts[1] == hostPort {
			return parts[2]
		}
	}
	return ""
}

func split(v string) []string {
	var out []string
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

func imageIs(s *service, repo string) bool {
	return strings.HasPrefix(s.Image, repo+":")
}

func TestEveryTestenvVariableHasItsServices(t *testing.T) {
	c := load(t)

	// The list above must cover every DISTLOCK_ variable that testenv reads.
	re := regexp.MustCompile(`"(DISTLOCK_[A-Z_]+)"`)
	files, err := filepath.Glob("../testenv/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("testenv sources: %v", err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			if _, other := notServerVars[m[1]]; !other && !slices.Contains(serverVars, m[1]) {
				t.Errorf("%s: testenv reads %s, which this test does not know: give it a service in %s and a check here", f, m[1], composeFile)
			}
		}
	}
	for _, v := range serverVars {
		if _, ok := c.exports[v]; !ok {
			t.Errorf("%s: the comment block does not export %s", composeFile, v)
		}
	}
	for v := range c.exports {
		if !slices.Contains(serverVars, v) {
			t.Errorf("%s exports %s, which testenv does not read", composeFile, v)
		}
	}
	used := map[string]bool{}
	use := func(name string) { used[name] = true }

	// One Redis.
	if name, s := c.serviceAt(t, testenv.EnvRedisAddr, c.exports[testenv.EnvRedisAddr]); s != nil {
		use(name)
		if !imageIs(s, "redis") {
			t.Errorf("%s: service %s is not Redis", testenv.EnvRedisAddr, name)
		}
	}

	// Five independent Redis masters.
	redlock := split(c.exports[testenv.EnvRedLockAddrs])
	if len(redlock) != 5 {
		t.Errorf("%s has %d addresses, want 5", testenv.EnvRedLockAddrs, len(redlock))
	}
	seen := map[string]bool{}
	for _, a := range redlock {
		name, s := c.serviceAt(t, testenv.EnvRedLockAddrs, a)
		if s == nil {
			continue
		}
		use(name)
		if seen[name] {
			t.Errorf("%s: service %s twice", testenv.EnvRedLockAddrs, name)
		}
		seen[name] = true
		cmd := strings.Join(s.Command, " ")
		if !imageIs(s, "redis") || strings.Contains(cmd, "replicaof") || strings.Contains(cmd, "cluster-enabled") {
			t.Errorf("%s: service %s is not an independent Redis master", testenv.EnvRedLockAddrs, name)
		}
	}

	// A Redis Cluster, and the service that creates it.
	cluster := split(c.exports[testenv.EnvRedisClusterAddrs])
	if len(cluster) < 3 {
		t.Errorf("%s has %d addresses, want at least 3 masters", testenv.EnvRedisClusterAddrs, len(cluster))
	}
	for _, a := range cluster {
		name, s := c.serviceAt(t, testenv.EnvRedisClusterAddrs, a)
		if s == nil {
			continue
		}
		use(name)
		cmd := s.Command
		if i := slices.Index(cmd, "--cluster-enabled"); i < 0 || i+1 >= len(cmd) || cmd[i+1] != "yes" {
			t.Errorf("%s: service %s has no --cluster-enabled yes", testenv.EnvRedisClusterAddrs, name)
		}
	}
	created := false
	for _, name := range c.names {
		cmd := strings.Join(c.services[name].Command, " ")
		if !strings.Contains(cmd, "--cluster create") {
			continue
		}
		created = true
		use(name)
		for _, a := range cluster {
			if !strings.Contains(cmd, a) {
				t.Errorf("service %s creates a cluster without %s", name, a)
			}
		}
	}
	if !created {
		t.Errorf("no service runs redis-cli --cluster create for %s", testenv.EnvRedisClusterAddrs)
	}

	// A ZooKeeper ensemble of three, with the four-letter words testenv needs.
	zks := split(c.exports[testenv.EnvZooKeeperAddrs])
	if len(zks) != 3 {
		t.Errorf("%s has %d addresses, want an ensemble of 3", testenv.EnvZooKeeperAddrs, len(zks))
	}
	ids := map[string]bool{}
	for _, a := range zks {
		name, s := c.serviceAt(t, testenv.EnvZooKeeperAddrs, a)
		if s == nil {
			continue
		}
		use(name)
		_, port, _ := net.SplitHostPort(a)
		if !imageIs(s, "zookeeper") || containerPort(s, port) != "2181" {
			t.Errorf("%s: service %s is not ZooKeeper's client port", testenv.EnvZooKeeperAddrs, name)
		}
		id := s.Environment["ZOO_MY_ID"]
		if id == "" || ids[id] {
			t.Errorf("service %s: ZOO_MY_ID %q missing or repeated", name, id)
		}
		ids[id] = true
		servers := s.Environment["ZOO_SERVERS"]
		for _, other := range zks {
			if n, _ := c.serviceAt(t, testenv.EnvZooKeeperAddrs, other); !strings.Contains(servers, "="+n+":") {
				t.Errorf("service %s: ZOO_SERVERS %q does not list %s", name, servers, n)
			}
		}
		words := strings.Split(s.Environment["ZOO_4LW_COMMANDS_WHITELIST"], ",")
		for _, w := range []string{"ruok", "srvr"} {
			if !slices.Contains(words, w) {
				t.Errorf("service %s: ZOO_4LW_COMMANDS_WHITELIST lacks %s (testenv uses it)", name, w)
			}
		}
	}

	// An etcd cluster of the version testenv builds; each member advertises the
	// address the variable names.
	eps := split(c.exports[testenv.EnvEtcdEndpoints])
	if len(eps) != 3 {
		t.Errorf("%s has %d endpoints, want a cluster of 3", testenv.EnvEtcdEndpoints, len(eps))
	}
	for _, a := range eps {
		name, s := c.serviceAt(t, testenv.EnvEtcdEndpoints, a)
		if s == nil {
			continue
		}
		use(name)
		if want := "quay.io/coreos/etcd:" + testenv.EtcdVersion; s.Image != want {
			t.Errorf("service %s: image %q, want %q (testenv.EtcdVersion)", name, s.Image, want)
		}
		flags := map[string]string{}
		for _, arg := range s.Command {
			if k, v, ok := strings.Cut(arg, "="); ok {
				flags[k] = v
			}
		}
		if got := flags["--advertise-client-urls"]; got != "http://"+a {
			t.Errorf("service %s: --advertise-client-urls=%s, want http://%s", name, got, a)
		}
		_, port, _ := net.SplitHostPort(a)
		if lu, err := url.Parse(flags["--listen-client-urls"]); err != nil || lu.Port() != containerPort(s, port) {
			t.Errorf("service %s: --listen-client-urls=%s does not listen on the published port %s", name, flags["--listen-client-urls"], containerPort(s, port))
		}
		if flags["--name"] != name || !strings.Contains(flags["--initial-cluster"], name+"=http://"+name+":") {
			t.Errorf("service %s: --name %q / --initial-cluster %q do not name the service", name, flags["--name"], flags["--initial-cluster"])
		}
		if n := strings.Count(flags["--initial-cluster"], "="); n != len(eps) {
			t.Errorf("service %s: --initial-cluster has %d members, want %d", name, n, len(eps))
		}
	}

	// PostgreSQL, with the URL's credentials and database.
	if pu, err := url.Parse(c.exports[testenv.EnvPostgresURL]); err != nil || pu.Scheme != "postgres" {
		t.Errorf("%s: %q is not a postgres:// URL: %v", testenv.EnvPostgresURL, c.exports[testenv.EnvPostgresURL], err)
	} else if name, s := c.serviceAt(t, testenv.EnvPostgresURL, pu.Host); s != nil {
		use(name)
		pass, _ := pu.User.Password()
		user := s.Environment["POSTGRES_USER"]
		if user == "" {
			user = "postgres"
		}
		db := s.Environment["POSTGRES_DB"]
		if db == "" {
			db = user
		}
		if !imageIs(s, "postgres") || pu.User.Username() != user || pass != s.Environment["POSTGRES_PASSWORD"] || strings.TrimPrefix(pu.Path, "/") != db {
			t.Errorf("%s=%s does not match service %s (user %s, password, database %s)", testenv.EnvPostgresURL, pu, name, user, db)
		}
		if pu.Query().Get("sslmode") != "disable" {
			t.Errorf("%s: want sslmode=disable (the container has no TLS)", testenv.EnvPostgresURL)
		}
	}

	// MariaDB, with the DSN's credentials and database.
	if cfg, err := mysql.ParseDSN(c.exports[testenv.EnvMySQLDSN]); err != nil || cfg.Net != "tcp" {
		t.Errorf("%s: %q is not a tcp DSN: %v", testenv.EnvMySQLDSN, c.exports[testenv.EnvMySQLDSN], err)
	} else if name, s := c.serviceAt(t, testenv.EnvMySQLDSN, cfg.Addr); s != nil {
		use(name)
		if !imageIs(s, "mariadb") || cfg.User != "root" || cfg.Passwd != s.Environment["MARIADB_ROOT_PASSWORD"] || cfg.DBName != s.Environment["MARIADB_DATABASE"] || cfg.DBName == "" {
			t.Errorf("%s does not match service %s (root, MARIADB_ROOT_PASSWORD, MARIADB_DATABASE)", testenv.EnvMySQLDSN, name)
		}
	}

	for _, name := range c.names {
		if !used[name] {
			t.Errorf("service %s backs none of testenv's variables", name)
		}
	}
}
