// Package election elects one leader among candidates over any distlock.Locker:
// the leader is the holder of one key, kept by a renewed lease.
//
//	e, err := election.New(locker, "orders-leader", &election.Options{TTL: 15 * time.Second})
//	...
//	lead, err := e.Campaign(ctx) // blocks until this candidate leads, or ctx ends
//	if err != nil {
//		return err
//	}
//	defer lead.Resign(context.WithoutCancel(ctx)) // hands over at once
//	// Lead while lead.Context() lives; pass lead.Term() to what you write to.
//	return serve(lead.Context(), lead.Term())
//
// # Guarantees
//
// They are the Locker's (see distlock.Locker): at any moment at most one candidate's
// Leadership is valid, where valid means that its Err is nil, which it checks
// against the lease's Expires on the monotonic clock. Two leaderships never overlap,
// unless the earlier one resigned first. Leadership.Context ends at once on Resign,
// and when the lease is lost: at the latest when its Expires passes without a
// successful renewal, or earlier when the backend reports the loss
// (distlock.LossNotifier). A leader that pauses (a stop-the-world pause, a
// suspended VM) past Expires may act once more before it notices; pass Term to the
// resource it writes to, and let the resource reject a smaller term than one it
// has seen (a fencing token).
//
// When a leader crashes or is cut off, another candidate leads after the lease
// expires on the server: within Options.TTL plus the backend's grace (for
// ZooKeeper, the session timeout). When it resigns, a waiting candidate leads as
// soon as the backend wakes it: with a distlock.Waiter, promptly.
//
// # Term
//
// Leadership.Term is the Fence of the leader's lease: it strictly increases from
// one leadership to the next, across candidates and restarts (see distlock.Lease).
//
// # Observing the leader
//
// Election.Leader and Election.Observe report the current leader when the Locker is
// a distlock.Inspector (every backend of this module is): its Term, the owner
// label of its Locker (set each backend's Options.Owner to tell candidates apart;
// the default is "hostname:pid") and when its lease ends unless renewed.
//
// # Compared with peers
//
// Campaign, Resign and Observe follow etcd's concurrency.Election; Leadership's
// Context and Err play the part of Curator's LeaderLatch hasLeadership and its
// listener. github.com/distlock/distlock/gocronlock builds gocron's Elector on
// this package.
package election
