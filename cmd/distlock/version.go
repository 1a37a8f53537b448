package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// versionText returns what --version prints: the module version that go install
// recorded ("devel" for a build in a checkout), the commit when the build
// recorded one, and the Go toolchain and platform.
func versionText() string {
	version, commit := "devel", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			version = v
		}
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" {
			if len(rev) > 12 {
				rev = rev[:12]
			}
			commit = ", commit " + rev
			if modified == "true" {
				commit += " (modified)"
			}
		}
	}
	return fmt.Sprintf("distlock %s (%s%s, %s/%s)\n", version, runtime.Version(), commit, runtime.GOOS, runtime.GOARCH)
}
