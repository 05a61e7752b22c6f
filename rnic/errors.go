package rnic

import (
	"fmt"

	"github.com/rocelab/rocelab/rnic/ibv"
)

// Errors of the verbs calls (ibv's, so that a client tells them apart without the
// device): each returned error wraps one of these with what exactly was wrong; test with
// errors.Is.
var (
	ErrInvalidArgument  = ibv.ErrInvalidArgument
	ErrNoMemory         = ibv.ErrNoMemory
	ErrBusy             = ibv.ErrBusy
	ErrNotFound         = ibv.ErrNotFound
	ErrUnresolved       = ibv.ErrUnresolved
	ErrClosed           = ibv.ErrClosed
	ErrNotSupported     = ibv.ErrNotSupported
	ErrAddrInUse        = ibv.ErrAddrInUse
	ErrAddrNotAvailable = ibv.ErrAddrNotAvailable
)

func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("rnic: %w: "+format, append([]any{sentinel}, args...)...)
}
