//go:build !matrix

package benchmarks

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/distlock/distlock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSmoke runs every workload tiny against memlock, so that CI compiles and runs
// the harness in seconds, without servers.
func TestSmoke(t *testing.T) {
	cfg := SmokeConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := MemlockSubjects(cfg)[0]
	for _, g := range cfg.W1Goroutines {
		r := RunW1Rounds(ctx, []Subject{s}, cfg, g, func(int) string { return "smoke/w1/" })[0]
		if !r.OK() || r.N != cfg.W1Ops || r.Rate <= 0 || r.P50 <= 0 || r.P99 < r.P50 || r.Max < r.P99 ||
			r.Rounds != cfg.W1Rounds || r.RateLo > r.Rate || r.Rate > r.RateHi {
			t.Errorf("W1 with %d goroutines: %+v", g, r)
		}
	}
	r := RunW2Rounds(ctx, []Subject{s, s}, cfg, func(i int) string { return fmt.Sprintf("smoke/w2/%d", i) })[0]
	if !r.OK() || r.N == 0 || r.Gaps == 0 || r.Violations != 0 || r.P50 < 0 || r.Rounds != cfg.W2Rounds {
		t.Errorf("W2: %+v", r)
	}
	r = RunW3(ctx, s, cfg, "smoke/w3/")
	if !r.OK() || r.N != cfg.W3Trials {
		t.Errorf("W3: %+v", r)
	}
	// The key was abandoned, not released: the waiter had to wait for the ttl.
	if r.Max < cfg.TTL/2 || r.Max > 10*cfg.TTL {
		t.Errorf("W3 failover %v, want about the ttl %v", r.Max, cfg.TTL)
	}
}

// TestSmokeW2Rounds checks W2's rounds: the median of the rounds' p50s and
// their spread.
func TestSmokeW2Rounds(t *testing.T) {
	cfg := SmokeConfig()
	cfg.W2Rounds = 3
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := RunW2Rounds(ctx, MemlockSubjects(cfg), cfg, func(int) string { return "smoke/w2r" })[0]
	require.True(t, r.OK(), "%+v", r)
	assert.Equal(t, 3, r.Rounds)
	assert.LessOrEqual(t, r.P50Lo, r.P50)
	assert.LessOrEqual(t, r.P50, r.P50Hi)
	assert.NotEqual(t, "-", spread(r))
}

// TestSmokeW4W5 runs the herd and the many leases tiny on memlock (which has no
// server counter).
func TestSmokeW4W5(t *testing.T) {
	cfg := SmokeConfig()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := MemlockSubjects(cfg)[0]

	r := RunW4(ctx, s, cfg, "smoke/w4")
	t.Logf("W4: n=%d p50=%v p99=%v%s", r.N, r.P50, r.P99, extra(r))
	require.True(t, r.OK(), "W4: %+v", r)
	assert.Equal(t, cfg.W4Waiters, r.Goroutines)
	assert.Equal(t, cfg.W4Handoffs, r.N, "W4 handoffs")
	assert.Equal(t, cfg.W4Handoffs, r.Gaps, "W4 gaps")
	assert.Zero(t, r.Violations)
	assert.Positive(t, r.Rate)
	assert.Less(t, r.ReqPerOp, 0.0, "memlock has no server counter")

	r = RunW5(ctx, s, cfg, "smoke/w5/")
	t.Logf("W5: renewals=%d rate=%.0f/s%s", r.N, r.Rate, extra(r))
	require.True(t, r.OK(), "W5: %+v", r)
	assert.Equal(t, cfg.W5Leases, r.Goroutines)
	assert.Zero(t, r.Lost)
	// Every lease renews about every W5TTL/3: about twice in the window.
	assert.Greater(t, r.N, cfg.W5Leases/2, "renewals")
	assert.Positive(t, r.HeapPerLease)
	// Hold keeps at most one goroutine per lease (to watch a LossNotifier's
	// channel; none with a timer-only chain or a LossWatcher).
	assert.LessOrEqual(t, r.GoroutinesPerLease, 1.1)
	assert.Less(t, r.ReqPerOp, 0.0)

	// A Locker whose TryLock fails records the error in the cell.
	bad := s
	bad.New = func(context.Context, Route) (Client, error) {
		return &lockerClient{l: failLocker{}, ttl: time.Second}, nil
	}
	r = RunW5(ctx, bad, cfg, "smoke/w5bad/")
	assert.Contains(t, r.Err, "acquired 0 of")
	r = RunW4(ctx, bad, cfg, "smoke/w4bad")
	assert.Contains(t, r.Err, "first holder's TryLock")
}

// failLocker fails every call.
type failLocker struct{}

var errFail = errors.New("failLocker")

func (failLocker) TryLock(context.Context, string, time.Duration) (distlock.Lease, error) {
	return distlock.Lease{}, errFail
}

func (failLocker) Renew(context.Context, distlock.Lease, time.Duration) (distlock.Lease, error) {
	return distlock.Lease{}, errFail
}

func (failLocker) Unlock(context.Context, distlock.Lease) error { return errFail }

// TestReport runs the memlock matrix tiny and checks its files: the CSV parses with
// a row per cell and records the commit, matrix.md has everything, and only the
// README's section between the markers changes, to the compact report.
func TestReport(t *testing.T) {
	cfg := SmokeConfig()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	subjects := append(MemlockSubjects(cfg), Subject{Name: "absent", Protocol: "memory", Role: Ours, Workloads: ours, Unavailable: "backend not available"})
	commit := Commit{Hash: "0123456789abcdef0123456789abcdef01234567", Changed: []string{"redislock/renew.go"}}
	rep, err := Run(ctx, subjects, cfg, commit, []KV{{"server", "none"}}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	readme := filepath.Join(dir, "README.md")
	before, after := "# title\n\nintro\n\n"+BeginMarker+"\n", "\n"+EndMarker+"\n\nrest\n"
	if err := os.WriteFile(readme, []byte(before+"old\n"+after), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteFiles(filepath.Join(dir, "results"), readme); err != nil {
		t.Fatal(err)
	}

	b, err := os.ReadFile(filepath.Join(dir, "results", "matrix.csv"))
	if err != nil {
		t.Fatal(err)
	}
	cr := csv.NewReader(bytes.NewReader(b))
	cr.Comment = '#'
	rows, err := cr.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	// Two subjects, each W1 per goroutine count, W2, W3, W4 and W5; plus the
	// header.
	if want := 1 + 2*(len(cfg.W1Goroutines)+4); len(rows) != want {
		t.Errorf("matrix.csv has %d rows, want %d:\n%s", len(rows), want, b)
	}
	for _, want := range []string{"# cores (nproc): ", "# Go: go", "# commit: " + commit.Hash + " with uncommitted changes"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("matrix.csv lacks %q in its header:\n%s", want, b)
		}
	}

	got, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	s := string(got)
	if !strings.HasPrefix(s, before) || !strings.HasSuffix(s, after) || strings.Contains(s, "\nold\n") {
		t.Errorf("README outside the markers changed, or the section was not replaced:\n%s", s)
	}
	// The README has the compact report: the run's facts, goals, one short
	// table per workload with our rows only, and the facts; links to results/.
	for _, want := range []string{
		"- **run**: ", "commit 0123456789ab with uncommitted changes (**dirty tree**: 1 file: redislock/renew.go)",
		"- **machine**: ", "- **load**: ",
		"### Goals", "### W1 uncontended", "### W2 contended handoff", "### W3 failover", "### W4 herd", "### W5 many leases",
		"| memlock | ", "| absent | not measured (backend not available) |",
		"### What else users compare", "**Safe while**", "(results/matrix.md)", "(results/matrix.csv)",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("README section lacks %q:\n%s", want, s)
		}
	}
	// The long tables and the notes are in matrix.md only.
	md, err := os.ReadFile(filepath.Join(dir, "results", "matrix.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, long := range []string{"| subject | role |", "| memlock | ours |", "## Notes on the rows", "- **commit**: " + commit.Hash, "- **settings**: "} {
		if strings.Contains(s, long) {
			t.Errorf("README section has %q, which belongs in matrix.md only", long)
		}
		if !strings.Contains(string(md), long) {
			t.Errorf("matrix.md lacks %q:\n%s", long, md)
		}
	}
}

// TestSmokeW1Interleaved runs W1's one-goroutine cells pair by pair: every subject
// that works makes its pairs, one that fails midway stops there with its error
// and does not stop the others, and an unavailable one is left alone.
func TestSmokeW1Interleaved(t *testing.T) {
	cfg := SmokeConfig()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := MemlockSubjects(cfg)[0], MemlockSubjects(cfg)[0]
	b.Name = "memlock b"
	failing := a
	failing.Name = "failing"
	failing.New = func(ctx context.Context, r Route) (Client, error) {
		c, err := a.New(ctx, r)
		return &failAfter{Client: c, left: 3}, err
	}
	gone := a
	gone.Name, gone.Unavailable = "gone", "not here"
	rs := RunW1Interleaved(ctx, []Subject{a, failing, b, gone}, cfg, func(i int) string { return fmt.Sprintf("smoke/w1i/%d/", i) })
	require.Len(t, rs, 4)
	for _, r := range []Result{rs[0], rs[2]} {
		assert.True(t, r.OK(), "%+v", r)
		assert.Equal(t, cfg.W1Ops, r.N, r.Subject)
		assert.Equal(t, cfg.W1Rounds, r.Rounds, r.Subject)
		assert.Equal(t, 1, r.Goroutines, r.Subject)
		assert.True(t, r.P50 > 0 && r.P50 <= r.P99 && r.P99 <= r.Max, "%+v", r)
		assert.True(t, r.RateLo > 0 && r.RateLo <= r.Rate && r.Rate <= r.RateHi, "%+v", r)
	}
	assert.Contains(t, rs[1].Err, "TryLock")
	assert.Equal(t, "not here", rs[3].Unavailable)
	assert.Zero(t, rs[3].N)
}

// failAfter is a Client whose TryLock fails once left calls have succeeded.
type failAfter struct {
	Client
	left int
}

func (c *failAfter) TryLock(ctx context.Context, key string) (Held, error) {
	if c.left == 0 {
		return nil, errors.New("broken")
	}
	c.left--
	return c.Client.TryLock(ctx, key)
}

// TestW1FromPairs: a cell's rate from its pairs is the median of its blocks'
// rates, with their lowest and highest.
func TestW1FromPairs(t *testing.T) {
	ms := time.Millisecond
	var r Result
	w1FromPairs(&r, []time.Duration{ms, ms, ms, 2 * ms, 2 * ms, 2 * ms}, 2)
	assert.Equal(t, 6, r.N)
	assert.Equal(t, 2, r.Rounds)
	assert.Equal(t, 9*ms, r.Elapsed)
	assert.InDelta(t, 750, r.Rate, 1e-9) // the mean of the middle two: 1000 and 500
	assert.InDelta(t, 500, r.RateLo, 1e-9)
	assert.InDelta(t, 1000, r.RateHi, 1e-9)
	assert.Equal(t, ms, r.P50)
	assert.Equal(t, 2*ms, r.Max)
}
