package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// checkTimeout bounds the whole of check.
const checkTimeout = 20 * time.Second

// exitUnsafe is check's status when a setting can free a held lock or repeat a
// fence.
const exitUnsafe = 1

// A severity grades one finding of check.
type severity int

const (
	sevOK        severity = iota // a setting that was read and is safe
	sevNote                      // worth knowing; it does not break exclusion or fences
	sevUnsafe                    // it can free a held lock, or repeat a fence
	sevUnchecked                 // it could not be read
)

func (s severity) String() string {
	return [...]string{"ok", "note", "UNSAFE", "unchecked"}[s]
}

// A finding is one line of check's report.
type finding struct {
	sev     severity
	setting string // "fsync", "maxmemory-policy", "members", ...
	value   string // the value read, if any
	msg     string // for notes, unsafe and unchecked settings: what it does to locks, what to set
}

// A checkReport is what check read from a backend.
type checkReport struct {
	servers  []string // one line per server: its address, version and role
	findings []finding
}

func (r *checkReport) server(format string, args ...any) {
	r.servers = append(r.servers, fmt.Sprintf(format, args...))
}

func (r *checkReport) add(sev severity, setting, value, format string, args ...any) {
	r.findings = append(r.findings, finding{sev: sev, setting: setting, value: value, msg: fmt.Sprintf(format, args...)})
}

// ok records a setting that was read and is safe.
func (r *checkReport) ok(setting, value string) { r.add(sevOK, setting, value, "") }

// count returns how many findings have severity s.
func (r *checkReport) count(s severity) int {
	n := 0
	for _, f := range r.findings {
		if f.sev == s {
			n++
		}
	}
	return n
}

// verdict returns the exit status and the last line of the report.
func (r *checkReport) verdict() (int, string) {
	switch {
	case r.count(sevUnsafe) > 0:
		return exitUnsafe, fmt.Sprintf("unsafe: %d setting(s) can free a held lock or repeat a fence", r.count(sevUnsafe))
	case r.count(sevUnchecked) > 0:
		return exitFailed, fmt.Sprintf("could not check: %d setting(s) could not be read; nothing unsafe among the others", r.count(sevUnchecked))
	}
	return exitOK, "safe: no setting found that can free a held lock or repeat a fence"
}

// write prints r: the backend, each server, each finding (unsafe first), the
// verdict.
func (r *checkReport) write(w io.Writer, backend string) int {
	fmt.Fprintf(w, "%-10s %s\n", "backend", backend)
	for _, s := range r.servers {
		fmt.Fprintf(w, "%-10s %s\n", "server", s)
	}
	for _, sev := range []severity{sevUnsafe, sevUnchecked, sevNote, sevOK} {
		for _, f := range r.findings {
			if f.sev != sev {
				continue
			}
			line := f.setting
			if f.value != "" {
				line += "=" + f.value
			}
			if f.msg != "" {
				line += ": " + f.msg
			}
			fmt.Fprintf(w, "%-10s %s\n", f.sev, line)
		}
	}
	code, v := r.verdict()
	fmt.Fprintf(w, "%-10s %s\n", "result", v)
	return code
}

// A checker reads the settings of the backend that u names.
type checker func(ctx context.Context, u *backendURL) (*checkReport, error)

func checkers() map[string]checker {
	return map[string]checker{
		"redis":          checkRedis,
		"rediss":         checkRedis,
		"redis-sentinel": checkRedis,
		"redlock":        checkRedlock,
		"zk":             checkZooKeeper,
		"etcd":           checkEtcd,
		"postgres":       checkPostgres,
		"postgresql":     checkPostgres,
		"mysql":          checkMySQL,
		"sqlite":         checkSQLiteURL,
	}
}

// cmdCheck is "distlock check": it connects to the backend, reads the server
// settings that matter for lock safety, prints them, and exits 0 (nothing unsafe),
// 1 (unsafe), 125 (could not check) or 2 (bad usage).
func cmdCheck(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int {
	var raw string
	log := &flagLog{}
	fs := newFlagSet("check")
	fs.SetInterspersed(true)
	fs.Var(&stringValue{p: &raw, log: log, name: "backend"}, "backend", "")
	rest, _, err := parsePhase(fs, args)
	if isHelp(err) {
		fmt.Fprint(stdout, usageText)
		return exitOK
	}
	if err == nil && len(rest) > 0 {
		err = usagef("unexpected argument %s: distlock check [--backend URL]", quoteArg(rest[0]))
	}
	if err != nil {
		fmt.Fprintf(stderr, "distlock check: %s\n", oneLine(err))
		return exitUsage
	}
	if raw == "" {
		raw, _ = lookupEnv(env, envBackend)
	}
	red := redactorFor(raw, env)
	fail := func(err error) int {
		fmt.Fprintln(stderr, red.text("distlock check: "+oneLine(err)))
		if isUsage(err) {
			return exitUsage
		}
		return exitFailed
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	var (
		r    *checkReport
		name string
	)
	if raw == "" {
		path, err := defaultSQLitePath(env)
		if err != nil {
			return fail(err)
		}
		name = "sqlite://" + path + " (the default)"
		r, err = checkSQLite(ctx, path)
		if err != nil {
			return fail(err)
		}
	} else {
		u, err := parseBackendURL(raw)
		if err != nil {
			return fail(err)
		}
		check, ok := checkers()[u.scheme]
		if !ok {
			return fail(badURL(u, "unknown scheme %q (want %s)", u.scheme, schemeList))
		}
		name = u.redacted()
		if r, err = check(ctx, u); err != nil {
			return fail(err)
		}
	}
	var b strings.Builder
	code := r.write(&b, name)
	fmt.Fprint(stdout, red.text(b.String()))
	return code
}
