package benchmarks

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// runLine starts the comment line of matrix.csv that holds the run's facts as
// JSON, for ReadCSV; the other comment lines say the same for people.
const runLine = "# run (JSON): "

// csvColumns are matrix.csv's columns. Times are in milliseconds and rates per
// second, written with all their digits, so that ReadCSV gets back exactly what
// was measured.
var csvColumns = []string{"subject", "protocol", "role", "workload", "goroutines", "n", "elapsed_s", "rate_per_s",
	"p50_ms", "p99_ms", "max_ms", "gaps", "bound_ms", "bound_kind", "baseline", "ratio", "violations", "status", "error",
	"w1_baseline", "waiter", "wakeup", "note",
	"rounds", "p50_lo_ms", "p50_hi_ms", "requests_per_op", "counter", "cpu_per_op_ms", "heap_per_lease_bytes", "goroutines_per_lease", "lost",
	"rate_lo_per_s", "rate_hi_per_s"}

// csvAdded are the columns that matrix.csv files written before W2's rounds, W4,
// W5 and W1's rate spread lack: ReadCSV leaves their fields at their defaults.
var csvAdded = map[string]bool{"rounds": true, "p50_lo_ms": true, "p50_hi_ms": true, "requests_per_op": true, "counter": true,
	"cpu_per_op_ms": true, "heap_per_lease_bytes": true, "goroutines_per_lease": true, "lost": true,
	"rate_lo_per_s": true, "rate_hi_per_s": true}

// runFacts is what the run's JSON line holds: the Report without its Results.
type runFacts struct {
	Started    time.Time
	Took       time.Duration
	Config     Config
	Commit     Commit
	Machine    []KV
	Cores      int
	Versions   []KV
	LoadBefore string
	LoadAfter  string
}

// ms formats d in milliseconds, exactly.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64)
}

// CSV renders every result, one line per cell, after '#' comment lines that
// carry the header (machine, date, commit, versions, settings) and the run's
// facts as JSON.
func (rep *Report) CSV() ([]byte, error) {
	var b bytes.Buffer
	for _, kv := range rep.header() {
		fmt.Fprintf(&b, "# %s: %s\n", kv.Key, strings.ReplaceAll(kv.Value, "\n", " "))
	}
	facts, err := json.Marshal(runFacts{rep.Started, rep.Took, rep.Config, rep.Commit, rep.Machine, rep.Cores, rep.Versions, rep.LoadBefore, rep.LoadAfter})
	if err != nil {
		return nil, err
	}
	b.WriteString(runLine)
	b.Write(facts)
	b.WriteByte('\n')
	w := csv.NewWriter(&b)
	_ = w.Write(csvColumns)
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
		perOp := ""
		if r.ReqPerOp >= 0 {
			perOp = strconv.FormatFloat(r.ReqPerOp, 'f', -1, 64)
		}
		_ = w.Write([]string{r.Subject, r.Protocol, string(r.Role), r.Workload, strconv.Itoa(r.Goroutines), strconv.Itoa(r.N),
			strconv.FormatFloat(r.Elapsed.Seconds(), 'f', -1, 64), strconv.FormatFloat(r.Rate, 'f', -1, 64),
			ms(r.P50), ms(r.P99), ms(r.Max), strconv.Itoa(r.Gaps), ms(r.Bound), r.BoundKind, name, ratioS,
			strconv.Itoa(r.Violations), st, r.Err,
			strconv.FormatBool(r.Baseline), strconv.FormatBool(r.Waiter), r.Wakeup, r.Note,
			strconv.Itoa(r.Rounds), ms(r.P50Lo), ms(r.P50Hi), perOp, r.Counter, ms(r.CPUPerOp),
			strconv.FormatFloat(r.HeapPerLease, 'f', -1, 64), strconv.FormatFloat(r.GoroutinesPerLease, 'f', -1, 64), strconv.Itoa(r.Lost),
			strconv.FormatFloat(r.RateLo, 'f', -1, 64), strconv.FormatFloat(r.RateHi, 'f', -1, 64)})
	}
	w.Flush()
	return b.Bytes(), w.Error()
}

// ReadCSV rebuilds the Report that CSV wrote, so that its Markdown can be
// rendered again without measuring. The baseline and ratio columns are computed
// again from the rows.
func ReadCSV(in io.Reader) (*Report, error) {
	data, err := io.ReadAll(in)
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	found := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), runLine); ok {
			var f runFacts
			if err := json.Unmarshal([]byte(line), &f); err != nil {
				return nil, fmt.Errorf("matrix.csv: the run line: %w", err)
			}
			rep.Started, rep.Took, rep.Config, rep.Commit = f.Started, f.Took, f.Config, f.Commit
			rep.Machine, rep.Cores, rep.Versions, rep.LoadBefore, rep.LoadAfter = f.Machine, f.Cores, f.Versions, f.LoadBefore, f.LoadAfter
			found = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !found {
		return nil, errors.New("matrix.csv: no " + strings.TrimSpace(runLine) + " line (written by an older version of the matrix)")
	}
	cr := csv.NewReader(bytes.NewReader(data))
	cr.Comment = '#'
	rows, err := cr.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("matrix.csv: %w", err)
	}
	if len(rows) == 0 {
		return nil, errors.New("matrix.csv: no header row")
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	for _, name := range csvColumns {
		if _, ok := col[name]; !ok && !csvAdded[name] {
			return nil, fmt.Errorf("matrix.csv: no column %q", name)
		}
	}
	for n, cells := range rows[1:] {
		r, err := parseRow(cells, col)
		if err != nil {
			return nil, fmt.Errorf("matrix.csv: row %d: %w", n+2, err)
		}
		rep.Results = append(rep.Results, r)
	}
	return rep, nil
}

// parseRow reads one result; col maps column names to indexes.
func parseRow(cells []string, col map[string]int) (Result, error) {
	var errs []error
	get := func(name string) string {
		i, ok := col[name]
		if !ok { // a column that an older file lacks
			return ""
		}
		return cells[i]
	}
	atoi := func(name string) int {
		if _, ok := col[name]; !ok {
			return 0
		}
		v, err := strconv.Atoi(get(name))
		errs = append(errs, err)
		return v
	}
	float := func(name string) float64 {
		if _, ok := col[name]; !ok {
			return 0
		}
		v, err := strconv.ParseFloat(get(name), 64)
		errs = append(errs, err)
		return v
	}
	msDur := func(name string) time.Duration {
		return time.Duration(math.Round(float(name) * float64(time.Millisecond)))
	}
	boolean := func(name string) bool {
		v, err := strconv.ParseBool(get(name))
		errs = append(errs, err)
		return v
	}
	r := Result{
		Subject: get("subject"), Protocol: get("protocol"), Role: Role(get("role")), Workload: get("workload"),
		Goroutines: atoi("goroutines"), N: atoi("n"),
		Elapsed: time.Duration(math.Round(float("elapsed_s") * float64(time.Second))), Rate: float("rate_per_s"),
		P50: msDur("p50_ms"), P99: msDur("p99_ms"), Max: msDur("max_ms"), Gaps: atoi("gaps"),
		Bound: msDur("bound_ms"), BoundKind: get("bound_kind"), Violations: atoi("violations"),
		Err: get("error"), Baseline: boolean("w1_baseline"), Waiter: boolean("waiter"),
		Wakeup: get("wakeup"), Note: get("note"),
		Rounds: atoi("rounds"), P50Lo: msDur("p50_lo_ms"), P50Hi: msDur("p50_hi_ms"), Counter: get("counter"),
		CPUPerOp: msDur("cpu_per_op_ms"), HeapPerLease: float("heap_per_lease_bytes"),
		GoroutinesPerLease: float("goroutines_per_lease"), Lost: atoi("lost"), ReqPerOp: -1,
		RateLo: float("rate_lo_per_s"), RateHi: float("rate_hi_per_s"),
	}
	if v := get("requests_per_op"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		errs = append(errs, err)
		r.ReqPerOp = f
	}
	if u, ok := strings.CutPrefix(get("status"), "not measured: "); ok {
		r.Unavailable = u
	}
	return r, errors.Join(errs...)
}
