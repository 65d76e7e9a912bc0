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
	Stored int   // the size the node stores, 0 if it did not say
	Err    error // the node's reply
}

func (e *PermitsError) Error() string {
	return fmt.Sprintf("redlock: the node stores %d permits for the semaphore, not this client's number "+
		"(clients built with different numbers, or a SetPermits since)", e.Stored)
}

func (e *PermitsError) Unwrap() []error { return []error{ErrPermits, e.Err} }

// IsPermits tells a node's refusal for another size ('PERMITS <stored>
// stored, not <K>', lua/permits.lua).
func IsPermits(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "PERMITS ") }

// Permits reads a PERMITS reply.
func Permits(err error) *PermitsError {
	e := &PermitsError{Err: err}
	f := strings.Fields(err.Error())
	if len(f) > 1 {
		e.Stored, _ = strconv.Atoi(f[1])
	}
	return e
}
