//go:build matrix

package benchmarks

import (
	"context"
	"flag"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/internal/testenv"
)

var (
	outDir = flag.String("matrix.out", "results", "directory for matrix.csv and matrix.md")
	readme = flag.String("matrix.readme", "../README.md", "README whose matrix section is rewritten (empty: none)")
	only   = flag.String("matrix.only", "", "run only the subjects whose name matches this regexp (then the README is left alone)")
	wl     = flag.String("matrix.workloads", "", "comma-separated workloads to run (w1,w2,w3,w4,w5; default all; a selection leaves the README alone)")
)

var servers *Servers

func TestMain(m *testing.M) {
	testenv.Main(m, func(env *testenv.Env) error {
		var err error
		servers, err = StartServers(env)
		return err
	})
}

// TestMatrix runs the whole matrix and writes its files: `make matrix`.
func TestMatrix(t *testing.T) {
	cfg := DefaultConfig()
	out := *readme
	if *wl != "" {
		for _, w := range strings.Split(*wl, ",") {
			cfg.Workloads = append(cfg.Workloads, strings.ToUpper(strings.TrimSpace(w)))
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("-matrix.workloads: %v", err)
		}
		out = ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	// The source measured, before anything runs; the files this run rewrites do
	// not count as changes.
	commit := ReadCommit(ctx, ".", filepath.Join(*outDir, "matrix.csv"), filepath.Join(*outDir, "matrix.md"), *readme)
	subjects := servers.Subjects(cfg)
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			t.Fatalf("-matrix.only: %v", err)
		}
		var keep []Subject
		for _, s := range subjects {
			if re.MatchString(s.Name) {
				keep = append(keep, s)
			}
		}
		subjects, out = keep, ""
	}
	rep, err := Run(ctx, subjects, cfg, commit, servers.Versions(ctx), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteFiles(*outDir, out); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s/matrix.csv and %s/matrix.md (README: %q)", *outDir, *outDir, out)
	for _, r := range rep.Results {
		if r.Err != "" {
			t.Errorf("%s %s (%d): %s", r.Subject, r.Workload, r.Goroutines, r.Err)
		}
		if r.Violations > 0 {
			t.Errorf("%s %s: %d acquisitions overlapped another holder", r.Subject, r.Workload, r.Violations)
		}
	}
}
