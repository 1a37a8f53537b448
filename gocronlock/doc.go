// Package gocronlock runs github.com/go-co-op/gocron/v2 jobs once per tick across
// several schedulers, over any distlock.Locker: NewLocker gives gocron's Locker
// (each run of a job holds a lease on the job's name) and NewElector gives gocron's
// Elector (only the leader's scheduler runs jobs).
//
//	lk, err := gocronlock.NewLocker(locker, &gocronlock.Options{TTL: time.Minute, MinHold: time.Second})
//	...
//	defer lk.Close() // after s.Shutdown()
//	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(lk))
//	_, err = s.NewJob(gocron.CronJob("*/5 * * * *", false),
//		gocron.NewTask(func(ctx context.Context) error {
//			ctx = lk.Context(ctx, "report") // ends if the lease is lost
//			return report(ctx)
//		}),
//		gocron.WithName("report")) // the lock key
//
// # Locker
//
// Before each run, gocron calls Lock with the job's name (gocron.WithName; else
// the function's name). Lock makes one TryLock of Options.KeyPrefix + name: when
// another scheduler holds it, the run is skipped (gocron's AfterLockError listener
// sees an error wrapping distlock.ErrLocked). While the job runs, distlock.Hold
// renews the lease every TTL/3; gocron calls Unlock when the job returns.
//
// Schedulers whose clocks differ fire the same tick a little apart: a job shorter
// than the difference would run once on each. So Unlock keeps the key until
// Options.MinHold after it was acquired (ShedLock's lockAtLeastFor), in the
// background, and the late schedulers find it taken. Set MinHold above the largest
// difference between your schedulers' clocks plus a lock's latency, and below the
// job's shortest period (else every scheduler skips the next tick).
//
// # Telling a job that its lease was lost
//
// gocron hands a job its own context, not the lease's, so a job cannot see through
// it that the lease ended (a partition from the backend longer than the TTL, a
// failover, a pause). Two ways to learn it:
//
//   - Locker.Context(ctx, name), called by the job with gocron's job name, returns
//     a context that is also cancelled when the run's lease is lost, with a cause
//     wrapping distlock.ErrNotHeld (errors.Is(context.Cause(ctx),
//     distlock.ErrNotHeld)); do the job's work under it. Locker.Lease(name) gives
//     the lease's Fence, to pass to what the job writes to.
//   - Options.OnLost is called once for every run whose lease is lost before
//     the job returns, for logs and metrics.
//
// # Elector
//
// NewElector campaigns in the background (package
// github.com/distlock/distlock/election) and IsLeader says whether this scheduler
// leads now; Elector.Context plays Locker.Context's part. With an Elector, gocron
// runs every job on the leader only, without a lock per run.
package gocronlock
