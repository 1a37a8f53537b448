package redisx

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestInbox: an inbox listener keeps messages until Take and signals them on Ready,
// not on Woke (which then means only that messages may have been missed); a plain
// listener is woken by a message.
func TestInbox(t *testing.T) {
	ls := NewInboxListener(1)
	in := ls.Inbox()
	ls.message("a")
	ls.message("b")
	select {
	case <-ls.Woke():
		t.Fatal("a message woke an inbox listener")
	default:
	}
	<-in.Ready()
	require.Equal(t, []string{"a", "b"}, in.Take())
	require.Empty(t, in.Take())

	// Overflow: the oldest are dropped, an empty payload stands for them.
	for range inboxMax + 3 {
		ls.message("x")
	}
	got := in.Take()
	require.LessOrEqual(t, len(got), inboxMax)
	require.Contains(t, got, "")

	plain := NewListener(1)
	require.Nil(t, plain.Inbox())
	plain.message("a")
	<-plain.Woke()
}
