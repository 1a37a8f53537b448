//go:build !matrix

package benchmarks

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// w1 is a W1 result of protocol with g goroutines.
func w1(subject, protocol string, role Role, g int, rate float64) Result {
	return Result{Subject: subject, Protocol: protocol, Role: role, Workload: W1, Goroutines: g, N: 100, Rate: rate, Elapsed: time.Second}
}

// TestPeerGoal: issue 16's W1 goal per protocol, and a ratio under its goal is out
// of reach only when the protocol's floor in the same run is under the goal too.
func TestPeerGoal(t *testing.T) {
	fence := func(g int, rate float64) Result { return w1("redis raw floor + fence", "redis", Floor, g, rate) }
	cases := []struct {
		name    string
		results []Result
		want    []string
	}{
		{"redis over 0.95", []Result{w1("redislock", "redis", Ours, 1, 960), w1("bsm/redislock", "redis", Peer, 1, 1000), fence(1, 990)},
			[]string{"met | ", "redislock 1 goroutine 0.960x (redis raw floor + fence: 0.990x)"}},
		{"redis under, floor over", []Result{w1("redislock", "redis", Ours, 1, 900), w1("bsm/redislock", "redis", Peer, 1, 1000), fence(1, 990)},
			[]string{"not met | ", "redislock 1 goroutine 0.900x (under) (redis raw floor + fence: 0.990x)"}},
		{"redis under, floor under", []Result{w1("redislock", "redis", Ours, 16, 900), w1("bsm/redislock", "redis", Peer, 16, 1000), fence(16, 940)},
			[]string{"met where reachable (1 out of reach in this run) | ", "redislock 16 goroutines 0.900x (under, out of reach: the floor is under the goal too) (redis raw floor + fence: 0.940x)"}},
		{"one reachable miss makes it not met", []Result{
			w1("redislock", "redis", Ours, 16, 900), w1("bsm/redislock", "redis", Peer, 16, 1000), fence(16, 940),
			w1("etcdlock", "etcd", Ours, 1, 990), w1("etcd concurrency.Mutex", "etcd", Peer, 1, 1000)},
			[]string{"not met | ", "etcdlock 1 goroutine 0.990x (under)"}},
		{"postgres: 16 goroutines only, and 16 > 2x 1", []Result{
			w1("sqllock/postgres", "postgres", Ours, 1, 1000), w1("postgres advisory lock", "postgres", Peer, 1, 1500),
			w1("sqllock/postgres", "postgres", Ours, 16, 1900), w1("postgres advisory lock", "postgres", Peer, 16, 3000)},
			[]string{"not met | ", "sqllock/postgres 16 goroutines 0.633x; 16 goroutines / 1 goroutine 1.9x (under)"}},
		{"postgres met", []Result{
			w1("sqllock/postgres", "postgres", Ours, 1, 1000), w1("postgres advisory lock", "postgres", Peer, 1, 1500),
			w1("sqllock/postgres", "postgres", Ours, 16, 4800), w1("postgres advisory lock", "postgres", Peer, 16, 7000)},
			[]string{"met | ", "sqllock/postgres 16 goroutines 0.686x; 16 goroutines / 1 goroutine 4.8x"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := (&Report{Results: c.results}).peerGoal()
			for _, w := range c.want {
				assert.Contains(t, got, w)
			}
			if strings.HasPrefix(c.want[0], "met") {
				assert.True(t, strings.HasPrefix(got, c.want[0]), got)
			}
			assert.NotContains(t, got, "1 goroutine 0.667x", "postgres at 1 goroutine has no goal")
		})
	}
}

// TestSQLiteAndZKGoals: the p99 bound of SQLite at 16 goroutines, and zklock's
// handoff gap against zk.Lock's.
func TestSQLiteAndZKGoals(t *testing.T) {
	sq := w1("sqllock/sqlite", "sqlite", Ours, 16, 1000)
	sq.P99 = 60 * time.Millisecond
	rep := &Report{Results: []Result{sq}}
	assert.Equal(t, "not met | sqllock/sqlite p99 60.0 ms", rep.sqliteGoal())
	rep.Results[0].P99 = 7600 * time.Microsecond
	assert.Equal(t, "met | sqllock/sqlite p99 7.60 ms", rep.sqliteGoal())

	zk := Result{Subject: "zklock", Protocol: "zookeeper", Role: Ours, Workload: W2, Goroutines: 16, N: 100, Rate: 900, P50: 363 * time.Microsecond}
	peer := Result{Subject: "go-zookeeper zk.Lock", Protocol: "zookeeper", Role: Peer, Workload: W2, Goroutines: 16, N: 100, Rate: 800, P50: 678 * time.Microsecond}
	rep = &Report{Results: []Result{zk, peer}}
	assert.Equal(t, "met | zklock 0.363 ms, go-zookeeper zk.Lock 0.678 ms", rep.zkHandoffGoal())
	rep.Results[0].P50 = 700 * time.Microsecond
	assert.True(t, strings.HasPrefix(rep.zkHandoffGoal(), "not met"))
	assert.Equal(t, "not measured | -", (&Report{}).zkHandoffGoal())
}
