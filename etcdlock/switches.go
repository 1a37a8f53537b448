package etcdlock

import "strings"

// disabled lists speed mechanisms to turn off, comma-separated, for A/B
// measurement only: go test -c -ldflags '-X github.com/distlock/distlock/etcdlock.disabled=spares,batch'.
var disabled string

var off = func() map[string]bool {
	m := map[string]bool{}
	for _, s := range strings.Split(disabled, ",") {
		if s != "" {
			m[s] = true
		}
	}
	return m
}()
