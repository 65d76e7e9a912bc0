package redlock

import "github.com/quorumlock/redlock/internal/lease"

// clock is where the lock's own times come from: an attempt's start and
// so Until, the validity checks of grant and Extend, the deadline that
// closes Done, how long a Lock call has waited (its place in the queue), and
// the times an Observer is given. A test can stand in a clock that jumps
// (WithClock in export_test.go), standing for a process paused at an exact
// point: a pause shows up where the protocol would see it.
//
// The network's times are not the lock's, and read the system clock
// directly: a round's node timeout and give-up times (internal/round), a node's
// silence (internal/round), background release retries (internal/lease/release.go) and the
// warning rate limit. A jump of the test clock leaves them alone, as a pause
// of the process would leave the nodes' answers already on their way.
//
// Implementations must be monotonic: the times Now returns are compared with
// each other only, never with a wall clock, and never go backwards. The
// system clock qualifies because time.Now carries a monotonic reading.
type clock = lease.Clock

// timer is what AfterFunc returns; Stop reports whether it prevented the call.
type timer = lease.Timer

type systemClock = lease.SystemClock
