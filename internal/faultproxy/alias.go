// Package faultproxy is a transitional alias of the public package
// github.com/distlock/distlock/faultproxy, kept while the tests that import this
// path move to the public one.
package faultproxy

import fp "github.com/distlock/distlock/faultproxy"

type (
	Proxy     = fp.Proxy
	Options   = fp.Options
	Stats     = fp.Stats
	Hold      = fp.Hold
	HoldProxy = fp.HoldProxy
)

var (
	New          = fp.New
	NewHoldProxy = fp.NewHoldProxy
)

const (
	DefaultListenAddr  = fp.DefaultListenAddr
	DefaultDialTimeout = fp.DefaultDialTimeout
)
