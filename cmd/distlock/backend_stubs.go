package main

import "context"

// Backends that this build lacks: their packages have not landed yet.

func openZooKeeper(ctx context.Context, u *backendURL, o openOptions) (*backend, error) {
	return nil, unavailable("zk")
}
