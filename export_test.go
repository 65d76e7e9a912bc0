package redlock

import (
	"sync"
	"time"
)

// WithClock lets the tests stand in a clock that they drive.
func WithClock(c clock) Option { return func(cfg *config) { cfg.clock = c } }

// StepClock is the system clock plus an offset that a test can add to at
// any moment, standing for a process that was paused for that long.
type StepClock struct {
	mu     sync.Mutex
	offset time.Duration
	// OnNow, if set, runs on every Now call, before the offset is read.
	OnNow func(*StepClock)
}

// Jump moves the clock forward by d.
func (s *StepClock) Jump(d time.Duration) {
	s.mu.Lock()
	s.offset += d
	s.mu.Unlock()
}

func (s *StepClock) Now() time.Time {
	if s.OnNow != nil {
		s.OnNow(s)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Add(s.offset)
}

func (s *StepClock) AfterFunc(d time.Duration, f func()) timer { return time.AfterFunc(d, f) }
