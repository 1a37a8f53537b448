package zklock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/zklock"
)

// A job that must run on one instance at a time: take the lock, keep it with Hold
// (which stops the work as soon as the session is suspended or lost), release it.
func Example() {
	ctx := context.Background()
	// The server may grant another session timeout than the one asked for:
	// sess.Timeout() is the granted one, and the Locker counts with it.
	sess, err := zklock.Connect(ctx, []string{"127.0.0.1:2181"}, 10*time.Second, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close()
	l, err := zklock.New(sess, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	// The ttl bounds the lease's local validity; ZooKeeper holds the lock as long as
	// the session lives. A ttl of the session timeout is the natural choice: Expires
	// is capped below it anyway (5/12 of it unless Options.TickTime says more), and
	// Hold renews every third of what a lease has left.
	lease, err := distlock.Lock(ctx, l, "nightly-report", sess.Timeout(), nil)
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
// session as lost at once, keep the locks under a path of their own, and route
// go-zookeeper's log.
func ExampleOptions_disconnectGrace() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := zklock.Connect(ctx, []string{"zk1:2181", "zk2:2181", "zk3:2181"}, 10*time.Second,
		&zklock.ConnectOptions{ZK: []func(*zk.Conn){zk.WithLogger(log.Default())}})
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close()
	l, err := zklock.New(sess, &zklock.Options{
		DisconnectGrace: 3 * time.Second,
		Prefix:          "/myapp/locks",
		Owner:           "report-worker-1",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
}

// Connect reports the session timeout that the server granted, which may differ from
// the one asked for (servers clamp it to their [minSessionTimeout,
// maxSessionTimeout]).
func ExampleConnect() {
	sess, err := zklock.Connect(context.Background(), []string{"127.0.0.1:2181"}, 2*time.Minute, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close()
	fmt.Println("asked for 2m0s, granted", sess.Timeout()) // 40s with ZooKeeper's defaults
}
