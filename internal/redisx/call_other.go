//go:build !linux

package redisx

import "context"

// callFast is Linux's (eventfds); elsewhere Call takes the channel path.
func callFast[T any](ctx context.Context, g *Group, f func() (T, error), abandon func(T, error)) (T, error, bool) {
	var zero T
	return zero, nil, false
}

// An fdPool is empty off Linux.
type fdPool struct{}

func (p *fdPool) wakeIdle() {}
