package benchmarks

import (
	"fmt"
	"strings"
	"time"
)

// goals writes the goals of issue 9 with the numbers, met or not. The peers'
// numbers are in the workloads' tables.
func (rep *Report) goals(b *strings.Builder, h string) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("%s Goals\n\n| goal | result | numbers |\n|---|---|---|\n", h)
	p("| redislock uncontended >= 1.0x the faster of redsync and bsm/redislock | %s |\n", rep.uncontendedGoal())
	p("| handoff gap p50 <= %v on every backend with a Waiter | %s |\n", handoffGoal, rep.handoffGoal())
	p("| failover <= ttl (or session timeout) + %.0f%% | %s |\n", failoverSlack*100, rep.failoverGoal())
	p("\n")
}

// uncontendedGoal returns the result and numbers cells of goal 1.
func (rep *Report) uncontendedGoal() string {
	verdict := "met"
	var parts []string
	for _, g := range rep.Config.W1Goroutines {
		ours, o1 := rep.find("redislock", W1, g)
		rs, o2 := rep.find("redsync", W1, g)
		bs, o3 := rep.find("bsm/redislock", W1, g)
		if !(o1 && o2 && o3) || !ours.OK() || !rs.OK() || !bs.OK() {
			verdict = "not measured"
			parts = append(parts, fmt.Sprintf("%s: not measured", goroutines(g)))
			continue
		}
		best, name := rs, "redsync"
		if bs.Rate > rs.Rate {
			best, name = bs, "bsm/redislock"
		}
		ratio := ours.Rate / best.Rate
		if ratio < 1 && verdict == "met" {
			verdict = "not met"
		}
		parts = append(parts, fmt.Sprintf("%s: **%.2fx** (%s vs %s %s ops/s)", goroutines(g), ratio, rate(ours.Rate), name, rate(best.Rate)))
	}
	return verdict + " | " + strings.Join(parts, "; ")
}

// handoffGoal returns the result and numbers cells of goal 2.
func (rep *Report) handoffGoal() string {
	verdict := "met"
	var parts []string
	for _, r := range rep.Results {
		if r.Workload != W2 || r.Role != Ours || !r.Waiter {
			continue
		}
		if !r.OK() {
			parts = append(parts, fmt.Sprintf("%s %s", r.Subject, status(r)))
			if r.Unavailable == "" {
				verdict = "not met"
			}
			continue
		}
		mark := ""
		if r.P50 > handoffGoal {
			verdict, mark = "not met", " (over)"
		}
		parts = append(parts, fmt.Sprintf("%s %s%s", r.Subject, dur(r.P50), mark))
	}
	if rep.partial(W2, true) {
		verdict += " (for the backends measured)"
	}
	return verdict + " | " + strings.Join(parts, ", ")
}

// failoverGoal returns the result and numbers cells of goal 3.
func (rep *Report) failoverGoal() string {
	verdict := "met"
	var parts []string
	for _, r := range rep.Results {
		if r.Workload != W3 || r.Role != Ours || r.Bound <= 0 {
			continue
		}
		if !r.OK() {
			parts = append(parts, fmt.Sprintf("%s %s", r.Subject, status(r)))
			if r.Unavailable == "" {
				verdict = "not met"
			}
			continue
		}
		mark := ""
		if r.Max > time.Duration(float64(r.Bound)*(1+failoverSlack)) {
			verdict, mark = "not met", " (over)"
		}
		parts = append(parts, fmt.Sprintf("%s %.2f%s", r.Subject, float64(r.Max)/float64(r.Bound), mark))
	}
	if rep.partial(W3, false) {
		verdict += " (for the backends measured)"
	}
	return verdict + " | worst failover / bound: " + strings.Join(parts, ", ")
}
