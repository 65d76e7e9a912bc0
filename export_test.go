package redlock

import (
	"context"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/luascript"
	"github.com/quorumlock/redlock/internal/nodescript"
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

// ScriptName names the library script an EVAL or EVALSHA command runs.
// The fenced and unfenced extensions are both "extend".
func ScriptName(args []any) string {
	if len(args) < 2 {
		return ""
	}
	body, _ := args[1].(string)
	for _, s := range []struct {
		name string
		s    *luascript.Script
	}{
		{"acquire", nodescript.FencedAcquire}, {"acquire-unfenced", nodescript.Acquire},
		{"commit", nodescript.Commit}, {"release", nodescript.Release},
		{"extend", nodescript.Extend}, {"extend", nodescript.FencedExtend},
		{"state", nodescript.NodeState}, {"claim", nodescript.Claim},
		{"roster", nodescript.Roster}, {"assign", nodescript.Assign},
		{"swap-uuid", nodescript.SwapUUID}, {"repair", nodescript.Repair},
		{"inspect", nodescript.Inspect}, {"reset", nodescript.Reset},
		{"multi-acquire", nodescript.FencedMultiAcquire}, {"multi-acquire", nodescript.MultiAcquire},
		{"multi-commit", nodescript.MultiCommit}, {"multi-release", nodescript.MultiRelease},
		{"multi-extend", nodescript.MultiExtend},
		{"rw-read", nodescript.FencedRWRead}, {"rw-read", nodescript.RWRead},
		{"rw-write", nodescript.FencedRWWrite}, {"rw-write", nodescript.RWWrite},
		{"rw-extend", nodescript.RWExtend}, {"rw-release", nodescript.RWRelease},
		{"rw-read-commit", nodescript.RWReadCommit}, {"rw-write-commit", nodescript.RWWriteCommit},
		{"rw-downgrade", nodescript.RWDowngrade},
		{"census", nodescript.Census}, {"sem-acquire", nodescript.FencedSemAcquire}, {"sem-acquire", nodescript.SemAcquire}, {"sem-release", nodescript.SemRelease},
		{"sem-extend", nodescript.SemExtend}, {"set-permits", nodescript.SetPermits},
	} {
		if h := s.s.Hash(); h != "" && body == h || body == s.s.Source() {
			return s.name
		}
	}
	return ""
}

// Drift is c's drift allowance: TTL times the drift factor, plus 2 ms.
func Drift(c *Client) time.Duration { return c.cfg.drift() }

// WaitAbandoned closes c and waits up to d for every goroutine of c to end,
// those that Close stopped waiting for included.
func WaitAbandoned(c *Client, d time.Duration) bool {
	c.Close()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.stopped:
		return true
	case <-t.C:
		return false
	}
}

// SettlingLen is how many names c still records a release in flight for
// (settle.go): the adversarial review's leak checks read it.
func SettlingLen(c *Client) int {
	return c.leases.SettlingLen()
}

// AcquireScript is the unfenced acquisition script, for tests that drive a
// node's queue directly.
var AcquireScript = nodescript.Acquire.Source()

// FreshTokenReentry is reentrancy with its token rule removed, as
// Redisson's fenced lock does it: a reentry is a new fenced acquisition by
// the same owner (round 1 with l's own value, which every node holding it
// grants, then the commit of the best candidate), and so mints a fresh
// token. It returns that token.
func FreshTokenReentry(ctx context.Context, l *Lock) (uint64, error) {
	ll := l.lease()
	sh := ll.Shape()
	var best int64
	for _, n := range l.c.nodes {
		vals, err := sh.Acquire(ll, 0).Run(ctx, n).Int64Slice()
		if err != nil {
			return 0, err
		}
		if vals[0] == 1 && vals[1] > best {
			best = vals[1]
		}
	}
	for _, n := range l.c.nodes {
		if err := sh.Commit(ll, best).Run(ctx, n).Err(); err != nil {
			return 0, err
		}
	}
	return uint64(best), nil
}

// StretchObservePoll makes Election.Observe's fallback poll an hour for
// the rest of the test: what it sees then came by notification.
func StretchObservePoll(t interface{ Cleanup(func()) }) {
	saved := observePoll
	observePoll = func(time.Duration) time.Duration { return time.Hour }
	t.Cleanup(func() { observePoll = saved })
}
