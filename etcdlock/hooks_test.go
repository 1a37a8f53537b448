package etcdlock_test

import (
	"context"

	"google.golang.org/grpc"
)

// Names of the etcd gRPC methods that the tests intercept.
const (
	methodTxn       = "/etcdserverpb.KV/Txn"
	methodRevoke    = "/etcdserverpb.Lease/LeaseRevoke"
	methodKeepAlive = "/etcdserverpb.Lease/LeaseKeepAlive"
)

// onUnary returns a dial option that runs f instead of every unary call of method;
// f may call invoke to send it.
func onUnary(method string, f func(ctx context.Context, invoke func() error) error) grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, m string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		invoke := func() error { return invoker(ctx, m, req, reply, cc, opts...) }
		if m != method {
			return invoke()
		}
		return f(ctx, invoke)
	})
}

// beforeStream returns a dial option that runs f before each stream of method is
// opened.
func beforeStream(method string, f func()) grpc.DialOption {
	return grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, m string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if m == method {
			f()
		}
		return streamer(ctx, desc, cc, m, opts...)
	})
}
