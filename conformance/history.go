package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"time"

	"github.com/distlock/distlock"
)

// An Event is one call in a history of calls made by several clients of a backend,
// with its invocation and completion on the local monotonic clock (as offsets from
// the history's start), its arguments and its outcome. Check reads a slice of them.
type Event struct {
	Client int    `json:"client"`
	Op     string `json:"op"` // an Op* constant
	Key    string `json:"key"`
	// TTL is the ttl asked for (TryLock, Renew).
	TTL time.Duration `json:"ttl,omitempty"`
	// Deadline is the call's context timeout, 0 for none.
	Deadline time.Duration `json:"deadline,omitempty"`
	// Invoke and Return are when the call started and returned; for OpHeldEnd,
	// when Hold was called and when the Held's Context ended.
	Invoke time.Duration `json:"invoke"`
	Return time.Duration `json:"return"`
	// Token and Fence name the lease: the one returned (TryLock, Lock, Renew) or
	// the one passed (Unlock, a failed Renew, OpHeldEnd).
	Token string `json:"token,omitempty"`
	Fence uint64 `json:"fence,omitempty"`
	// Expires is the returned lease's Expires as an offset from the start (0 when
	// the call failed).
	Expires time.Duration `json:"expires,omitempty"`
	// Outcome classifies the error: "" for success, or an Out* constant.
	Outcome string `json:"outcome,omitempty"`
	Err     string `json:"err,omitempty"`
}

// The operations of a history.
const (
	OpTryLock = "TryLock"
	OpLock    = "Lock" // distlock.Lock: a waited acquisition
	OpRenew   = "Renew"
	OpUnlock  = "Unlock"
	// OpHeldEnd is a distlock.Held's Context ending (Token names its lease).
	OpHeldEnd = "HeldEnd"
	// OpClose is the Close of a client's Locker: its holder stops using its
	// leases there. OpCrash is a crash of a client whose leases end with its
	// session (Capabilities.SessionExpiry); a crash of another client is not an
	// event, since its leases stand until their Expires.
	OpClose = "Close"
	OpCrash = "Crash"
)

// The outcomes of a failed call.
const (
	OutLocked  = "locked"
	OutNotHeld = "notheld"
	OutInvalid = "invalid"
	OutClosed  = "closed"
	OutCtx     = "ctx"   // the call's context ended: outcome unknown
	OutOther   = "other" // a transport or server error: outcome unknown
)

// outcome classifies err.
func outcome(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, distlock.ErrLocked):
		return OutLocked
	case errors.Is(err, distlock.ErrNotHeld):
		return OutNotHeld
	case errors.Is(err, distlock.ErrInvalid):
		return OutInvalid
	case errors.Is(err, distlock.ErrClosed):
		return OutClosed
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return OutCtx
	}
	return OutOther
}

// WriteHistory writes h as JSON lines, one Event a line.
func WriteHistory(w io.Writer, h []Event) error {
	enc := json.NewEncoder(w)
	for _, e := range h {
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	return nil
}
