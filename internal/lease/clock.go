package lease

import "time"

// Clock is where a lease's own times come from: an attempt's start and so
// its deadline, the validity checks, the timer that closes Done. The root
// package documents which times are the lease's and which the network's
// (clock.go); a test stands in a clock that jumps.
//
// Implementations must be monotonic: the times Now returns are compared with
// each other only, never with a wall clock, and never go backwards.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed on this clock.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is what AfterFunc returns; Stop reports whether it prevented the call.
type Timer interface {
	Stop() bool
}

// SystemClock is the system's monotonic clock.
type SystemClock struct{}

func (SystemClock) Now() time.Time { return time.Now() }

func (SystemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
