package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/distlock/distlock"
)

// statusSessionTimeout is the session timeout of status's ZooKeeper connection.
const statusSessionTimeout = 10 * time.Second

// cmdStatus is "distlock status".
func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	backendURL := fs.String("backend", "", "backend URL")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usageText)
			return exitOK
		}
		fmt.Fprintf(stderr, "distlock status: %s\n", oneLine(err))
		return exitUsage
	}
	if fs.NArg() != 1 || fs.Arg(0) == "" {
		fmt.Fprintln(stderr, "distlock status: want exactly one KEY: distlock status [--backend URL] KEY")
		return exitUsage
	}
	key := fs.Arg(0)

	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	b, err := openBackend(ctx, *backendURL, env, openOptions{ttl: statusSessionTimeout})
	if err != nil {
		fmt.Fprintf(stderr, "distlock status: %s\n", oneLine(err))
		if isUsage(err) {
			return exitUsage
		}
		return exitFailed
	}
	defer b.close()
	in, ok := b.locker.(distlock.Inspector)
	if !ok {
		fmt.Fprintf(stderr, "distlock status: the backend %T cannot report holders\n", b.locker)
		return exitUsage
	}
	h, err := in.Inspect(ctx, key)
	switch {
	case errors.Is(err, distlock.ErrNotHeld):
		fmt.Fprintf(stdout, "%q is free\n", key)
		return exitFree
	case errors.Is(err, distlock.ErrInvalid):
		fmt.Fprintf(stderr, "distlock status: %s\n", oneLine(err))
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "distlock status: inspect %q: %s\n", key, oneLine(err))
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
