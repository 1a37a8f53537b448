package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Run a job on one instance at a time: Do acquires the key, renews it while the job
// runs, and releases it; the job's context ends if the lease is lost.
func ExampleNew() {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"127.0.0.1:2379"},
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close() // after the Locker's Close

	l, err := etcdlock.New(cli, &etcdlock.Options{Prefix: "myapp/locks/", Owner: "worker-1"})
	if err != nil {
		log.Fatal(err) // an invalid option
	}
	defer l.Close()
	err = distlock.Do(context.Background(), l, "nightly-report", &distlock.DoOptions{TTL: 30 * time.Second},
		func(ctx context.Context) error {
			// ... work under ctx ...
			return nil
		})
	switch {
	case errors.Is(err, distlock.ErrLocked):
		fmt.Println("another instance runs the report")
	case err != nil:
		log.Fatal(err)
	}
}

// TryLock, hand the Fence to the protected resource, Unlock.
func ExampleLocker_TryLock() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	l, err := etcdlock.New(cli, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease, err := l.TryLock(ctx, "migrations", time.Minute)
	if errors.Is(err, distlock.ErrLocked) {
		return // someone else migrates
	}
	if err != nil {
		log.Fatal(err)
	}
	defer l.Unlock(context.WithoutCancel(ctx), lease)
	fmt.Println("write with fence", lease.Fence, "until", lease.Expires)
}
