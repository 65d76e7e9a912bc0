package redlock

import "time"

// clock is the client's only source of elapsed time. Validity is computed
// from it and lock deadlines fire from it, so a test can stand in a clock
// that jumps, standing for a process paused at an exact point.
//
// Implementations must be monotonic: the times Now returns are compared with
// each other only, never with a wall clock, and never go backwards. The
// system clock qualifies because time.Now carries a monotonic reading.
type clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed on this clock.
	AfterFunc(d time.Duration, f func()) timer
}

// timer is what AfterFunc returns; Stop reports whether it prevented the call.
type timer interface {
	Stop() bool
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) AfterFunc(d time.Duration, f func()) timer { return time.AfterFunc(d, f) }
