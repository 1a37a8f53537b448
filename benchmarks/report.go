package benchmarks

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// README markers: `make matrix` rewrites what lies between them.
const (
	BeginMarker = "<!-- matrix:begin -->"
	EndMarker   = "<!-- matrix:end -->"
)

// handoffGoal, failoverSlack and the uncontended goal are the goals of issue 9.
const (
	handoffGoal   = 2 * time.Millisecond
	failoverSlack = 0.10
)

// A KV is one labelled value of the report's header.
type KV struct{ Key, Value string }

// A Report is one matrix run.
type Report struct {
	Started time.Time
	Took    time.Duration
	Config  Config
	// Machine describes the host: CPU, cores, memory, kernel, load.
	Machine []KV
	// Versions holds Go's, the servers' and the client libraries' versions.
	Versions []KV
	// LoadBefore and LoadAfter are /proc/loadavg at the start and the end.
	LoadBefore, LoadAfter string
	Results               []Result
}

// MachineInfo describes this host from /proc.
func MachineInfo() []KV {
	cpu := "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := "unknown"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				f := strings.Fields(v)
				if kb, err := strconv.ParseFloat(f[0], 64); err == nil {
					mem = fmt.Sprintf("%.1f GiB", kb/(1<<20))
				}
			}
		}
	}
	kernel := "unknown"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	return []KV{
		{"CPU", cpu},
		{"cores (nproc)", strconv.Itoa(runtime.NumCPU())},
		{"memory", mem},
		{"OS", runtime.GOOS + "/" + runtime.GOARCH + ", Linux " + kernel},
	}
}

// LoadAvg returns the three load averages of /proc/loadavg.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// LibraryVersions returns Go's version and those of the client libraries linked
// into this binary.
func LibraryVersions() []KV {
	out := []KV{{"Go", runtime.Version()}}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return out
	}
	want := []string{
		"github.com/redis/go-redis/v9", "github.com/go-redsync/redsync/v4", "github.com/bsm/redislock",
		"go.etcd.io/etcd/client/v3", "github.com/go-zookeeper/zk", "github.com/jackc/pgx/v5",
		"github.com/go-sql-driver/mysql", "modernc.org/sqlite",
	}
	var libs []string
	for _, w := range want {
		for _, d := range bi.Deps {
			if d.Path == w {
				libs = append(libs, d.Path+" "+d.Version)
			}
		}
	}
	if len(libs) > 0 {
		out = append(out, KV{"client libraries", strings.Join(libs, ", ")})
	}
	return out
}

// shared reports whether the machine was busy with other work: a load average
// (1 minute, at the start or the end) of at least half the cores.
func (rep *Report) shared() bool {
	for _, l := range []string{rep.LoadBefore, rep.LoadAfter} {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil && v >= float64(runtime.NumCPU())/2 {
			return true
		}
	}
	return false
}

// find returns the result of subject under workload w with g goroutines.
func (rep *Report) find(subject, w string, g int) (Result, bool) {
	for _, r := range rep.Results {
		if r.Subject == subject && r.Workload == w && (g == 0 || r.Goroutines == g) {
			return r, true
		}
	}
	return Result{}, false
}

// baseline returns the name and the value that r's ratio compares with.
func (rep *Report) baseline(r Result) (string, float64, bool) {
	if !r.OK() {
		return "", 0, false
	}
	switch r.Workload {
	case W1:
		for _, b := range rep.Results {
			if b.Workload == W1 && b.Baseline && b.Protocol == r.Protocol && b.Goroutines == r.Goroutines && b.OK() && b.Rate > 0 {
				return b.Subject, r.Rate / b.Rate, true
			}
		}
	case W2:
		var best Result
		for _, b := range rep.Results {
			if b.Workload == W2 && b.Role == Peer && b.Protocol == r.Protocol && b.OK() && b.Rate > best.Rate {
				best = b
			}
		}
		if best.Rate > 0 {
			return best.Subject, r.Rate / best.Rate, true
		}
	case W3:
		if r.Bound > 0 && r.N > 0 {
			return r.BoundKind, float64(r.Max) / float64(r.Bound), true
		}
	}
	return "", 0, false
}

// ms formats d in milliseconds for the CSV.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
}

// dur formats d for people.
func dur(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Microsecond:
		return "<0.001 ms"
	case d < time.Millisecond:
		return fmt.Sprintf("%.3f ms", float64(d)/1e6)
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

func rate(f float64) string {
	switch {
	case f >= 100:
		return strconv.FormatFloat(f, 'f', 0, 64)
	case f > 0:
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return "-"
}

// status is what a cell that was not measured shows instead of numbers.
func status(r Result) string {
	switch {
	case r.Unavailable != "":
		return "not measured (" + r.Unavailable + ")"
	case r.Err != "":
		e := r.Err
		if len(e) > 120 {
			e = e[:120] + "..."
		}
		return "error: " + strings.ReplaceAll(e, "|", "/")
	}
	return ""
}

// CSV renders every result, one line per cell, after '#' comment lines that
// carry the header (machine, date, versions, settings).
func (rep *Report) CSV() ([]byte, error) {
	var b bytes.Buffer
	for _, kv := range rep.header() {
		fmt.Fprintf(&b, "# %s: %s\n", kv.Key, strings.ReplaceAll(kv.Value, "\n", " "))
	}
	w := csv.NewWriter(&b)
	_ = w.Write([]string{"subject", "protocol", "role", "workload", "goroutines", "n", "elapsed_s", "rate_per_s",
		"p50_ms", "p99_ms", "max_ms", "gaps", "bound_ms", "bound_kind", "baseline", "ratio", "violations", "status", "error"})
	for _, r := range rep.Results {
		name, ratio, ok := rep.baseline(r)
		ratioS := ""
		if ok {
			ratioS = strconv.FormatFloat(ratio, 'f', 3, 64)
		}
		st := "ok"
		switch {
		case r.Unavailable != "":
			st = "not measured: " + r.Unavailable
		case r.Err != "":
			st = "error"
		}
		_ = w.Write([]string{r.Subject, r.Protocol, string(r.Role), r.Workload, strconv.Itoa(r.Goroutines), strconv.Itoa(r.N),
			strconv.FormatFloat(r.Elapsed.Seconds(), 'f', 3, 64), strconv.FormatFloat(r.Rate, 'f', 1, 64),
			ms(r.P50), ms(r.P99), ms(r.Max), strconv.Itoa(r.Gaps), ms(r.Bound), r.BoundKind, name, ratioS,
			strconv.Itoa(r.Violations), st, r.Err})
	}
	w.Flush()
	return b.Bytes(), w.Error()
}

// header returns the lines that describe the run.
func (rep *Report) header() []KV {
	c := rep.Config
	out := []KV{
		{"date", rep.Started.UTC().Format("2006-01-02 15:04 MST")},
		{"run time", rep.Took.Round(time.Second).String()},
	}
	out = append(out, rep.Machine...)
	load := fmt.Sprintf("%s at the start, %s at the end (1, 5, 15 min)", rep.LoadBefore, rep.LoadAfter)
	if rep.shared() {
		load += "; the machine was shared with other work during the run, so absolute numbers are low and noisy: compare rows of this run with each other"
	}
	out = append(out, KV{"load average", load})
	out = append(out, rep.Versions...)
	out = append(out, KV{"settings", fmt.Sprintf("ttl and session timeout %v; W1 %v goroutines, up to %d pairs or %v per cell (after %d warm-up pairs per goroutine); W2 %d waiters, hold %v, up to %d acquisitions or %v; W3 %d trials",
		c.TTL, c.W1Goroutines, c.W1Ops, c.W1Time, c.W1Warmup, c.W2Waiters, c.W2Hold, c.W2Acquisitions, c.W2Time, c.W3Trials)})
	out = append(out, KV{"servers", "every server on 127.0.0.1 of this machine, started by internal/testenv; clients in the same process as the benchmark"})
	return out
}

// Markdown renders the report; h is the heading prefix of its sections ("##"),
// csvLink the link to the CSV from where the text goes.
func (rep *Report) Markdown(h, csvLink string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }

	p("Measured by `make matrix` (the `benchmarks` module): one run, every row against servers on the same machine.\n")
	p("Every number is also in [matrix.csv](%s).\n\n", csvLink)
	for _, kv := range rep.header() {
		p("- **%s**: %s\n", kv.Key, kv.Value)
	}
	p("\n")

	rep.goals(&b, h)

	// W1.
	p("%s W1 uncontended: TryLock+Unlock on distinct keys, one shared client\n\n", h)
	p("Latency is one TryLock+Unlock pair. *x floor* is ops/s over the protocol's floor (the fewest round trips by hand) in the same run.\n\n")
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
			p(" %s | %s | %s | %s |", rate(r.Rate), dur(r.P50), dur(r.P99), x)
		}
		p("\n")
	}
	p("\n")

	// W2.
	p("%s W2 contended handoff: %d waiters on one key, each holds it %v\n\n", h, rep.Config.W2Waiters, rep.Config.W2Hold)
	p("The gap runs from the moment a holder calls Unlock to the moment the next holder's acquire returns, on one monotonic clock. *x best peer* is acquisitions/s over the best peer of the protocol.\n\n")
	p("| subject | role | wakeup | acquisitions/s | gap p50 | gap p99 | gaps | x best peer |\n|---|---|---|--:|--:|--:|--:|--:|\n")
	for _, s := range rep.subjects(W2) {
		r, _ := rep.find(s.Subject, W2, 0)
		if st := status(r); st != "" {
			p("| %s | %s | %s | %s | | | | |\n", r.Subject, r.Role, s.wakeup, st)
			continue
		}
		x := "-"
		if _, ratio, ok := rep.baseline(r); ok {
			x = fmt.Sprintf("%.2f", ratio)
		}
		v := ""
		if r.Violations > 0 {
			v = fmt.Sprintf(" (**%d overlapping holders**)", r.Violations)
		}
		p("| %s | %s | %s | %s%s | %s | %s | %d | %s |\n", r.Subject, r.Role, s.wakeup, rate(r.Rate), v, dur(r.P50), dur(r.P99), r.Gaps, x)
	}
	p("\n")

	// W3.
	p("%s W3 failover: the holder is killed without Unlock\n\n", h)
	p("The holder's connections go through a faultproxy that resets them and refuses new ones, as when its process dies (memlock and SQLite: the holder's client is closed, or abandoned). A waiter on its own client is already blocked on the key; the time runs from the kill to the waiter's acquisition. The goal is at most the bound + %.0f%%.\n\n", failoverSlack*100)
	p("| subject | role | failover median | max | bound | max / bound |\n|---|---|--:|--:|---|--:|\n")
	for _, s := range rep.subjects(W3) {
		r, _ := rep.find(s.Subject, W3, 0)
		if st := status(r); st != "" {
			p("| %s | %s | %s | | | |\n", r.Subject, r.Role, st)
			continue
		}
		bound := r.BoundKind
		if r.Bound > 0 {
			bound = fmt.Sprintf("%s %s", r.BoundKind, dur(r.Bound))
		}
		x := "-"
		if _, ratio, ok := rep.baseline(r); ok {
			x = fmt.Sprintf("%.2f", ratio)
		}
		p("| %s | %s | %s | %s | %s | %s |\n", r.Subject, r.Role, dur(r.P50), dur(r.Max), bound, x)
	}
	p("\n")

	// Facts.
	p("%s What else users compare\n\n", h)
	p("From each package's documentation; *measured* is W3's median above.\n\n")
	p("| backend | consistency | fencing | auto-release on crash | measured | wakeup | expiry | needs |\n|---|---|---|---|--:|---|---|---|\n")
	for _, f := range AllFacts {
		m := "-"
		if r, ok := rep.find(f.Subject, W3, 0); ok {
			if st := status(r); st != "" {
				m = st
			} else {
				m = dur(r.P50)
			}
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s |\n", f.Subject, f.Consistency, f.Fence, f.AutoRelease, m, f.Wakeup, f.Expiry, f.Needs)
	}
	p("\n")

	// Notes.
	var notes []string
	for _, s := range rep.subjects("") {
		if s.note != "" {
			notes = append(notes, fmt.Sprintf("- **%s**: %s", s.Subject, s.note))
		}
	}
	if len(notes) > 0 {
		p("%s Notes on the rows\n\n%s\n", h, strings.Join(notes, "\n"))
	}
	return b.String()
}

// row is a Subject as the results know it.
type row struct {
	Subject string
	Role    Role
	wakeup  string
	note    string
}

// subjects returns the distinct subjects with a result under w ("" = any), in
// run order.
func (rep *Report) subjects(w string) []row {
	seen := map[string]bool{}
	var out []row
	for _, r := range rep.Results {
		if (w != "" && r.Workload != w) || seen[r.Subject] {
			continue
		}
		seen[r.Subject] = true
		out = append(out, row{Subject: r.Subject, Role: r.Role, wakeup: r.Wakeup, note: r.Note})
	}
	return out
}

// goals writes the goals of issue 9 with the numbers, met or not.
func (rep *Report) goals(b *strings.Builder, h string) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("%s Goals\n\n| goal | result | numbers |\n|---|---|---|\n", h)

	// 1. redislock uncontended >= the faster of redsync and bsm/redislock.
	{
		verdict, ok := "met", true
		var parts []string
		for _, g := range rep.Config.W1Goroutines {
			ours, o1 := rep.find("redislock", W1, g)
			rs, o2 := rep.find("redsync", W1, g)
			bs, o3 := rep.find("bsm/redislock", W1, g)
			if !(o1 && o2 && o3) || !ours.OK() || !rs.OK() || !bs.OK() {
				ok = false
				parts = append(parts, fmt.Sprintf("%s: not measured", goroutines(g)))
				continue
			}
			best := max(rs.Rate, bs.Rate)
			ratio := ours.Rate / best
			if ratio < 1 {
				verdict = "not met"
			}
			parts = append(parts, fmt.Sprintf("%s: redislock %s ops/s, redsync %s, bsm/redislock %s: **%.2fx**", goroutines(g), rate(ours.Rate), rate(rs.Rate), rate(bs.Rate), ratio))
		}
		for _, g := range rep.Config.W1Goroutines {
			if bg, found := rep.find("redislock (ctx.Background)", W1, g); found && bg.OK() {
				parts = append(parts, fmt.Sprintf("redislock with context.Background(), %s: %s ops/s", goroutines(g), rate(bg.Rate)))
			}
		}
		if !ok {
			verdict = "not measured"
		}
		p("| redislock uncontended >= 1.0x the faster of redsync and bsm/redislock | %s | %s |\n", verdict, strings.Join(parts, "; "))
	}

	// 2. Handoff gap p50 <= 2ms on every backend with a Waiter.
	{
		verdict := "met"
		var parts, peers []string
		for _, r := range rep.Results {
			if r.Workload != W2 {
				continue
			}
			switch {
			case r.Role == Ours && r.Waiter:
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
			case r.Role == Peer && r.OK():
				peers = append(peers, fmt.Sprintf("%s %s", r.Subject, dur(r.P50)))
			}
		}
		if rep.partial(W2, true) {
			verdict += " (for the backends measured)"
		}
		p("| handoff gap p50 <= %v on every backend with a Waiter | %s | ours: %s. Peers: %s |\n", handoffGoal, verdict, strings.Join(parts, ", "), strings.Join(peers, ", "))
	}

	// 3. Failover <= bound + 10%.
	{
		verdict := "met"
		var parts, peers []string
		for _, r := range rep.Results {
			if r.Workload != W3 || r.Bound <= 0 {
				continue
			}
			if !r.OK() {
				if r.Role == Ours {
					parts = append(parts, fmt.Sprintf("%s %s", r.Subject, status(r)))
					if r.Unavailable == "" {
						verdict = "not met"
					}
				}
				continue
			}
			limit := time.Duration(float64(r.Bound) * (1 + failoverSlack))
			mark := ""
			if r.Max > limit {
				mark = " (over)"
				if r.Role == Ours {
					verdict = "not met"
				}
			}
			s := fmt.Sprintf("%s max %s vs %s %s%s", r.Subject, dur(r.Max), r.BoundKind, dur(r.Bound), mark)
			if r.Role == Ours {
				parts = append(parts, s)
			} else {
				peers = append(peers, s)
			}
		}
		if rep.partial(W3, false) {
			verdict += " (for the backends measured)"
		}
		p("| failover <= ttl (or session timeout) + %.0f%% | %s | ours: %s. Peers: %s |\n", failoverSlack*100, verdict, strings.Join(parts, ", "), strings.Join(peers, ", "))
	}
	p("\n")
}

func goroutines(g int) string {
	if g == 1 {
		return "1 goroutine"
	}
	return fmt.Sprintf("%d goroutines", g)
}

// partial reports whether one of our backends was not measured under w.
func (rep *Report) partial(w string, waitersOnly bool) bool {
	for _, r := range rep.Results {
		if r.Workload == w && r.Role == Ours && r.Unavailable != "" && (!waitersOnly || r.Waiter) {
			return true
		}
	}
	return false
}

// WriteFiles writes matrix.csv and matrix.md into dir and, when readme is not
// empty, rewrites the README's section between the markers.
func (rep *Report) WriteFiles(dir, readme string) error {
	csvb, err := rep.CSV()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(dir+"/matrix.csv", csvb, 0o644); err != nil {
		return err
	}
	md := "# distlock backend matrix\n\n" + rep.Markdown("##", "matrix.csv")
	if err := os.WriteFile(dir+"/matrix.md", []byte(md), 0o644); err != nil {
		return err
	}
	if readme == "" {
		return nil
	}
	return RewriteSection(readme, rep.Markdown("###", "benchmarks/results/matrix.csv"))
}

// RewriteSection replaces what lies between BeginMarker and EndMarker in the file
// at path with body, and leaves the rest of the file as it is.
func RewriteSection(path, body string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i := strings.Index(s, BeginMarker)
	j := strings.Index(s, EndMarker)
	if i < 0 || j < i {
		return errors.New(path + ": no " + BeginMarker + " ... " + EndMarker + " section")
	}
	out := s[:i+len(BeginMarker)] + "\n" + strings.TrimSpace(body) + "\n" + s[j:]
	return os.WriteFile(path, []byte(out), 0o644)
}
