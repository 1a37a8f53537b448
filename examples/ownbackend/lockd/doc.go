// Package lockd is a tiny lock server: the backend that this example module proves
// with the distlock conformance suite. It keeps an in-memory table of keys, each with
// a holder (a token), an expiry on the server's monotonic clock, and a fence counter
// that only grows. Package lockdlock is its client, a distlock.Locker.
//
// It is deliberately small, but it is a real network server, so that the suite's
// faults (a client cut off or delayed by a faultproxy, a paused or restarted server)
// act on it as they would on a production backend. The table lives in the process:
// Restart keeps it (as a server with durable state would), Close drops it.
//
// # Protocol
//
// A client opens a TCP connection and sends requests, one line each, ended by '\n';
// the server answers each with one line, in order. Keys and tokens are opaque bytes,
// sent in unpadded base64url (RFC 4648 section 5), so that any byte is safe on the
// wire. A ttl is a whole number of milliseconds (a client rounds up).
//
//	LOCK <key> <token> <ttl>    -> OK <fence> | LOCKED | CANCELLED
//	RENEW <key> <token> <ttl>   -> OK | NOTHELD
//	UNLOCK <key> <token>        -> OK | NOTHELD
//	CANCEL <key> <token> <ttl>  -> OK
//	INSPECT <key>               -> HELD <fence> <remaining-ms> | FREE
//	WAIT <key>                  -> FREE
//	anything else               -> ERR <message>, and the server closes the connection
//
// LOCK takes a free key (one with no holder, or whose holder's expiry passed) for ttl
// and increments its fence. RENEW and UNLOCK act only when token holds the key. RENEW
// never shortens the hold: the key stays held until the later of its current expiry
// and now + ttl, so that a client whose RENEW got no reply may still count on its
// old expiry. CANCEL is how a client undoes a LOCK whose reply it did not wait for:
// it releases the key when token holds it, and otherwise remembers token for ttl, so
// that the LOCK, if it is still on its way, is refused (CANCELLED) when it arrives.
// WAIT answers once the key is free: at once, when it is released, or when the
// expiry its holder had when WAIT arrived passes (a hint: the holder may have
// renewed). Keys are at most MaxKeyLen bytes, tokens at most MaxTokenLen.
package lockd
