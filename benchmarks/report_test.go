//go:build !matrix

package benchmarks

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// testReport is a small report of the redis protocol, with numbers chosen so
// that the compact tables' cells can be checked exactly: bsm/redislock is the
// best peer with 1 goroutine, redsync with 16.
func testReport() *Report {
	cfg := Config{TTL: 3 * time.Second, W1Goroutines: []int{1, 16}, W2Waiters: 16, W2Hold: time.Millisecond, W3Trials: 3,
		W4Waiters: 1000, W4Clients: 4, W4Hold: time.Millisecond, W4Handoffs: 30, W4Time: 10 * time.Second,
		W5Leases: 10000, W5TTL: 3 * time.Second, W5Time: 6 * time.Second, W5Parallel: 64}
	res := func(subject string, role Role, w string, g int, rate float64) Result {
		return Result{Subject: subject, Protocol: "redis", Role: role, Workload: w, Goroutines: g, N: 100, Rate: rate,
			Elapsed: time.Second, Waiter: role == Ours, Wakeup: "pub/sub (Waiter)", Bound: 3 * time.Second, BoundKind: "ttl"}
	}
	w2 := func(r Result, p50 time.Duration, violations int) Result {
		r.P50, r.Violations = p50, violations
		return r
	}
	w3 := func(r Result, max time.Duration) Result {
		r.Max, r.P50, r.N = max, max, 3
		return r
	}
	w4 := func(r Result, p50 time.Duration, perOp float64) Result {
		r.P50, r.P99, r.ReqPerOp, r.Gaps, r.N, r.Counter = p50, 2*p50, perOp, 30, 30, "Redis INFO stats total_commands_processed"
		return r
	}
	w5 := func(r Result) Result {
		r.ReqPerOp, r.CPUPerOp, r.HeapPerLease, r.GoroutinesPerLease, r.Lost = 1, 50*time.Microsecond, 1540, 0.04, 2
		return r
	}
	floor := func(g int, rate float64) Result {
		r := res("redis raw floor", Floor, W1, g, rate)
		r.Baseline = true
		return r
	}
	absent := res("absent", Ours, W1, 1, 0)
	absent.Unavailable = "no server"
	return &Report{
		Started: time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC), Took: 222 * time.Second, Config: cfg,
		Commit:  Commit{Hash: "0123456789abcdef0123456789abcdef01234567"},
		Machine: []KV{{"CPU", "Test CPU"}, {"cores (nproc)", "2"}}, Cores: 2,
		Versions: []KV{{"Go", "go1.26"}}, LoadBefore: "0.10 0.20 0.30", LoadAfter: "0.40 0.50 0.60",
		Results: []Result{
			res("redislock", Ours, W1, 1, 1000), res("redsync", Peer, W1, 1, 900), res("bsm/redislock", Peer, W1, 1, 1100), floor(1, 1200),
			res("redislock", Ours, W1, 16, 8000), res("redsync", Peer, W1, 16, 9000), res("bsm/redislock", Peer, W1, 16, 8500), floor(16, 10000),
			w2(res("redislock", Ours, W2, 16, 400), time.Millisecond, 2), w3(res("redislock", Ours, W3, 1, 0), 3050*time.Millisecond),
			w2(res("redsync", Peer, W2, 16, 80), 7500*time.Microsecond, 0), w3(res("redsync", Peer, W3, 1, 0), 3200*time.Millisecond),
			w2(res("bsm/redislock", Peer, W2, 16, 10), 100*time.Millisecond, 0), w3(res("bsm/redislock", Peer, W3, 1, 0), 3020*time.Millisecond),
			absent, w4(res("redislock", Ours, W4, 1000, 20), 500*time.Microsecond, 4.5),
			w5(res("redislock", Ours, W5, 10000, 9000)),
		},
	}
}

// TestCompactLayout checks the README section cell by cell: our rows only, each
// next to the best peer of its protocol (per goroutine count) and the floor or
// the bound, with the ratios; the goals; and nothing of the long tables.
func TestCompactLayout(t *testing.T) {
	s := testReport().Compact("benchmarks/results")
	for _, want := range []string{
		"- **run**: 2026-12-01 08:30 UTC, 3m42s; commit 0123456789ab, clean tree\n",
		"- **machine**: Test CPU, 2 cores\n",
		"- **load**: 0.10 at the start, 0.40 at the end (1-minute average, 2 cores)\n",
		"| redislock uncontended >= 1.0x the faster of redsync and bsm/redislock (issue 9) | not met | 1 goroutine: **0.91x** (1000 vs bsm/redislock 1100 ops/s); 16 goroutines: **0.89x** (8000 vs redsync 9000 ops/s) |\n",
		"| handoff gap p50 <= 2ms on every backend with a Waiter | met | redislock 1.00 ms |\n",
		"| failover <= ttl (or session timeout) + 10% | met | worst failover / bound: redislock 1.02 |\n",
		"| redislock | 1000 / 8000 | bsm/redislock 1100 / redsync 9000 | 0.91 / 0.89 | 1200 / 10000 | 0.83 / 0.80 |\n",
		"| absent | not measured (no server) | | | | |\n",
		"| redislock | pub/sub (Waiter) | 400 (**2 overlapping holders**) | 1.00 ms | - | redsync: 80.0, 7.50 ms | 5.00 |\n",
		"| redislock | 3.05 s | ttl 3.00 s | 1.02 | bsm/redislock: 3.02 s, ttl 3.00 s | 1.01 |\n",
		"| herd of 1000 waiters (W4): handoff gap p50 <= 2ms and server requests per handoff <= 25 per server on every backend with a Waiter | met | gap p50, requests per handoff: redislock 0.500 ms, 4.5 req |\n",
		"| memory per held lease < 2 KiB (W5: live heap, 10000 leases under Hold) | met | heap per lease: redislock 1540 B |\n",
		"### W4 herd: 1000 waiters on one key", "| redislock | pub/sub (Waiter) | 30 | 20.0 | 0.500 ms | 1.00 ms | 4.5 |\n",
		"### W5 many leases: 10000 keys held at once", "| redislock | 9000 | 2 | 1.0 | 0.050 ms | 1540 B | 0.04 |\n",
		"[matrix.md](benchmarks/results/matrix.md)", "[matrix.csv](benchmarks/results/matrix.csv)",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("compact report lacks %q:\n%s", want, s)
		}
	}
	measured, _, _ := strings.Cut(s, "### What else users compare") // the facts have a row per peer
	for _, line := range strings.Split(measured, "\n") {
		for _, other := range []string{"| redsync |", "| bsm/redislock |", "| redis raw floor |", "| subject | role |"} {
			if strings.HasPrefix(line, other) {
				t.Errorf("compact report has a row of its own for a peer or floor, or a long table: %q", line)
			}
		}
	}
	// The same tables lead matrix.md, which adds the long ones.
	full := testReport().Full()
	for _, want := range []string{"| redislock | 1000 / 8000 | bsm/redislock 1100 / redsync 9000 |", "| redsync | peer |", "| redis raw floor | floor |",
		"| redislock | pub/sub (Waiter) | 30 | 20.0 | 0.500 ms | 1.00 ms | 4.5 | Redis INFO stats total_commands_processed |\n"} {
		if !strings.Contains(full, want) {
			t.Errorf("matrix.md lacks %q:\n%s", want, full)
		}
	}
}

// TestCSVRoundTrip checks that ReadCSV gets back exactly what CSV wrote, so
// that `make render` shows the numbers that were measured.
func TestCSVRoundTrip(t *testing.T) {
	rep := testReport()
	rep.Commit.Changed = []string{"a.go", "dir/b, c.go"}
	rep.Results[0].P50 = 1234567 * time.Nanosecond
	rep.Results[0].Rate = 1234.56789
	rep.Results[0].Elapsed = 4050505050 * time.Nanosecond
	rep.Results[0].Rounds, rep.Results[0].RateLo, rep.Results[0].RateHi = 6, 1000.125, 1500.5
	rep.Results[1].Err = "TryLock \"k\": a, b | c\nsecond line"
	rep.Results[2].Note = `a note, with "quotes"`
	b, err := rep.CSV()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadCSV(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("ReadCSV: %v\n%s", err, b)
	}
	if !reflect.DeepEqual(got, rep) {
		t.Errorf("ReadCSV(CSV()) differs from the report:\ngot  %+v\nwant %+v", got, rep)
	}
	if got.Full() != rep.Full() || got.Compact("x") != rep.Compact("x") {
		t.Error("the Markdown rendered from the CSV differs from the run's")
	}
	if _, err := ReadCSV(strings.NewReader("# date: x\nsubject,protocol\n")); err == nil {
		t.Error("ReadCSV took a CSV without the run line")
	}
}

// TestMergeW1 checks that a W1 cell's rate is the median of its rounds' rates,
// so one round slowed by other work on the machine does not move it, with the
// lowest and highest as the spread, while counts add up.
func TestMergeW1(t *testing.T) {
	round := func(n int, elapsed time.Duration) Result {
		return Result{Workload: W1, N: n, Elapsed: elapsed, Rate: float64(n) / elapsed.Seconds(),
			samples: []time.Duration{time.Millisecond}}
	}
	r := mergeW1([]Result{round(1000, time.Second), round(100, time.Second), round(1200, time.Second)})
	if r.Rate != 1000 || r.RateLo != 100 || r.RateHi != 1200 || r.Rounds != 3 || r.N != 2300 {
		t.Errorf("mergeW1 of 1000, 100 and 1200 ops/s: rate %v (%v-%v), rounds %d, n %d; want 1000 (100-1200), 3, 2300",
			r.Rate, r.RateLo, r.RateHi, r.Rounds, r.N)
	}
	if r := mergeW1([]Result{round(1000, time.Second), round(3000, time.Second)}); r.Rate != 2000 {
		t.Errorf("mergeW1 of 1000 and 3000 ops/s: rate %v, want 2000", r.Rate)
	}
	if got := rateSpread(r); got != "1000 (100-1200)" {
		t.Errorf("rateSpread = %q", got)
	}
}

// TestReadCommit reads a real git repository: clean, then with a change, a
// rename and an untracked file, and with the run's own output skipped.
func TestReadCommit(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	write("a.go", "a")
	write("sub/b.go", "b")
	write("sub/results/matrix.csv", "old")
	git("add", ".")
	git("commit", "-q", "-m", "one")
	head := git("rev-parse", "HEAD")

	c := ReadCommit(ctx, filepath.Join(dir, "sub"))
	if c.Hash != head || c.Err != "" || !c.Clean() {
		t.Fatalf("clean tree: got %+v, want hash %s and clean", c, head)
	}
	if got, want := c.Describe(12), head[:12]+", clean tree"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}

	write("a.go", "changed")
	git("mv", "sub/b.go", "sub/c.go")
	write("sub/new.go", "untracked")
	write("sub/results/matrix.csv", "new run")
	c = ReadCommit(ctx, filepath.Join(dir, "sub"), filepath.Join(dir, "sub", "results", "matrix.csv"))
	if want := []string{"a.go", "sub/c.go", "sub/new.go"}; c.Hash != head || c.Err != "" || !reflect.DeepEqual(c.Changed, want) {
		t.Errorf("dirty tree: got %+v, want hash %s and changes %q", c, head, want)
	}
	if got, want := c.Describe(0), head+" with uncommitted changes (**dirty tree**: 3 files: a.go, sub/c.go, sub/new.go)"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	c = ReadCommit(ctx, filepath.Join(dir, "sub"))
	if len(c.Changed) != 4 {
		t.Errorf("without skip, the changed output file should count: %+v", c)
	}

	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(dir))
	c = ReadCommit(ctx, t.TempDir())
	if c.Hash != "" || c.Err == "" || c.Clean() || !strings.HasPrefix(c.Describe(12), "unknown (git rev-parse: ") {
		t.Errorf("outside a repository: got %+v, %q", c, c.Describe(12))
	}
}

func TestCommitDescribe(t *testing.T) {
	h := "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		c    Commit
		want string
	}{
		{Commit{Err: "git: not found"}, "unknown (git: not found)"},
		{Commit{Hash: h, Err: "status failed"}, "0123456789ab; whether the tree had uncommitted changes is unknown (status failed)"},
		{Commit{Hash: h}, "0123456789ab, clean tree"},
		{Commit{Hash: h, Changed: []string{"x.go"}}, "0123456789ab with uncommitted changes (**dirty tree**: 1 file: x.go)"},
		{Commit{Hash: h, Changed: []string{"1", "2", "3", "4", "5", "6", "7"}}, "0123456789ab with uncommitted changes (**dirty tree**: 7 files: 1, 2, 3, 4, 5, and 2 more)"},
	} {
		if got := tc.c.Describe(12); got != tc.want {
			t.Errorf("%+v.Describe(12) = %q, want %q", tc.c, got, tc.want)
		}
	}
}

// TestFacts checks AllFacts against the matrix's rows: every row names a
// subject, every backend of ours has a row, and every row states its safety
// assumptions in the same form (the topics that apply to its kind of server).
func TestFacts(t *testing.T) {
	subjects := map[string]Subject{}
	for _, s := range Catalog(DefaultConfig(), Addrs{}) {
		subjects[s.Name] = s
	}
	facts := map[string]Facts{}
	for _, f := range AllFacts {
		s, ok := subjects[f.Subject]
		if !ok {
			t.Errorf("facts of %q, which is no row of the matrix", f.Subject)
			continue
		}
		facts[f.Subject] = f
		sf := f.Safe
		for topic, v := range map[string]string{"persistence": sf.Persistence, "failover": sf.Failover, "clocks": sf.Clocks} {
			if v == "" {
				t.Errorf("%s: no %s assumption", f.Subject, topic)
			}
		}
		if (s.Protocol == "redis" || s.Protocol == "redlock") && sf.Eviction == "" {
			t.Errorf("%s: a Redis lock without its eviction assumption", f.Subject)
		}
		if s.Role == Ours && s.Protocol != "memory" && sf.Timeouts == "" {
			t.Errorf("%s: no ttl and timeouts assumption", f.Subject)
		}
		for _, cell := range []string{f.Consistency, f.Fence, f.AutoRelease, f.Wakeup, f.Expiry, f.Needs, sf.Eviction, sf.Persistence, sf.Failover, sf.Clocks, sf.Timeouts, sf.Other} {
			if strings.ContainsAny(cell, "|\n") {
				t.Errorf("%s: a cell with '|' or a newline breaks the table: %q", f.Subject, cell)
			}
		}
	}
	for _, s := range Catalog(DefaultConfig(), Addrs{}) {
		if s.Role == Ours && s.Runs(W3) {
			if _, ok := facts[s.Name]; !ok {
				t.Errorf("backend %q has no facts", s.Name)
			}
		}
	}
}

// TestRenderCommittedCSV checks that the committed results/matrix.csv, which an
// older run may have written without the columns of W2's rounds, W4 and W5,
// still reads and renders (`make render`).
func TestRenderCommittedCSV(t *testing.T) {
	f, err := os.Open(filepath.Join("results", "matrix.csv"))
	if err != nil {
		t.Fatalf("the committed matrix: %v", err) // it is in the repository: never skip
	}
	defer f.Close()
	rep, err := ReadCSV(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := rep.Render(dir, ""); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "matrix.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Goals", "### W1 uncontended", "### W2 contended handoff", "| herd of "} {
		if !strings.Contains(string(md), want) {
			t.Errorf("matrix.md rendered from results/matrix.csv lacks %q", want)
		}
	}
}
