package calls

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMicros(t *testing.T) {
	require.EqualValues(t, 1, Micros(time.Nanosecond))
	require.EqualValues(t, 1000, Micros(time.Millisecond))
	require.EqualValues(t, 1001, Micros(time.Millisecond+time.Nanosecond))
}

func TestBatch(t *testing.T) {
	same := func(a, b int) bool { return a%10 == b%10 }
	batch, rest := Batch([]int{1, 2, 11, 3, 4, 5}, 3, same)
	require.Equal(t, []int{1, 2, 3}, batch, "at most 3, and 11 is the same as 1")
	require.Equal(t, []int{11, 4, 5}, rest)
}
