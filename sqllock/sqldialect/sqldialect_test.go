package sqldialect

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMicros(t *testing.T) {
	require.EqualValues(t, 1, Micros(time.Nanosecond))
	require.EqualValues(t, 1000, Micros(time.Millisecond))
	require.EqualValues(t, 1001, Micros(time.Millisecond+time.Nanosecond))
}
