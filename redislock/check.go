package redislock

import (
	"context"

	"github.com/distlock/distlock/driver"
	"github.com/distlock/distlock/internal/redisx"
)

// A Report is what CheckServer read from the Redis servers behind the client
// (Servers) and the settings it found unsafe for locks (Findings); OK reports that
// there are none, and String lists them.
type Report = redisx.Report

// CheckServer reads the settings of the Redis server(s) behind the Locker's client
// (every master of a Cluster) and reports each one that can free a held lock or
// repeat a fence (see "Safety assumptions" in the package documentation):
// maxmemory-policy other than noeviction, appendonly no, appendfsync other than
// always, a replica behind the client, a master with replicas (failover). It costs
// one round trip per server; call it at start-up, and log or refuse the Report's
// findings. A command the server refuses (CONFIG renamed, or denied by an ACL, as on
// several managed services) gives a finding that says what could not be checked, not
// an error; the error, an *distlock.OpError, is for a server that could not be
// reached.
//
// New does not run this check by itself: New does no I/O and has no context, and
// what to do with an unsafe setting (log, alert, refuse to start) is the caller's
// decision.
func (l *Locker) CheckServer(ctx context.Context) (Report, error) {
	cctx, end, err := l.calls.Begin(ctx)
	if err != nil {
		return Report{}, opError("CheckServer", "", err)
	}
	defer end()
	r, err := redisx.Check(cctx, l.client, redisx.Single)
	if err != nil {
		return r, opError("CheckServer", "", driver.Err(cctx, err))
	}
	return r, nil
}
