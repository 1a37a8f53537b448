package benchmarks

import (
	"fmt"
	"strings"
	"time"
)

// Compact renders the README's section: the run's facts in a few lines, the
// goals, one short table per workload and what else users compare. link is the
// path from the README to the results directory ("benchmarks/results").
func (rep *Report) Compact(link string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("Measured by `make matrix` (the `benchmarks` module) in one run, every row against servers on the same machine. ")
	p("The full tables (every peer and floor, latency percentiles), the servers' versions and settings, and notes on the rows: [matrix.md](%s/matrix.md); every number: [matrix.csv](%s/matrix.csv).\n\n", link, link)
	p("- **run**: %s, %s; commit %s\n", rep.Started.UTC().Format("2006-01-02 15:04 MST"), rep.Took.Round(time.Second), rep.Commit.Describe(12))
	var machine []string
	for _, kv := range rep.Machine {
		if kv.Key == "cores (nproc)" {
			machine = append(machine, kv.Value+" cores")
			continue
		}
		machine = append(machine, kv.Value)
	}
	p("- **machine**: %s\n", strings.Join(machine, ", "))
	p("- **load**: %s\n", rep.loadText(false))
	p("- **ttl** (and session timeout): %v\n\n", rep.Config.TTL)
	rep.goals(&b, "###")
	rep.compactTables(&b, "###")
	factsTables(&b, "###", rep)
	return b.String()
}

// Full renders matrix.md: everything measured, with the header in full, the
// goals, the compact tables, the full tables, the facts and the notes.
func (rep *Report) Full() string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# distlock backend matrix\n\n")
	p("Measured by `make matrix` (the `benchmarks` module): one run, every row against servers on the same machine. ")
	p("Every number is also in [matrix.csv](matrix.csv); `make -C benchmarks render` rebuilds this file and the README's section from it.\n\n")
	for _, kv := range rep.header() {
		p("- **%s**: %s\n", kv.Key, kv.Value)
	}
	p("\n")
	rep.goals(&b, "##")
	p("## Summary: ours next to the best peer and the floor\n\n")
	rep.compactTables(&b, "###")
	p("## All rows\n\n")
	rep.fullTables(&b, "###")
	factsTables(&b, "##", rep)
	var notes []string
	for _, s := range rep.subjects("") {
		if s.note != "" {
			notes = append(notes, fmt.Sprintf("- **%s**: %s", s.Subject, s.note))
		}
	}
	if len(notes) > 0 {
		p("## Notes on the rows\n\n%s\n", strings.Join(notes, "\n"))
	}
	return b.String()
}

// fullTables writes a table per workload with every row: ours, peers and floors.
func (rep *Report) fullTables(b *strings.Builder, h string) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }

	if len(rep.subjects(W1)) > 0 {
		p("%s W1 uncontended: TryLock+Unlock on distinct keys, one shared client\n\n", h)
		p("Latency is one TryLock+Unlock pair. %s *x floor* is ops/s over the protocol's floor (the fewest round trips by hand) in the same run.\n\n", w1RoundsNote(rep.Config))
		p("| subject | role |")
		for _, g := range rep.Config.W1Goroutines {
			p(" %d gor. ops/s | p50 | p99 | x floor |", g)
		}
		p("\n|---|---|")
		for range rep.Config.W1Goroutines {
			p("--:|--:|--:|--:|")
		}
		p("\n")
		for _, s := range rep.subjects(W1) {
			p("| %s | %s |", s.Subject, s.Role)
			for _, g := range rep.Config.W1Goroutines {
				r, _ := rep.find(s.Subject, W1, g)
				if st := status(r); st != "" {
					p(" %s | | | |", st)
					continue
				}
				x := "-"
				if _, ratio, ok := rep.baseline(r); ok {
					x = fmt.Sprintf("%.2f", ratio)
				}
				p(" %s | %s | %s | %s |", rateSpread(r), dur(r.P50), dur(r.P99), x)
			}
			p("\n")
		}
		p("\n")
	}

	if len(rep.subjects(W2)) > 0 {
		p("%s W2 contended handoff: %d waiters on one key, each holds it %v\n\n", h, rep.Config.W2Waiters, rep.Config.W2Hold)
		p("The gap runs from the moment a holder calls Unlock to the moment the next holder's acquire returns, on one monotonic clock. %s *x best peer* is acquisitions/s over the best peer of the protocol.\n\n", rep.roundsText())
		p("| subject | role | wakeup | acquisitions/s | gap p50 | p50 spread | gap p99 | gaps | x best peer |\n|---|---|---|--:|--:|--:|--:|--:|--:|\n")
		for _, s := range rep.subjects(W2) {
			r, _ := rep.find(s.Subject, W2, 0)
			if st := status(r); st != "" {
				p("| %s | %s | %s | %s | | | | | |\n", r.Subject, r.Role, s.wakeup, st)
				continue
			}
			x := "-"
			if _, ratio, ok := rep.baseline(r); ok {
				x = fmt.Sprintf("%.2f", ratio)
			}
			p("| %s | %s | %s | %s%s | %s | %s | %s | %d | %s |\n", r.Subject, r.Role, s.wakeup, rate(r.Rate), violations(r), dur(r.P50), spread(r), dur(r.P99), r.Gaps, x)
		}
		p("\n")
	}

	if len(rep.subjects(W3)) > 0 {
		p("%s W3 failover: the holder is killed without Unlock\n\n", h)
		p("The holder's connections go through a faultproxy that resets them and refuses new ones, as when its process dies (memlock and SQLite: the holder's client is closed, or abandoned). A waiter on its own client is already blocked on the key; the time runs from the kill to the waiter's acquisition. The goal is at most the bound + %.0f%%.\n\n", failoverSlack*100)
		p("| subject | role | failover median | max | bound | max / bound |\n|---|---|--:|--:|---|--:|\n")
		for _, s := range rep.subjects(W3) {
			r, _ := rep.find(s.Subject, W3, 0)
			if st := status(r); st != "" {
				p("| %s | %s | %s | | | |\n", r.Subject, r.Role, st)
				continue
			}
			p("| %s | %s | %s | %s | %s | %s |\n", r.Subject, r.Role, dur(r.P50), dur(r.Max), bound(r), boundRatio(r))
		}
		p("\n")
	}
	rep.herdTable(b, h, true)
	rep.leasesTable(b, h, true)
}

// roundsText says how W2's gap p50 and its spread come from the rounds.
func (rep *Report) roundsText() string {
	if rep.Config.W2Rounds < 2 {
		return ""
	}
	return fmt.Sprintf("W2 runs in %d rounds, the subjects of a protocol taking turns: *gap p50* is the median of the rounds' p50s, *p50 spread* the lowest and the highest of them.", rep.Config.W2Rounds)
}

// herdTable writes W4's table: every row when all, ours only otherwise.
func (rep *Report) herdTable(b *strings.Builder, h string, all bool) {
	rows := rep.subjects(W4)
	if len(rows) == 0 {
		return
	}
	c := rep.Config
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("%s W4 herd: %d waiters on one key\n\n", h, c.W4Waiters)
	p("%d goroutines, spread over %d clients, block on one key with a blocking acquire (distlock.Lock, which waits with the Locker's Waiter when it has one) while a first holder has it; then each holder holds it %v and unlocks, up to %d handoffs or %v. ", c.W4Waiters, c.W4Clients, c.W4Hold, c.W4Handoffs, c.W4Time)
	p("The gap runs from the moment a holder calls Unlock to the next holder's acquisition, as in W2. *Requests / handoff* is read from the server's own counter (%s) before the first release and while the last holder holds the key: every request of the herd, waiters included; - where the server has no counter.\n\n", "Redis INFO total_commands_processed, which counts a script once and each of its redis.call once more; etcd grpc_server_msg_received_total, ZooKeeper mntr zk_packets_received, for PostgreSQL the statements its clients sent (pgx tracer; the server's own statistics come up to 10 s late), MariaDB Questions")
	p("| backend | wakeup | handoffs | handoffs/s | gap p50 | gap p99 | requests / handoff |")
	if all {
		p(" counter |\n|---|---|--:|--:|--:|--:|--:|---|\n")
	} else {
		p("\n|---|---|--:|--:|--:|--:|--:|\n")
	}
	for _, s := range rows {
		if !all && s.Role != Ours {
			continue
		}
		r, _ := rep.find(s.Subject, W4, 0)
		if st := status(r); st != "" {
			p("| %s | %s | %s | | | | |", s.Subject, s.wakeup, st)
		} else {
			p("| %s | %s | %d | %s%s | %s | %s | %s |", s.Subject, s.wakeup, r.N, rate(r.Rate), violations(r), dur(r.P50), dur(r.P99), perOp(r))
		}
		if all {
			p(" %s |", orDash(r.Counter))
		}
		p("\n")
	}
	p("\n")
}

// leasesTable writes W5's table: every row when all, ours only otherwise.
func (rep *Report) leasesTable(b *strings.Builder, h string, all bool) {
	rows := rep.subjects(W5)
	if len(rows) == 0 {
		return
	}
	c := rep.Config
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("%s W5 many leases: %d keys held at once under distlock.Hold\n\n", h, c.W5Leases)
	p("One client acquires %d keys, %d at a time, and keeps each under distlock.Hold with ttl %v (a renewal every %v) for %v. ", c.W5Leases, c.W5Parallel, c.W5TTL, c.W5TTL/3, c.W5Time)
	p("*Requests / renewal* comes from the server's own counter, as in W4; *CPU / renewal* is this process's user + system time; *heap / lease* (live heap after a GC) and *goroutines / lease* are what each held lease adds, read once all are held (goroutines include the renewals in flight then). *Lost* counts leases lost during the window.\n\n")
	p("| backend | renewals/s | lost | requests / renewal | CPU / renewal | heap / lease | goroutines / lease |\n|---|--:|--:|--:|--:|--:|--:|\n")
	for _, s := range rows {
		if !all && s.Role != Ours {
			continue
		}
		r, _ := rep.find(s.Subject, W5, 0)
		if st := status(r); st != "" {
			p("| %s | %s | | | | | |\n", s.Subject, st)
			continue
		}
		p("| %s | %s | %d | %s | %s | %s | %.2f |\n", s.Subject, rate(r.Rate), r.Lost, perOp(r), dur(r.CPUPerOp), bytesPer(r.HeapPerLease), r.GoroutinesPerLease)
	}
	p("\n")
}

// bytesPer formats a number of bytes per lease.
func bytesPer(f float64) string {
	if f >= 10*1024 {
		return fmt.Sprintf("%.1f KiB", f/1024)
	}
	return fmt.Sprintf("%.0f B", f)
}

// factsTables writes what else users compare, from AllFacts, with W3's median
// failover of rep (nil: none), and what each row is safe under.
func factsTables(b *strings.Builder, h string, rep *Report) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("%s What else users compare\n\n", h)
	p("From each package's documentation (for the peers: theirs, and their code); *measured* is W3's median failover in this run.\n\n")
	p("| backend | consistency | fencing | auto-release on crash | measured | wakeup | expiry | needs |\n|---|---|---|---|--:|---|---|---|\n")
	for _, f := range AllFacts {
		m := "-"
		if rep != nil {
			if r, ok := rep.find(f.Subject, W3, 0); ok {
				if st := status(r); st != "" {
					m = st
				} else {
					m = dur(r.P50)
				}
			}
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s |\n", f.Subject, f.Consistency, f.Fence, f.AutoRelease, m, f.Wakeup, f.Expiry, f.Needs)
	}
	p("\n")
	p("**Safe while**: what each lock assumes of its servers and clocks, topic by topic (for our backends, the \"Safety assumptions\" of the package's documentation). Each cell is the setting or condition to keep, and what breaks otherwise; - means the topic does not apply.\n\n")
	p("| backend | eviction | persistence and restarts | failover and replication | clocks | ttl and timeouts | other |\n|---|---|---|---|---|---|---|\n")
	for _, f := range AllFacts {
		s := f.Safe
		p("| %s | %s | %s | %s | %s | %s | %s |\n", f.Subject, orDash(s.Eviction), orDash(s.Persistence), orDash(s.Failover), orDash(s.Clocks), orDash(s.Timeouts), orDash(s.Other))
	}
	p("\n")
	p("%s\n\n", safeTestedBy)
}

// safeTestedBy says which faults of the conformance suite and its exploration
// (conformance.Explore) test the assumptions of each topic of the Safe while table.
const safeTestedBy = "How our backends are tested against these, topic by topic (`conformance.Run` and its exploration, `conformance.Explore`, which injects the faults at random while many clients call): " +
	"*persistence and restarts*: RestartServer, and LoseMinority (a minority restarted empty; RedLock: masters restarted empty, pairs and singles over time in redlock's TestLossWalk); " +
	"*failover and replication*: ChangeLeader, IsolateServer (a member cut off from its peers while its clients still reach it), LoseMinority; " +
	"*clocks*: PauseServer (the servers stopped, then resumed with their clocks moved on) and Delay; " +
	"*ttl and timeouts*: Partition, Delay and PauseServer with a deadline on every call, a Renew just after Expires, Hold with a partitioned client; " +
	"*other*: Crash (the process gone, its session ended), Close during an outage, abandoned attempts. " +
	"Eviction is not injected (no fault evicts keys): `CheckServer` reports the setting. Each backend's test log names the faults its harness offers and the ones NOT RUN."

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// w1RoundsNote says how W1's ops/s are computed.
func w1RoundsNote(c Config) string {
	if c.W1Rounds < 2 {
		return ""
	}
	return fmt.Sprintf("With 1 goroutine the subjects of a protocol take turns pair by pair (one goroutine runs a pair on each subject's client in turn): *ops/s* is the median of the rates of %d blocks of a cell's pairs. With more goroutines a cell runs in %d rounds, the subjects of a protocol taking turns: *ops/s* is the median of the rounds' rates. The lowest and the highest rate are in brackets.", c.W1Rounds, c.W1Rounds)
}

// rateSpread is r's rate and, when it has one (W1's rounds), its spread.
func rateSpread(r Result) string {
	if r.Rounds < 2 || r.RateHi <= 0 {
		return rate(r.Rate)
	}
	return fmt.Sprintf("%s (%s-%s)", rate(r.Rate), rate(r.RateLo), rate(r.RateHi))
}
