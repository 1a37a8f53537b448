// Package faultproxy is a loopback TCP proxy that tests put between a client and its
// server to inject network faults: a cut (every connection is reset and new ones are
// refused), a blackhole (connections stay open but every byte is lost, as in a
// partition), a stall (as a blackhole, but the bytes are delivered after the
// partition heals, as TCP resends them), and added latency.
//
// It is what the conformance suite's per-client faults need, and it is public so that
// the author of a backend outside this module can run the whole suite with faults
// (see examples/ownbackend): give every conformance client its own Proxy, and
// implement conformance.Client's Partition with Blackhole/Heal, Delay with Delay, and
// a crash by closing the client's connections.
//
// A test starts the server, creates a Proxy in front of it with New, points the client
// at Proxy.Addr, and then calls Cut, Blackhole, Delay and Heal to change what the
// client sees. Changes take effect within milliseconds on new and existing connections,
// including connections whose reads or writes are blocked. Close must be called when the
// test ends (t.Cleanup); it returns only once every goroutine of the proxy has exited.
//
// The proxy only ever listens on and connects to loopback addresses (127.0.0.0/8, ::1,
// localhost); New rejects any other address with an error wrapping distlock.ErrInvalid,
// and the proxy checks every address it actually binds or dials as well.
//
// # Semantics
//
// The proxy is in one of four modes: normal, cut, blackholed or stalled. Cut,
// Blackhole and Stall replace each other; Heal returns to normal and also removes any
// delay. Delay is independent of the mode: a delayed proxy that is blackholed still
// drops everything, and after Heal it forwards without delay.
//
//   - Normal: bytes are forwarded in both directions, in order, and a half-close (FIN)
//     is passed on after the bytes before it.
//   - Cut: every open connection is closed at once on both sides with a reset, and new
//     connections are accepted and reset immediately, so clients see an error quickly.
//   - Blackhole: connections are kept open and new ones accepted (and connected to the
//     target), but every byte read in either direction is dropped, including bytes that
//     were read before the blackhole but not yet written. Dropped bytes are lost for
//     good: after Heal a connection carries only bytes sent after Heal. A close or reset
//     by either side is held back until Heal, as a partitioned network would.
//   - Stall: as Blackhole, except that no byte is lost: every byte is held, in order,
//     and delivered after Heal, as TCP does across a partition that heals before its
//     connections time out. A partition of a client whose protocol keeps state per
//     connection (gRPC over HTTP/2) wants Stall: a Blackhole's lost bytes can break
//     that state, so that the connection fails after Heal for a reason no real
//     network gives.
//   - Delay(d): every chunk read at time T is written at T+d (latency, not a throughput
//     limit), in order. Changing the delay applies to chunks already waiting too, so
//     Delay(0) or Heal releases them at once.
//
// Two finer tools: CutWhere cuts only the connections of matching clients (for a proxy
// that several processes share, such as a cluster member's peer port), and HoldProxy
// holds what one connection's client sends, in order and past its close, until
// Release: a request that reaches the server after its caller gave up.
package faultproxy
