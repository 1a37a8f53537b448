package benchmarks

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/distlock/distlock"
)

// Run runs every workload of every subject, one cell at a time, and returns the
// report. commit is the source measured (see ReadCommit), versions are the
// servers' (see Servers.Versions); logf, if not nil, gets a line per cell as it
// ends.
func Run(ctx context.Context, subjects []Subject, cfg Config, commit Commit, versions []KV, logf func(format string, args ...any)) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	rep := &Report{Started: time.Now(), Config: cfg, Commit: commit, Machine: MachineInfo(), Cores: runtime.NumCPU(), LoadBefore: LoadAvg()}
	rep.Versions = append(LibraryVersions(), versions...)
	// Keys are new in every run: letters, digits and '-' only, so that every
	// backend takes them as they are.
	run := "b" + strings.ToLower(distlock.NewToken()[:8])
	add := func(r Result) {
		rep.Results = append(rep.Results, r)
		if st := status(r); st != "" {
			logf("%-28s %s g=%-2d %s", r.Subject, r.Workload, r.Goroutines, st)
			return
		}
		logf("%-28s %s g=%-2d n=%-5d rate=%8.1f/s p50=%-10s p99=%-10s max=%-10s violations=%d",
			r.Subject, r.Workload, r.Goroutines, r.N, r.Rate, dur(r.P50), dur(r.P99), dur(r.Max), r.Violations)
	}
	// Protocol by protocol: W1 with the protocol's subjects taking turns, then W2
	// and W3 subject by subject.
	var order []string
	groups := map[string][]int{}
	for i, s := range subjects {
		if _, ok := groups[s.Protocol]; !ok {
			order = append(order, s.Protocol)
		}
		groups[s.Protocol] = append(groups[s.Protocol], i)
	}
	base := func(i int) string { return fmt.Sprintf("%s-%d", run, i) }
	for _, proto := range order {
		var w1 []Subject
		var idx []int
		for _, i := range groups[proto] {
			if subjects[i].Runs(W1) {
				w1, idx = append(w1, subjects[i]), append(idx, i)
			}
		}
		for _, g := range cfg.W1Goroutines {
			for _, r := range RunW1Rounds(ctx, w1, cfg, g, func(j int) string { return fmt.Sprintf("%s-w1-%d-", base(idx[j]), g) }) {
				add(r)
			}
		}
		for _, i := range groups[proto] {
			s := subjects[i]
			if s.Runs(W2) {
				add(RunW2(ctx, s, cfg, base(i)+"-w2"))
			}
			if s.Runs(W3) {
				add(RunW3(ctx, s, cfg, base(i)+"-w3-"))
			}
		}
	}
	rep.Took = time.Since(rep.Started)
	rep.LoadAfter = LoadAvg()
	return rep, nil
}
