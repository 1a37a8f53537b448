package redisx

import "strings"

// abOff names the speed mechanisms turned off, for A/B measurements only (set with
// -ldflags '-X github.com/distlock/distlock/internal/redisx.abOff=pool,shared').
var abOff string

var (
	abNoPool   = strings.Contains(abOff, "pool")
	abNoShared = strings.Contains(abOff, "shared")
)
