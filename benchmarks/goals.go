package benchmarks

import (
	"fmt"
	"strings"
	"time"
)

// goals writes the goals of issues 9 and 16 with the numbers, met or not. The peers'
// numbers are in the workloads' tables.
func (rep *Report) goals(b *strings.Builder, h string) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("%s Goals\n\n| goal | result | numbers |\n|---|---|---|\n", h)
	p("| redislock uncontended >= 1.0x the faster of redsync and bsm/redislock | %s |\n", rep.uncontendedGoal())
	p("| uncontended (W1) >= 1.0x the best peer of each protocol (PostgreSQL: >= %.1fx its advisory lock at 16 goroutines) | %s |\n", pgAdvisoryGoal, rep.peerGoal())
	p("| handoff gap p50 <= %v on every backend with a Waiter | %s |\n", handoffGoal, rep.handoffGoal())
	p("| failover <= ttl (or session timeout) + %.0f%% | %s |\n", failoverSlack*100, rep.failoverGoal())
	p("| herd of %d waiters (W4): handoff gap p50 <= %v and server requests per handoff <= %d per server on every backend with a Waiter | %s |\n",
		max(rep.Config.W4Waiters, DefaultConfig().W4Waiters), handoffGoal, herdRequestsGoal, rep.herdGoal())
	p("| memory per held lease < %d KiB (W5: live heap, %s leases under Hold) | %s |\n", leaseMemoryGoal/1024, orDash(rep.leasesText()), rep.leaseGoal())
	p("\n")
}

// herdRequestsGoal bounds W4's server requests per handoff and server: a
// constant, whatever the number of waiters (a RedLock handoff must acquire and
// release on every master: its bound is herdRequestsGoal per master).
// leaseMemoryGoal bounds W5's heap per held lease.
const (
	herdRequestsGoal = 25
	leaseMemoryGoal  = 2048
)

// serversOf is the number of servers that every operation of protocol reaches.
func serversOf(protocol string) int {
	if protocol == "redlock" {
		return RedLockMasters
	}
	return 1
}

// leasesText is W5's number of leases, or "" for a Config without W5.
func (rep *Report) leasesText() string {
	if rep.Config.W5Leases == 0 {
		return ""
	}
	return fmt.Sprint(rep.Config.W5Leases)
}

// perBackend returns the result and numbers cells of a goal that each of our
// backends meets or misses on its own in workload w (only those with a Waiter
// when waiters, and only those include accepts when it is not nil): cell formats one backend's numbers and reports whether they
// miss the goal; a backend whose cell failed misses it, one not available here
// is listed and does not.
func (rep *Report) perBackend(w string, waiters bool, include func(Result) bool, prefix string, cell func(r Result) (string, bool)) string {
	verdict := "met"
	var parts []string
	for _, r := range rep.Results {
		if r.Workload != w || r.Role != Ours || (waiters && !r.Waiter) || (include != nil && !include(r)) {
			continue
		}
		if !r.OK() {
			parts = append(parts, fmt.Sprintf("%s %s", r.Subject, status(r)))
			if r.Unavailable == "" {
				verdict = "not met"
			}
			continue
		}
		text, over := cell(r)
		if over {
			verdict, text = "not met", text+" (over)"
		}
		parts = append(parts, r.Subject+" "+text)
	}
	if len(parts) == 0 {
		return "not measured | -"
	}
	if rep.partial(w, waiters) {
		verdict += " (for the backends measured)"
	}
	return verdict + " | " + prefix + strings.Join(parts, ", ")
}

// herdGoal returns the result and numbers cells of the herd's goal.
func (rep *Report) herdGoal() string {
	return rep.perBackend(W4, true, nil, "gap p50, requests per handoff: ", func(r Result) (string, bool) {
		servers, per := serversOf(r.Protocol), ""
		if servers > 1 && r.ReqPerOp >= 0 {
			per = fmt.Sprintf(" (%.1f per master)", r.ReqPerOp/float64(servers))
		}
		return fmt.Sprintf("%s, %s req%s", dur(r.P50), perOp(r), per),
			r.P50 > handoffGoal || r.ReqPerOp > herdRequestsGoal*float64(servers)
	})
}

// leaseGoal returns the result and numbers cells of the memory per lease goal.
func (rep *Report) leaseGoal() string {
	return rep.perBackend(W5, false, nil, "heap per lease: ", func(r Result) (string, bool) {
		return bytesPer(r.HeapPerLease), r.HeapPerLease >= leaseMemoryGoal
	})
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

// pgAdvisoryGoal is issue 16's goal for sqllock/postgres against the advisory lock,
// which takes no row, no ttl and no fence: only at 16 goroutines, where a row
// protocol's commits can overlap.
const pgAdvisoryGoal = 0.5

// peerGoal returns the result and numbers cells of the goal of W1 against each
// protocol's best peer. Where the protocol has a floor that is not its baseline
// (PostgreSQL's lease row: two UPDATEs by hand; Redis' and RedLock's fenced
// floors), its ratio to the peer is shown too: what such a protocol can reach at
// all, when the peer does less (no row, no fence).
func (rep *Report) peerGoal() string {
	verdict := "met"
	var parts []string
	for _, r := range rep.Results {
		if r.Workload != W1 || r.Role != Ours || !r.OK() || r.Rate <= 0 {
			continue
		}
		peer, ok := rep.bestPeer(r.Protocol, W1, r.Goroutines)
		if !ok || peer.Rate <= 0 {
			continue
		}
		goal := 1.0
		if r.Protocol == "postgres" {
			if r.Goroutines != 16 {
				continue
			}
			goal = pgAdvisoryGoal
		}
		ratio := r.Rate / peer.Rate
		mark := ""
		if ratio < goal {
			verdict, mark = "not met", " (under)"
		}
		part := fmt.Sprintf("%s %s %.2fx%s", r.Subject, goroutines(r.Goroutines), ratio, mark)
		for _, f := range rep.Results {
			if f.Workload == W1 && f.Role == Floor && !f.Baseline && f.Protocol == r.Protocol && f.Goroutines == r.Goroutines && f.OK() {
				part += fmt.Sprintf(" (%s: %.2fx)", f.Subject, f.Rate/peer.Rate)
			}
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return "not measured | -"
	}
	return verdict + " | ours / best peer: " + strings.Join(parts, ", ")
}

// handoffGoal returns the result and numbers cells of goal 2.
func (rep *Report) handoffGoal() string {
	return rep.perBackend(W2, true, nil, "", func(r Result) (string, bool) {
		return dur(r.P50), r.P50 > handoffGoal
	})
}

// failoverGoal returns the result and numbers cells of goal 3, for the backends
// with a failover bound.
func (rep *Report) failoverGoal() string {
	return rep.perBackend(W3, false, func(r Result) bool { return r.Bound > 0 }, "worst failover / bound: ", func(r Result) (string, bool) {
		return fmt.Sprintf("%.2f", float64(r.Max)/float64(r.Bound)),
			r.Max > time.Duration(float64(r.Bound)*(1+failoverSlack))
	})
}
