//go:build !matrix

package benchmarks

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
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
		if !r.OK() || r.N != cfg.W1Ops || r.Rate <= 0 || r.P50 <= 0 || r.P99 < r.P50 || r.Max < r.P99 {
			t.Errorf("W1 with %d goroutines: %+v", g, r)
		}
	}
	r := RunW2(ctx, s, cfg, "smoke/w2")
	if !r.OK() || r.N == 0 || r.Gaps == 0 || r.Violations != 0 || r.P50 < 0 {
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

// TestReport runs the memlock matrix tiny and checks its files: the CSV parses with
// a row per cell and records the commit, matrix.md has everything, and only the
// README's section between the markers changes, to the compact report.
func TestReport(t *testing.T) {
	cfg := SmokeConfig()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	subjects := append(MemlockSubjects(cfg), Subject{Name: "absent", Protocol: "memory", Role: Ours, Workloads: all, Unavailable: "backend not available"})
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
	// Two subjects, each W1 per goroutine count, W2 and W3; plus the header.
	if want := 1 + 2*(len(cfg.W1Goroutines)+2); len(rows) != want {
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
	if !strings.HasPrefix(s, before) || !strings.HasSuffix(s, after) || strings.Contains(s, "old\n") {
		t.Errorf("README outside the markers changed, or the section was not replaced:\n%s", s)
	}
	// The README has the compact report: the run's facts, goals, one short
	// table per workload with our rows only, and the facts; links to results/.
	for _, want := range []string{
		"- **run**: ", "commit 0123456789ab with uncommitted changes (**dirty tree**: 1 file: redislock/renew.go)",
		"- **machine**: ", "- **load**: ",
		"### Goals", "### W1 uncontended", "### W2 contended handoff", "### W3 failover",
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
