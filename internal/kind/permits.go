package kind

import (
	"fmt"
	"strconv"
	"strings"
)

// PermitsError is a node's refusal of a semaphore's permit because it
// stores another size for the semaphore than the client's: clients built
// with different sizes, or a SetPermits since this client was built. No
// retry fixes it. It matches ErrPermits.
type PermitsError struct {
	Stored  int   // the size the node stores, 0 if it did not say
	Version int64 // the version of that size: 0 for none a SetPermits wrote
	Err     error // the node's reply
}

func (e *PermitsError) Error() string {
	if e.Version > 0 {
		return fmt.Sprintf("redlock: the node stores %d permits for the semaphore at version %d, not this client's "+
			"size (a SetPermits since this client's size)", e.Stored, e.Version)
	}
	return fmt.Sprintf("redlock: the node stores %d permits for the semaphore, not this client's number "+
		"(clients built with different numbers, or a SetPermits since)", e.Stored)
}

func (e *PermitsError) Unwrap() []error { return []error{ErrPermits, e.Err} }

// IsPermits tells a node's refusal for another size ('PERMITS <K>
// <version> stored, not <size>', lua/permits.lua; before versions,
// 'PERMITS <K> stored, not <K>').
func IsPermits(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "PERMITS ") }

// Permits reads a PERMITS reply.
func Permits(err error) *PermitsError {
	e := &PermitsError{Err: err}
	f := strings.Fields(err.Error())
	if len(f) > 1 {
		e.Stored, _ = strconv.Atoi(f[1])
	}
	if len(f) > 2 {
		e.Version, _ = strconv.ParseInt(f[2], 10, 64)
	}
	return e
}
