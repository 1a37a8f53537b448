package main

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestCrossBuild builds distlock for the platforms whose build once broke: Windows
// (no process groups: run refuses there), macOS and FreeBSD (no pidfd), and one
// without an SQLite port (DragonFly). The first run compiles every dependency for
// each platform; later runs hit the build cache.
func TestCrossBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles the dependencies on a cold cache")
	}
	gotool, err := goTool()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ goos, goarch string }{
		{"windows", "amd64"}, {"darwin", "arm64"}, {"freebsd", "amd64"}, {"dragonfly", "amd64"},
	} {
		t.Run(p.goos+"/"+p.goarch, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, gotool, "build", "-o", os.DevNull, ".")
			cmd.Env = append(os.Environ(), "GOOS="+p.goos, "GOARCH="+p.goarch, "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("GOOS=%s GOARCH=%s go build: %v\n%s", p.goos, p.goarch, err, out)
			}
		})
	}
}
