//go:build linux

package redisx_test

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/internal/redisx"
)

// voluntarySwitches sums the voluntary context switches of the process's threads.
func voluntarySwitches(t *testing.T) int64 {
	paths, err := filepath.Glob("/proc/self/task/*/status")
	require.NoError(t, err)
	var n int64
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread ended
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
				i, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				require.NoError(t, err)
				n += i
			}
		}
	}
	return n
}

// TestCallWakesNoThread: a lone Call with a context that can be cancelled, whose f
// waits for a round trip on a socket (as a go-redis command does), switches threads
// about as often as f called inline: the handoff to the worker and back does not
// wake an idle thread each way (with channels it did: 0.3 to 0.6 more switches per
// call than inline on a 2-CPU machine, against 0.0 to 0.1 now).
func TestCallWakesNoThread(t *testing.T) {
	if testing.Short() {
		t.Skip("counts context switches")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() { // an echo server, on its own thread as a server would be
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	buf := make([]byte, 1)
	roundTrip := func() (int, error) {
		if _, err := conn.Write(buf); err != nil {
			return 0, err
		}
		return io.ReadFull(conn, buf)
	}
	g := redisx.NewGroup()
	t.Cleanup(func() { g.Close(); g.Wait() })
	require.NoError(t, g.Enter())
	defer g.Leave()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 2000
	measure := func(ctx context.Context) float64 {
		for range 100 { // warm up: workers, wakers
			_, err := redisx.Call(ctx, g, roundTrip, nil)
			require.NoError(t, err)
		}
		before := voluntarySwitches(t)
		for range n {
			_, err := redisx.Call(ctx, g, roundTrip, nil)
			require.NoError(t, err)
		}
		return float64(voluntarySwitches(t)-before) / n
	}
	var more float64
	const rounds = 3
	for range rounds { // the mean of 3, against noise from other processes
		i, h := measure(context.Background()), measure(ctx)
		t.Logf("voluntary context switches per call: inline %.2f, cancellable ctx %.2f", i, h)
		more += (h - i) / rounds
	}
	require.Less(t, more, 0.15, "a cancellable Call switched threads more often than an inline one")
}
