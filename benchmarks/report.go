package benchmarks

import (
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

// A Report is one matrix run. Everything in it is written to matrix.csv, from
// which ReadCSV rebuilds it.
type Report struct {
	Started time.Time
	Took    time.Duration
	Config  Config
	// Commit is the source that was measured, read at the start of the run.
	Commit Commit
	// Machine describes the host: CPU, cores, memory, kernel; Cores is its
	// number of CPUs.
	Machine []KV
	Cores   int
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
// (1 minute, at the start or the end) of at least half its cores.
func (rep *Report) shared() bool {
	for _, l := range []string{rep.LoadBefore, rep.LoadAfter} {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil && v >= float64(rep.Cores)/2 {
			return true
		}
	}
	return false
}

// find returns the result of subject under workload w with g goroutines (g == 0:
// any).
func (rep *Report) find(subject, w string, g int) (Result, bool) {
	for _, r := range rep.Results {
		if r.Subject == subject && r.Workload == w && (g == 0 || r.Goroutines == g) {
			return r, true
		}
	}
	return Result{}, false
}

// baseline returns the name and the value that r's ratio compares with: W1 the
// protocol's floor, W2 its best peer, W3 the bound.
func (rep *Report) baseline(r Result) (string, float64, bool) {
	if !r.OK() {
		return "", 0, false
	}
	switch r.Workload {
	case W1:
		if b, ok := rep.floor(r.Protocol, r.Goroutines); ok && b.OK() && b.Rate > 0 {
			return b.Subject, r.Rate / b.Rate, true
		}
	case W2:
		if b, ok := rep.bestPeer(r.Protocol, W2, 0); ok && b.Rate > 0 {
			return b.Subject, r.Rate / b.Rate, true
		}
	case W3:
		if r.Bound > 0 && r.N > 0 {
			return r.BoundKind, float64(r.Max) / float64(r.Bound), true
		}
	}
	return "", 0, false
}

// floor returns the W1 row with g goroutines that protocol's ratios compare with.
func (rep *Report) floor(protocol string, g int) (Result, bool) {
	for _, b := range rep.Results {
		if b.Workload == W1 && b.Baseline && b.Protocol == protocol && b.Goroutines == g {
			return b, true
		}
	}
	return Result{}, false
}

// bestPeer returns the measured peer of protocol that did best under w (with g
// goroutines for W1): the highest rate for W1 and W2, the shortest worst
// failover for W3.
func (rep *Report) bestPeer(protocol, w string, g int) (Result, bool) {
	var best Result
	found := false
	for _, r := range rep.Results {
		if r.Workload != w || r.Role != Peer || r.Protocol != protocol || !r.OK() || (g != 0 && r.Goroutines != g) {
			continue
		}
		better := r.Rate > best.Rate
		if w == W3 {
			better = r.Max < best.Max
		}
		if !found || better {
			best, found = r, true
		}
	}
	return best, found
}

// row is a Subject as the results know it.
type row struct {
	Subject  string
	Protocol string
	Role     Role
	wakeup   string
	note     string
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
		out = append(out, row{Subject: r.Subject, Protocol: r.Protocol, Role: r.Role, wakeup: r.Wakeup, note: r.Note})
	}
	return out
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

func goroutines(g int) string {
	if g == 1 {
		return "1 goroutine"
	}
	return fmt.Sprintf("%d goroutines", g)
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

// rate formats a rate per second for people.
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

// header returns the lines that describe the run, in full.
func (rep *Report) header() []KV {
	c := rep.Config
	out := []KV{
		{"date", rep.Started.UTC().Format("2006-01-02 15:04 MST")},
		{"run time", rep.Took.Round(time.Second).String()},
		{"commit", rep.Commit.Describe(0)},
	}
	out = append(out, rep.Machine...)
	out = append(out, KV{"load average", rep.loadText(true)})
	out = append(out, rep.Versions...)
	settings := fmt.Sprintf("ttl and session timeout %v; W1 %v goroutines, up to %d pairs or %v per cell in %d rounds (after %d warm-up pairs per goroutine); W2 %d waiters, hold %v, up to %d acquisitions or %v in %d rounds; W3 %d trials",
		c.TTL, c.W1Goroutines, c.W1Ops, c.W1Time, c.W1Rounds, c.W1Warmup, c.W2Waiters, c.W2Hold, c.W2Acquisitions, c.W2Time, c.w2Rounds(), c.W3Trials)
	if c.W4Waiters > 0 {
		settings += fmt.Sprintf("; W4 %d waiters over %d clients, hold %v, up to %d handoffs or %v after %v to settle (longer, up to 2/3 of the ttl, until the server counter grows by at most 1 request per 100 waiters in 100ms); W5 %d leases (acquired %d at a time) under Hold with ttl %v for %v",
			c.W4Waiters, c.W4Clients, c.W4Hold, c.W4Handoffs, c.W4Time, c.W4Settle, c.W5Leases, c.W5Parallel, c.W5TTL, c.W5Time)
	}
	if len(c.Workloads) > 0 {
		settings += fmt.Sprintf("; workloads %s only", strings.Join(c.Workloads, ", "))
	}
	out = append(out, KV{"settings", settings})
	out = append(out, KV{"servers", "every server on 127.0.0.1 of this machine, started by internal/testenv; clients in the same process as the benchmark"})
	return out
}

// loadText describes the load averages, all three or the 1-minute one only.
func (rep *Report) loadText(all bool) string {
	before, after := rep.LoadBefore, rep.LoadAfter
	s := fmt.Sprintf("%s at the start, %s at the end (1, 5, 15 min)", before, after)
	if !all {
		first := func(l string) string {
			if f := strings.Fields(l); len(f) > 0 {
				return f[0]
			}
			return l
		}
		s = fmt.Sprintf("%s at the start, %s at the end (1-minute average, %d cores)", first(before), first(after), rep.Cores)
	}
	if rep.shared() {
		s += "; the machine was shared with other work during the run, so absolute numbers are low and noisy: compare rows of this run with each other"
	}
	return s
}

// spread is the lowest and the highest of W2's round p50s, or "-".
func spread(r Result) string {
	if r.Rounds < 2 || r.P50Hi <= 0 {
		return "-"
	}
	return dur(r.P50Lo) + " - " + dur(r.P50Hi)
}

// perOp formats the server requests per W4 handoff or W5 renewal: "-" when there
// is no counter.
func perOp(r Result) string {
	if r.ReqPerOp < 0 {
		return "-"
	}
	if r.ReqPerOp >= 100 {
		return strconv.FormatFloat(r.ReqPerOp, 'f', 0, 64)
	}
	return strconv.FormatFloat(r.ReqPerOp, 'f', 1, 64)
}
