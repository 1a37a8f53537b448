package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/distlock/distlock"
)

// statusSessionTimeout is the session timeout of status's ZooKeeper connection.
const statusSessionTimeout = 10 * time.Second

// cmdStatus is "distlock status".
func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int {
	var backendURL string
	log := &flagLog{}
	fs := newFlagSet("status")
	fs.SetInterspersed(true)
	fs.Var(&stringValue{p: &backendURL, log: log, name: "backend"}, "backend", "")
	rest, _, err := parsePhase(fs, args)
	if isHelp(err) {
		fmt.Fprint(stdout, usageText)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "distlock status: %s\n", oneLine(err))
		return exitUsage
	}
	if len(rest) != 1 || rest[0] == "" {
		fmt.Fprintln(stderr, "distlock status: want exactly one KEY: distlock status [--backend URL] KEY")
		return exitUsage
	}
	key := rest[0]
	red := redactorFor(backendURL, env)
	fail := func(format string, args ...any) {
		fmt.Fprintln(stderr, red.text("distlock status: "+fmt.Sprintf(format, args...)))
	}

	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	b, err := openBackend(ctx, backendURL, env, openOptions{ttl: statusSessionTimeout})
	if err != nil {
		fail("%s", oneLine(err))
		if isUsage(err) {
			return exitUsage
		}
		return exitFailed
	}
	defer b.close()
	in, ok := b.locker.(distlock.Inspector)
	if !ok {
		fail("the backend %T cannot report holders", b.locker)
		return exitUsage
	}
	h, err := in.Inspect(ctx, key)
	switch {
	case errors.Is(err, distlock.ErrNotHeld):
		fmt.Fprintf(stdout, "%q is free\n", key)
		return exitFree
	case errors.Is(err, distlock.ErrInvalid):
		fail("%s", oneLine(err))
		return exitUsage
	case err != nil:
		fail("inspect %q: %s", key, oneLine(err))
		return exitFailed
	}
	owner := h.Owner
	if owner == "" {
		owner = "-"
	}
	fmt.Fprintf(stdout, "key:       %q\nstate:     held\nowner:     %s\nfence:     %d\nremaining: %v\n",
		key, owner, h.Fence, time.Until(h.Expires).Round(time.Millisecond))
	return exitOK
}
