// Package redisx holds the Redis code that packages redislock and redlock share: the
// server check behind their CheckServer methods (Check, Report) and the script
// runner (Run). It is internal: its types reach users only through the aliases those
// packages declare (redislock.Report, redlock.Report).
package redisx
