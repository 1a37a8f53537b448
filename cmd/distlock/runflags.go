package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// waitFlag is --wait (wait without limit) or --wait D.
type waitFlag struct {
	on      bool
	timeout time.Duration // 0: no limit
}

// runConfig is the parsed command line of run.
type runConfig struct {
	backend   string
	ttl       time.Duration
	wait      waitFlag
	minHold   time.Duration
	killAfter time.Duration
	owner     string
	verbose   bool
	key       string
	argv      []string
}

// runFlags returns a FlagSet for one phase of run's arguments, over c.
func runFlags(c *runConfig, log *flagLog) *pflag.FlagSet {
	fs := newFlagSet("run")
	fs.Var(&stringValue{p: &c.backend, log: log, name: "backend"}, "backend", "")
	fs.Var(&durationValue{p: &c.ttl, log: log, name: "ttl"}, "ttl", "")
	fs.VarPF(&waitValue{p: &c.wait, log: log}, "wait", "w", "").NoOptDefVal = noOpt
	fs.Var(&durationValue{p: &c.minHold, zeroOK: true, log: log, name: "min-hold"}, "min-hold", "")
	fs.Var(&durationValue{p: &c.killAfter, zeroOK: true, log: log, name: "kill-after"}, "kill-after", "")
	fs.Var(&stringValue{p: &c.owner, log: log, name: "owner"}, "owner", "")
	fs.VarPF(&boolValue{p: &c.verbose, log: log, name: "verbose"}, "verbose", "v", "").NoOptDefVal = "true"
	return fs
}

// parseRun parses run's arguments: distlock run [flags] KEY [flags] [--] CMD [ARGS...].
// Flags may come before and after KEY. CMD starts after "--", or, without "--", at
// the first argument after KEY that is not a flag; everything from there on is
// CMD's. After a bare --wait, an argument that looks like a duration (1s, 5m, or a
// number, which is then an error asking for a unit) is its timeout. The error is
// one line, for exit status 2.
func parseRun(args []string) (*runConfig, error) {
	c := &runConfig{ttl: 30 * time.Second, killAfter: 10 * time.Second}
	log := &flagLog{}
	// flags parses flags from the start of args, taking a duration after a bare
	// --wait as its timeout; took names that duration, for messages.
	flags := func(args []string) (rest []string, dash bool, took string, err error) {
		for {
			*log = flagLog{}
			rest, dash, err = parsePhase(runFlags(c, log), args)
			if err != nil || dash || len(rest) == 0 {
				return rest, dash, took, err
			}
			if !log.bare || log.name != "wait" || !looksLikeDuration(rest[0]) {
				return rest, false, took, nil
			}
			w := &waitValue{p: &c.wait, log: log}
			if err := w.Set(rest[0]); err != nil {
				return nil, false, took, usagef("--wait %s: %v", quoteArg(rest[0]), err)
			}
			took, args = rest[0], rest[1:]
		}
	}
	const form = "distlock run [flags] KEY [flags] -- CMD [ARGS...]"
	rest, dash, took, err := flags(args)
	if err != nil {
		return nil, err
	}
	if len(rest) == 0 || dash {
		what := "missing KEY and CMD"
		if dash {
			what = "missing KEY before --"
		}
		if took != "" {
			what += fmt.Sprintf(" (%s was taken as the timeout of --wait; a KEY that looks like a duration goes before --wait, or write --wait=%s)", took, took)
		}
		return nil, usagef("%s: %s", what, form)
	}
	c.key = rest[0]
	if c.key == "" {
		return nil, usagef("empty KEY: %s", form)
	}
	rest, _, _, err = flags(rest[1:])
	if err != nil {
		return nil, err
	}
	if len(rest) == 0 {
		return nil, usagef("missing CMD after KEY %q: %s", c.key, form)
	}
	c.argv = rest
	return c, nil
}

// errHelp is pflag's answer to -h and --help.
var errHelp = pflag.ErrHelp

// isHelp reports whether err asks for the usage text.
func isHelp(err error) bool { return errors.Is(err, errHelp) }
