// Package redisx is the Redis core that packages redislock and redlock share:
//
//   - Node: one Redis deployment (redislock's server or Cluster, one of redlock's
//     masters) with the owner-checked renew and unlock scripts and the Hub of its
//     Waits; redlock is a fan-out of N Nodes plus the quorum logic.
//   - Hub and Listener: the pub/sub connection that a Locker's Waits share on a
//     Node, with keepalive PINGs, replacement of a silently dead connection, a wake-up
//     of every Wait when messages may have been missed, and an idle close. A
//     Listener with an Inbox (NewInboxListener, redlock's) keeps the messages that
//     arrive before its Wait reads them, until Take.
//   - KeyNames: the key layout, with one hash tag per key; Bound: a PTTL reply as
//     the end of a wait.
//   - Common: the options both backends share (Prefix, Owner, CleanupTimeout) and
//     their validation; MaxKeyLen, MaxOwnerLen, DefaultCleanupTimeout.
//   - Group and Call: the lifecycle of a Locker's calls and goroutines (Close refuses
//     new calls and waits for running ones), and the runner that returns when a
//     call's context ends although go-redis does not; Group.Run runs a fan-out's
//     calls on reusable goroutines.
//   - Run: EVALSHA with an EVAL fallback that survives the caller's context;
//     Check and Report: the server check behind both CheckServer methods.
//
// It is internal: its types reach users only through the aliases those packages
// declare (redislock.Report, redlock.Report).
package redisx
