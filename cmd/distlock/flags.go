package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Flags are parsed with spf13/pflag in phases, so that flags may come before KEY,
// between KEY and CMD, and never inside CMD: each phase parses flags up to the next
// argument that is not one (KEY, or the first word of CMD) or up to "--". A phase
// uses a new FlagSet over the same values, which keep what earlier phases set (they
// take no default when defined).

// A flagLog records the last value a phase set, so that "--wait 1s" can be told
// from "--wait KEY".
type flagLog struct {
	name string // the flag last set
	bare bool   // it was given without a value ("--wait")
}

// durationValue is a positive (or, with zeroOK, non-negative) duration flag whose
// error says what a duration looks like.
type durationValue struct {
	p      *time.Duration
	zeroOK bool
	log    *flagLog
	name   string
}

func (d *durationValue) String() string { return d.p.String() }
func (d *durationValue) Type() string   { return "duration" }

func (d *durationValue) Set(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	switch {
	case v < 0:
		return errors.New("must not be negative")
	case v == 0 && !d.zeroOK:
		return errors.New("must be positive")
	}
	*d.p = v
	d.log.name, d.log.bare = d.name, false
	return nil
}

// parseDuration is time.ParseDuration with an error that shows what is wanted.
func parseDuration(s string) (time.Duration, error) {
	v, err := time.ParseDuration(s)
	if err == nil {
		return v, nil
	}
	if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
		return 0, fmt.Errorf("want a duration with a unit, such as %ss or %sm", s, s)
	}
	return 0, errors.New("want a duration such as 30s, 5m or 1h30m")
}

// looksLikeDuration reports whether s would be read as a duration: one with a
// unit, or a bare number (which is then an error that asks for a unit).
func looksLikeDuration(s string) bool {
	if _, err := time.ParseDuration(s); err == nil {
		return true
	}
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// stringValue is a string flag.
type stringValue struct {
	p    *string
	log  *flagLog
	name string
}

func (v *stringValue) String() string { return *v.p }
func (v *stringValue) Type() string   { return "string" }
func (v *stringValue) Set(s string) error {
	*v.p = s
	v.log.name, v.log.bare = v.name, false
	return nil
}

// boolValue is a flag without a value (--name, or --name=false).
type boolValue struct {
	p    *bool
	log  *flagLog
	name string
}

func (v *boolValue) String() string { return strconv.FormatBool(*v.p) }
func (v *boolValue) Type() string   { return "bool" }
func (v *boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	*v.p = b
	v.log.name, v.log.bare = v.name, false
	return nil
}

// waitValue is --wait (wait without limit), --wait D or --wait=D.
type waitValue struct {
	p   *waitFlag
	log *flagLog
}

// noOpt is the value pflag gives a flag used without one; a user cannot type it.
const noOpt = "\x00"

func (w *waitValue) String() string {
	switch {
	case !w.p.on:
		return "false"
	case w.p.timeout > 0:
		return w.p.timeout.String()
	}
	return "true"
}

func (w *waitValue) Type() string { return "duration" }

func (w *waitValue) Set(s string) error {
	switch s {
	case noOpt, "true":
		*w.p = waitFlag{on: true}
		w.log.name, w.log.bare = "wait", s == noOpt
		return nil
	case "false":
		*w.p = waitFlag{}
		w.log.name, w.log.bare = "wait", false
		return nil
	}
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	if d <= 0 {
		return errors.New("must be positive (--wait alone waits without limit)")
	}
	*w.p = waitFlag{on: true, timeout: d}
	w.log.name, w.log.bare = "wait", false
	return nil
}

// newFlagSet returns an empty FlagSet that reports errors instead of printing
// them.
func newFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetInterspersed(false)
	fs.Usage = func() {}
	fs.SetOutput(discard{})
	return fs
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// parsePhase parses the flags at the start of args, and returns the arguments
// after them, and whether the flags ended at "--" (which is dropped).
func parsePhase(fs *pflag.FlagSet, args []string) (rest []string, dash bool, err error) {
	if err := fs.Parse(args); err != nil {
		return nil, false, flagError(fs, args, err)
	}
	return fs.Args(), fs.ArgsLenAtDash() == 0, nil
}

// flagError rewrites one of pflag's errors as a line for the user.
func flagError(fs *pflag.FlagSet, args []string, err error) error {
	if errors.Is(err, pflag.ErrHelp) {
		return err
	}
	var (
		notExist *pflag.NotExistError
		required *pflag.ValueRequiredError
		invalid  *pflag.InvalidValueError
	)
	switch {
	case errors.As(err, &invalid):
		name := invalid.GetFlag().Name
		return usagef("--%s %s: %v", name, quoteArg(invalid.GetValue()), invalid.Unwrap())
	case errors.As(err, &required):
		f := required.GetFlag()
		return usagef("--%s needs a value, such as --%s %s", f.Name, f.Name, exampleValue(f))
	case errors.As(err, &notExist):
		// -ttl, as Go's flag package accepts: pflag reads it as -t -t -l.
		if short := notExist.GetSpecifiedShortnames(); short != "" {
			name, _, _ := strings.Cut(short, "=")
			if fs.Lookup(name) != nil {
				return usagef("unknown flag -%s: long flags take two dashes: --%s", short, short)
			}
			return usagef("unknown flag -%s (see distlock help)", short)
		}
		return usagef("unknown flag --%s (see distlock help)", notExist.GetSpecifiedName())
	}
	return usagef("%v", err)
}

// exampleValue returns an example value for f, for messages.
func exampleValue(f *pflag.Flag) string {
	switch f.Name {
	case "backend":
		return "redis://host:6379"
	case "owner":
		return "web-1"
	}
	return "30s"
}

// quoteArg quotes s for a message when it is empty or has spaces.
func quoteArg(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\n\"'") {
		return strconv.Quote(s)
	}
	return s
}
