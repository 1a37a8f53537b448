package benchmarks

import (
	"fmt"
	"strings"
)

// compactTables writes one short table per workload: each of our backends next to
// the best peer of its protocol and its floor (W1) or its bound (W3), with the
// ratios. The full tables are in matrix.md.
func (rep *Report) compactTables(b *strings.Builder, h string) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	gs := rep.Config.W1Goroutines
	counts := make([]string, len(gs))
	for i, g := range gs {
		counts[i] = fmt.Sprint(g)
	}
	if len(rep.subjects(W1)) > 0 {
		p("%s W1 uncontended: TryLock+Unlock pairs per second, %s goroutines sharing one client\n\n", h, strings.Join(counts, " / "))
		p("*x* is ours over the other row in the same run. The floor is the protocol's fewest round trips, issued by hand (for PostgreSQL its advisory lock, also the peer).\n\n")
		p("| backend | ops/s | best peer: ops/s | x peer | floor ops/s | x floor |\n|---|--:|---|--:|--:|--:|\n")
		for _, s := range rep.subjects(W1) {
			if s.Role != Ours {
				continue
			}
			if st := rep.rowStatus(s.Subject, W1); st != "" {
				p("| %s | %s | | | | |\n", s.Subject, st)
				continue
			}
			var ours, peers, xPeer, floors, xFloor []string
			var names []string
			for _, g := range gs {
				r, _ := rep.find(s.Subject, W1, g)
				ours = append(ours, cellRate(r))
				peer, ok := rep.bestPeer(s.Protocol, W1, g)
				if ok {
					names = append(names, peer.Subject)
				}
				peers = append(peers, cellRate(peer))
				xPeer = append(xPeer, ratio(r, peer, ok))
				fl, ok := rep.floor(s.Protocol, g)
				floors = append(floors, cellRate(fl))
				xFloor = append(xFloor, ratio(r, fl, ok && fl.OK()))
			}
			peerCell := "-"
			switch {
			case len(names) == 0:
			case allSame(names) && len(names) == len(gs):
				peerCell = names[0] + ": " + strings.Join(peers, " / ")
			default: // different peers win at different goroutine counts
				var cells []string
				for i, g := range gs {
					if peer, ok := rep.bestPeer(s.Protocol, W1, g); ok {
						cells = append(cells, peer.Subject+" "+peers[i])
					} else {
						cells = append(cells, "-")
					}
				}
				peerCell = strings.Join(cells, " / ")
			}
			p("| %s | %s | %s | %s | %s | %s |\n", s.Subject, strings.Join(ours, " / "), peerCell,
				dashes(xPeer), dashes(floors), dashes(xFloor))
		}
		p("\n")
	}

	if len(rep.subjects(W2)) > 0 {
		p("%s W2 contended handoff: %d clients take turns on one key, each holds it %v\n\n", h, rep.Config.W2Waiters, rep.Config.W2Hold)
		p("The gap runs from a holder's Unlock to the next holder's acquisition. %s *x peer* is acquisitions per second over the best peer's.\n\n", rep.roundsText())
		p("| backend | wakeup | acquisitions/s | gap p50 | p50 spread | best peer: acquisitions/s, gap p50 | x peer |\n|---|---|--:|--:|--:|---|--:|\n")
		for _, s := range rep.subjects(W2) {
			if s.Role != Ours {
				continue
			}
			r, _ := rep.find(s.Subject, W2, 0)
			if st := status(r); st != "" {
				p("| %s | %s | %s | | | | |\n", s.Subject, s.wakeup, st)
				continue
			}
			peerCell, x := "-", "-"
			if peer, ok := rep.bestPeer(s.Protocol, W2, 0); ok {
				peerCell = fmt.Sprintf("%s: %s, %s", peer.Subject, rate(peer.Rate), dur(peer.P50))
				x = ratio(r, peer, true)
			}
			p("| %s | %s | %s%s | %s | %s | %s | %s |\n", s.Subject, s.wakeup, rate(r.Rate), violations(r), dur(r.P50), spread(r), peerCell, x)
		}
		p("\n")
	}

	if len(rep.subjects(W3)) > 0 {
		p("%s W3 failover: the holder is killed without Unlock\n\n", h)
		p("From the kill to the acquisition of a waiter that was already blocked, worst of %d trials, against the ttl or session timeout the holder had (the goal: at most %.0f%% over it).\n\n", rep.Config.W3Trials, failoverSlack*100)
		p("| backend | failover | bound | x bound | best peer: failover, bound | x bound |\n|---|--:|---|--:|---|--:|\n")
		for _, s := range rep.subjects(W3) {
			if s.Role != Ours {
				continue
			}
			r, _ := rep.find(s.Subject, W3, 0)
			if st := status(r); st != "" {
				p("| %s | %s | | | | |\n", s.Subject, st)
				continue
			}
			peerCell, x := "-", "-"
			if peer, ok := rep.bestPeer(s.Protocol, W3, 0); ok {
				peerCell = fmt.Sprintf("%s: %s, %s", peer.Subject, dur(peer.Max), bound(peer))
				x = boundRatio(peer)
			}
			p("| %s | %s | %s | %s | %s | %s |\n", s.Subject, dur(r.Max), bound(r), boundRatio(r), peerCell, x)
		}
		p("\n")
	}
	rep.herdTable(b, h, false)
	rep.leasesTable(b, h, false)
}

// rowStatus returns the status of subject's W1 row when none of its cells was
// measured, and "" otherwise.
func (rep *Report) rowStatus(subject, w string) string {
	st := ""
	for _, r := range rep.Results {
		if r.Subject != subject || r.Workload != w {
			continue
		}
		if status(r) == "" {
			return ""
		}
		st = status(r)
	}
	return st
}

// cellRate is a rate cell: "-" for a cell that was not measured.
func cellRate(r Result) string {
	if !r.OK() {
		return "-"
	}
	return rate(r.Rate)
}

// ratio is r's rate over other's, when both were measured.
func ratio(r, other Result, ok bool) string {
	if !ok || !r.OK() || !other.OK() || other.Rate <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", r.Rate/other.Rate)
}

// violations marks a W2 cell that saw two holders at once.
func violations(r Result) string {
	if r.Violations == 0 {
		return ""
	}
	return fmt.Sprintf(" (**%d overlapping holders**)", r.Violations)
}

// bound describes what W3 compared r with.
func bound(r Result) string {
	if r.Bound > 0 {
		return fmt.Sprintf("%s %s", r.BoundKind, dur(r.Bound))
	}
	return r.BoundKind
}

// boundRatio is r's worst failover over its bound.
func boundRatio(r Result) string {
	if r.Bound <= 0 || r.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(r.Max)/float64(r.Bound))
}

func allSame(ss []string) bool {
	for _, s := range ss {
		if s != ss[0] {
			return false
		}
	}
	return true
}

// dashes joins cells with " / ", or is one "-" when none has a value.
func dashes(cells []string) string {
	for _, c := range cells {
		if c != "-" {
			return strings.Join(cells, " / ")
		}
	}
	return "-"
}
