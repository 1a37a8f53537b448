// Command memlock runs one job under a lock of the in-process backend: the lock
// excludes goroutines of this process only, which is what tests of code that takes
// a distlock.Locker need. While the job runs, a second Do on the same key finds it
// held.
//
//	go run ./examples/memlock
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/memlock"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "memlock:", err)
		os.Exit(1)
	}
}

func run() error {
	locker := memlock.New()
	defer locker.Close() // as every backend's Locker: later calls and Waits get ErrClosed
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts := &distlock.DoOptions{TTL: 10 * time.Second, Observer: distlock.Observer{Logger: logger}}
	return distlock.Do(context.Background(), locker, "example-job", opts, func(ctx context.Context) error {
		fmt.Println("holding example-job")
		// Another instance (here: another Do in this process) does not get it.
		err := distlock.Do(ctx, locker, "example-job", nil, func(context.Context) error {
			return errors.New("ran twice")
		})
		if !errors.Is(err, distlock.ErrLocked) {
			return fmt.Errorf("second Do: %v, want ErrLocked", err)
		}
		fmt.Println("a second Do found it held:", err)
		return nil
	})
}
