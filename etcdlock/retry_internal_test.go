package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestRetryable: which errors of an attempt call tries again.
func TestRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{context.DeadlineExceeded, true}, // the attempt's own timeout
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), true},
		{rpctypes.ErrNoLeader, true},
		{rpctypes.ErrTimeout, true},
		{rpctypes.ErrTimeoutDueToLeaderFail, true},
		{rpctypes.ErrLeaderChanged, true},
		{rpctypes.ErrTooManyRequests, true},
		{rpctypes.Error(rpctypes.ErrGRPCNoLeader), true},
		{status.Error(codes.Unavailable, "error reading from server: EOF"), true},
		{context.Canceled, false},
		{status.Error(codes.Canceled, "grpc: the client connection is closing"), false},
		{rpctypes.ErrLeaseNotFound, false},
		{rpctypes.ErrPermissionDenied, false},
		{rpctypes.ErrCompacted, false},
		{errors.New("other"), false},
	} {
		if got := retryable(c.err); got != c.want {
			t.Errorf("retryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
