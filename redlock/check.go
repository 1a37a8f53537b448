package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/internal/redisx"
)

// checkTimeout bounds CheckServer's wait for each master.
const checkTimeout = 5 * time.Second

// nodeCheck is one master's part of a CheckServer report.
type nodeCheck struct {
	s  redisx.Server
	fs []redisx.Finding
}

// CheckServer reads the settings of every master (one round trip each, all at
// once) and reports each one that breaks RedLock's assumptions (see "Safety
// assumptions" in the package documentation): maxmemory-policy other than
// noeviction, appendfsync other than always, appendonly no with RDB snapshots (a
// restart then brings back old data, which redlock cannot tell from current data),
// a master with replicas or that is a replica or a Cluster node, two clients that
// reach the same server (one run_id). A master that does not answer, or refuses a
// command (CONFIG renamed or denied by an ACL), gives a finding that says what could
// not be checked; the error, an *distlock.OpError, is for when no master could be
// read at all. The Report lists the Servers read and the Findings, and says
// whether all is OK (its String is for people). Call it at start-up; New does no
// I/O.
func (l *Locker) CheckServer(ctx context.Context) (redisx.Report, error) {
	if err := l.group.Enter(); err != nil {
		return redisx.Report{}, opError("CheckServer", "", err)
	}
	defer l.group.Leave()
	res := fanout(ctx, l, nil, checkTimeout, func(ctx context.Context, i int) (nodeCheck, error) {
		s, fs, err := redisx.CheckOne(ctx, l.nodes[i].Client, l.nodes[i].Name, redisx.RedLockNode)
		return nodeCheck{s, fs}, err
	}, nil, nil, false)
	var r redisx.Report
	var errs []error
	seen := make(map[string]string) // run_id -> node name
	for i, c := range res {
		name := l.nodes[i].Name
		if c.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, c.err))
			r.Findings = append(r.Findings, redisx.Finding{Server: name, Setting: "connection", Unchecked: true,
				Message: fmt.Sprintf("not reached (%v): its settings could not be checked", c.err)})
			continue
		}
		r.Servers = append(r.Servers, c.v.s)
		r.Findings = append(r.Findings, c.v.fs...)
		if id := c.v.s.RunID; id != "" {
			if other, dup := seen[id]; dup {
				r.Findings = append(r.Findings, redisx.Finding{Server: name, Setting: "run_id", Value: id,
					Message: fmt.Sprintf("the same server as %s: each master must be counted once, or one server's loss counts twice", other)})
			}
			seen[id] = name
		}
	}
	if len(r.Servers) == 0 {
		return r, opError("CheckServer", "", fmt.Errorf("no master could be read: %w", errors.Join(errs...)))
	}
	return r, nil
}
