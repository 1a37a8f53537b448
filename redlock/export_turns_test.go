package redlock

import "github.com/distlock/distlock/internal/redisx"

// ID returns l's ID in the keys' turns.
func (l *Locker) ID() string { return l.id }

// TurnsName returns the Redis name of key's turns, for a Locker with the default
// prefix.
func TurnsName(key string) string {
	return turnsName(redisx.KeyNames(DefaultPrefix, key), key)
}
