package gocronlock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/distlock/distlock/gocronlock"
	"github.com/distlock/distlock/memlock"
)

func ExampleNewLocker() {
	// Every scheduler uses the same backend; memlock stands in for redislock.New,
	// etcdlock.New, postgres.New, ...
	locker := memlock.New()
	defer locker.Close()
	lk, err := gocronlock.NewLocker(locker, &gocronlock.Options{TTL: time.Minute, MinHold: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(lk))
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	_, err = s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()),
		gocron.NewTask(func(ctx context.Context) error {
			defer close(done)
			ctx = lk.Context(ctx, "nightly-report") // cancelled if the lease is lost
			lease, _ := lk.Lease("nightly-report")
			fmt.Println("report under fence", lease.Fence, "- lease held:", ctx.Err() == nil)
			return nil // a long job would stop when ctx ends
		}),
		gocron.WithName("nightly-report")) // the lock's key
	if err != nil {
		log.Fatal(err)
	}
	s.Start()
	<-done
	if err := s.Shutdown(); err != nil {
		log.Fatal(err)
	}
	lk.Close() // after Shutdown: releases the key once MinHold has passed
	// Output: report under fence 1 - lease held: true
}

func ExampleNewElector() {
	locker := memlock.New() // a backend that every scheduler shares
	defer locker.Close()
	el, err := gocronlock.NewElector(locker, "scheduler-leader", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer el.Close() // resigns: another scheduler leads at once
	for el.IsLeader(context.Background()) != nil {
		time.Sleep(10 * time.Millisecond) // only so that this example's job surely runs
	}
	s, err := gocron.NewScheduler(gocron.WithDistributedElector(el))
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	_, err = s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()),
		gocron.NewTask(func(ctx context.Context) {
			defer close(done)
			ctx = el.Context(ctx) // cancelled if the leadership is lost
			fmt.Println("the leader runs the job in term", el.Leadership().Term(), "- leading:", ctx.Err() == nil)
		}))
	if err != nil {
		log.Fatal(err)
	}
	s.Start()
	<-done
	if err := s.Shutdown(); err != nil {
		log.Fatal(err)
	}
	// Output: the leader runs the job in term 1 - leading: true
}
