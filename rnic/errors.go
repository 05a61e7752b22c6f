package rnic

import (
	"errors"
	"fmt"
)

// Errors of the verbs calls, as rdma-core returns errno values for them. Each returned
// error wraps one of these with what exactly was wrong; test with errors.Is.
var (
	ErrInvalidArgument = errors.New("invalid argument")        // EINVAL
	ErrNoMemory        = errors.New("out of resources")        // ENOMEM
	ErrBusy            = errors.New("object in use")           // EBUSY
	ErrNotFound        = errors.New("no such object")          // ENOENT
	ErrUnresolved      = errors.New("neighbour not resolved")  // EHOSTUNREACH (rxe fails RTR so)
	ErrClosed          = errors.New("device closed")           // ENODEV
	ErrNotSupported    = errors.New("operation not supported") // EOPNOTSUPP
	// The CM agent's port allocation, as the kernel's rdma_cm (cma_check_port).
	ErrAddrInUse        = errors.New("address in use")        // EADDRINUSE
	ErrAddrNotAvailable = errors.New("address not available") // EADDRNOTAVAIL
)

func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("rnic: %w: "+format, append([]any{sentinel}, args...)...)
}
