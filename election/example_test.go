package election_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/distlock/distlock/election"
	"github.com/distlock/distlock/memlock"
)

func ExampleElection_Campaign() {
	locker := memlock.New() // any backend: redislock.New, etcdlock.New, zklock.New, postgres.New, ...
	defer locker.Close()
	e, err := election.New(locker, "orders-leader", &election.Options{TTL: 15 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	lead, err := e.Campaign(ctx) // blocks until this candidate leads
	if err != nil {
		log.Fatal(err)
	}
	defer lead.Resign(context.WithoutCancel(ctx)) // hand over at once when done

	// Lead while lead.Context() lives; check lead.Err() before each leader-only
	// action, and pass the term to what you write to.
	fmt.Println("leading in term", lead.Term(), "- still leading:", lead.Err() == nil)
	// Output: leading in term 1 - still leading: true
}

func ExampleElection_Observe() {
	locker := memlock.New()
	defer locker.Close()
	e, err := election.New(locker, "orders-leader", nil)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	leaders, err := e.Observe(ctx)
	if err != nil {
		log.Fatal(err) // the Locker is not a distlock.Inspector
	}
	show := func(l election.Leader) {
		if l.IsZero() {
			fmt.Println("no leader")
			return
		}
		fmt.Printf("leader %s in term %d\n", l.Owner, l.Term)
	}
	show(<-leaders)

	lead, err := e.Campaign(ctx)
	if err != nil {
		log.Fatal(err)
	}
	show(<-leaders)
	if err := lead.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	show(<-leaders)

	cancel()
	for range leaders { // Observe closes the channel once ctx has ended
	}
	// Output:
	// no leader
	// leader memlock in term 1
	// no leader
}
