package benchmarks

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/distlock/distlock/driver"
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
	run := "b" + strings.ToLower(driver.NewToken()[:8])
	add := func(r Result) {
		rep.Results = append(rep.Results, r)
		if st := status(r); st != "" {
			logf("%-28s %s g=%-2d %s", r.Subject, r.Workload, r.Goroutines, st)
			return
		}
		logf("%-28s %s g=%-2d n=%-5d rate=%8.1f/s p50=%-10s p99=%-10s max=%-10s violations=%d%s",
			r.Subject, r.Workload, r.Goroutines, r.N, r.Rate, dur(r.P50), dur(r.P99), dur(r.Max), r.Violations, extra(r))
	}
	// Protocol by protocol: W1 and W2 with the protocol's subjects taking turns
	// (W1 with one goroutine pair by pair, else round by round), then W3, W4 and
	// W5 subject by subject. cfg.Workloads selects the workloads.
	var order []string
	groups := map[string][]int{}
	for i, s := range subjects {
		if _, ok := groups[s.Protocol]; !ok {
			order = append(order, s.Protocol)
		}
		groups[s.Protocol] = append(groups[s.Protocol], i)
	}
	base := func(i int) string { return fmt.Sprintf("%s-%d", run, i) }
	runs := func(s Subject, w string) bool { return cfg.Runs(w) && s.Runs(w) }
	for _, proto := range order {
		// The protocol's subjects that run w, and their indexes in subjects.
		of := func(w string) ([]Subject, []int) {
			var ss []Subject
			var idx []int
			for _, i := range groups[proto] {
				if runs(subjects[i], w) {
					ss, idx = append(ss, subjects[i]), append(idx, i)
				}
			}
			return ss, idx
		}
		if w1, idx := of(W1); len(w1) > 0 {
			for _, g := range cfg.W1Goroutines {
				prefix := func(j int) string { return fmt.Sprintf("%s-w1-%d-", base(idx[j]), g) }
				var rs []Result
				if g == 1 {
					rs = RunW1Interleaved(ctx, w1, cfg, prefix) // pair by pair
				} else {
					rs = RunW1Rounds(ctx, w1, cfg, g, prefix)
				}
				for _, r := range rs {
					add(r)
				}
			}
		}
		if w2, idx := of(W2); len(w2) > 0 {
			for _, r := range RunW2Rounds(ctx, w2, cfg, func(j int) string { return base(idx[j]) + "-w2" }) {
				add(r)
			}
		}
		for _, i := range groups[proto] {
			s := subjects[i]
			if runs(s, W3) {
				add(RunW3(ctx, s, cfg, base(i)+"-w3-"))
			}
			if runs(s, W4) {
				add(RunW4(ctx, s, cfg, base(i)+"-w4"))
			}
			if runs(s, W5) {
				add(RunW5(ctx, s, cfg, base(i)+"-w5-"))
			}
		}
	}
	rep.Took = time.Since(rep.Started)
	rep.LoadAfter = LoadAvg()
	return rep, nil
}

// extra is the log's end of a line for the measures of W2's rounds, W4 and W5.
func extra(r Result) string {
	switch r.Workload {
	case W2:
		return fmt.Sprintf(" rounds=%d p50 spread=%s", r.Rounds, spread(r))
	case W4:
		return fmt.Sprintf(" gaps=%d requests/handoff=%s", r.Gaps, perOp(r))
	case W5:
		return fmt.Sprintf(" requests/renewal=%s cpu/renewal=%s heap/lease=%.0fB goroutines/lease=%.2f lost=%d",
			perOp(r), dur(r.CPUPerOp), r.HeapPerLease, r.GoroutinesPerLease, r.Lost)
	}
	return ""
}
