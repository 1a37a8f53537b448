package zklock_test

import (
	"context"
	"log"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/zklock"
)

// A job that must run on one instance at a time: take the lock, keep it with Hold
// (which stops the work as soon as the session is suspended or lost), release it.
func Example() {
	const sessionTimeout = 10 * time.Second
	conn, _, err := zk.Connect([]string{"127.0.0.1:2181"}, sessionTimeout)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	l, err := zklock.New(conn, &zklock.Options{SessionTimeout: sessionTimeout})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	ctx := context.Background()
	// The ttl bounds the lease's local validity; ZooKeeper holds the lock as long as
	// the session lives. A ttl of the session timeout is the natural choice: Expires
	// is capped below it anyway (5/12 of it unless Options.TickTime says more), and
	// Hold renews every third of what a lease has left.
	lease, err := distlock.Lock(ctx, l, "nightly-report", sessionTimeout, nil)
	if err != nil {
		log.Fatal(err)
	}
	held := distlock.Hold(ctx, l, lease, nil)
	defer held.Release(context.Background())

	// Do the work under held.Context(), and give the Fence to the resource it writes.
	work(held.Context(), held.Lease().Fence)
}

func work(ctx context.Context, fence uint64) {}

// Ride out short disconnections (a leader election) instead of treating a suspended
// session as lost at once.
func ExampleOptions_disconnectGrace() {
	conn, _, err := zk.Connect([]string{"127.0.0.1:2181"}, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	l, err := zklock.New(conn, &zklock.Options{
		SessionTimeout:  10 * time.Second,
		DisconnectGrace: 3 * time.Second,
		Root:            "/myapp/locks",
		Owner:           "report-worker-1",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
}
