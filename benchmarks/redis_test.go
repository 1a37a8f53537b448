//go:build !matrix

package benchmarks

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestCtxBound: the floor that obeys the contract's rule 6 returns ctx's error once
// ctx is done, while its command still waits for a reply, and returns the
// command's result when the reply comes first.
func TestCtxBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reply := make(chan struct{})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		_, err := ctxBound(ctx, func() (bool, error) {
			<-reply // a command whose reply does not come
			return true, nil
		})
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, time.Second, time.Since(start))
		close(reply) // the abandoned command ends; its result is dropped
		synctest.Wait()

		errBoom := errors.New("boom")
		v, err := ctxBound(context.Background(), func() (int, error) { return 7, errBoom })
		assert.Equal(t, 7, v)
		assert.ErrorIs(t, err, errBoom)
		v, err = ctxBound(t.Context(), func() (int, error) { return 8, nil })
		assert.Equal(t, 8, v)
		assert.NoError(t, err)
	})
}
