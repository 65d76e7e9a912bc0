package waitmodel

import "fmt"

// The read-write lock's phase-fair rule on one node (docs/rwlock.md,
// Phase-fair; lua/rw_phase.lua, rw_read.lua, rw_write_block.lua,
// rw_release.lua): writers in the mutex's queue and promises, readers in
// the readers' set, and the readers' wait with each reader's need counted
// in writer holds. Every actor takes turns for ever: a writer writes
// again after its Unlock, a reader reads again after its Unlock. Every
// waiter stays live (its client retries within its liveness), no hold
// expires, and nobody gives up: the bounds are about an adversary's
// schedule of live callers.

// Bounds of an RW model.
const (
	MaxWriters = 3
	MaxReaders = 3
)

// RWRules selects the rule, or one part of it removed.
type RWRules int

const (
	// PhaseFair is the scripts' rule.
	PhaseFair RWRules = iota
	// ReaderIgnoresQueue grants a read wherever no writer holds the lock
	// and none is promised it, queued writers or not: readers that keep
	// overlapping keep a queued writer out.
	ReaderIgnoresQueue
	// WriterIgnoresAdmitted grants a write although a reader waits whose
	// writer hold has ended: writers taking turns keep that reader out.
	WriterIgnoresAdmitted
	// UnlockPromisesWriter: a writer's Unlock promises the lock to the
	// next queued writer even while a reader waits whose hold has ended.
	UnlockPromisesWriter
	// NoNextPhase: a reader refused while a writer is queued or promised
	// the lock (not holding it) needs the current phase, not the next
	// hold, and so is admitted at once ahead of the queued writer.
	NoNextPhase
	// PromiseLast: an Unlock promises the lock to the last queued writer,
	// not the first: writers lose their arrival order.
	PromiseLast
)

func (r RWRules) String() string {
	return [...]string{"PhaseFair", "ReaderIgnoresQueue", "WriterIgnoresAdmitted", "UnlockPromisesWriter", "NoNextPhase",
		"PromiseLast"}[r]
}

// RWConfig is one model: how many writers and readers, and the rule.
// TryWriter and TryReader make the last writer a TryLock caller and the
// last reader a TryRLock caller: they never queue, are never promised the
// lock and never join the readers' wait (their waiter id is empty), and
// take turns with the others; the bounds are the waiting callers'.
type RWConfig struct {
	Writers, Readers     int
	Rules                RWRules
	TryWriter, TryReader bool
}

// notWaiting is a reader's due when it is not in the readers' wait.
const notWaiting int8 = 9

// rwState is the node's keys for one name, and the ghosts the bounds are
// checked with.
type rwState struct {
	holder  int8             // the writer holding the key, or -1
	next    int8             // NEXT: the writer the lock is promised to, or -1
	place   [MaxWriters]int8 // rank in QUEUE, or -1 (a holder stays queued until its Unlock)
	reading [MaxReaders]bool // an entry in READERS
	due     [MaxReaders]int8 // in RWAIT: its need less RPHASE, at least -1; notWaiting if not in it
	ghost   [MaxReaders]rGhost
	phases  [MaxWriters]int8 // reader phases begun while the writer was queued, not holding (at most 3)
	holds   [MaxWriters]int8 // other writers' holds granted while it was queued (at most 3)
	ahead   [MaxWriters]int8 // writers queued ahead of it, or holding, when it joined the queue
}

// rGhost is what the reader bound is checked with, since the reader was
// first refused (joined the wait): the writer holds granted since (at
// most 3), whether a writer held the lock then, and whether a writer's
// Unlock has come since.
type rGhost struct {
	grants  int8
	held    bool
	through bool
}

func (c *RWConfig) validate() error {
	if c.Writers < 1 || c.Writers > MaxWriters || c.Readers < 1 || c.Readers > MaxReaders {
		return fmt.Errorf("waitmodel: %d writers, %d readers: out of bounds", c.Writers, c.Readers)
	}
	return nil
}

func (c *RWConfig) initial() rwState {
	s := rwState{holder: -1, next: -1}
	for w := range s.place {
		s.place[w] = -1
	}
	for r := range s.due {
		s.due[r] = notWaiting
	}
	return s
}

// RWEvent is one script run by one actor.
type RWEvent struct {
	Kind   RWEventKind
	Actor  int
	Reader bool
}

// RWEventKind names what an actor does.
type RWEventKind int8

const (
	RWAttempt RWEventKind = iota // rw_read.lua, or rw_write_block.lua and acquire.lua
	RWUnlock                     // rw_release.lua, announced
)

func (e RWEvent) String() string {
	who := fmt.Sprintf("W%d", e.Actor)
	if e.Reader {
		who = fmt.Sprintf("R%d", e.Actor)
	}
	return who + [...]string{" attempts", " unlocks"}[e.Kind]
}

// step returns the successors of s, one per event.
func (c *RWConfig) step(s rwState, visit func(RWEvent, rwState)) {
	for w := range c.Writers {
		switch {
		case s.holder == int8(w):
			visit(RWEvent{RWUnlock, w, false}, c.writerUnlock(s, w))
		case c.tries(false, w):
			visit(RWEvent{RWAttempt, w, false}, c.tryWrite(s, w))
		default:
			visit(RWEvent{RWAttempt, w, false}, c.write(s, w))
		}
	}
	for r := range c.Readers {
		switch {
		case s.reading[r]:
			visit(RWEvent{RWUnlock, r, true}, c.readerUnlock(s, r))
		case c.tries(true, r):
			visit(RWEvent{RWAttempt, r, true}, c.tryRead(s, r))
		default:
			visit(RWEvent{RWAttempt, r, true}, c.read(s, r))
		}
	}
}

// anyWaiting is EXISTS RWAIT.
func (s *rwState) anyWaiting() bool {
	for _, d := range s.due {
		if d != notWaiting {
			return true
		}
	}
	return false
}

// admittedReaders: a reader waits whose writer hold has been granted.
func (s *rwState) admittedReaders() bool {
	for _, d := range s.due {
		if d != notWaiting && d <= 0 {
			return true
		}
	}
	return false
}

// queued: a writer is in the queue (writerQueued in rw_read.lua).
func (s *rwState) queued() bool {
	for _, p := range s.place {
		if p >= 0 {
			return true
		}
	}
	return false
}

func (s *rwState) anyReading() bool {
	for _, r := range s.reading {
		if r {
			return true
		}
	}
	return false
}

// first is the first writer in the queue, or -1 (the last, with
// PromiseLast).
func (c *RWConfig) first(s *rwState) int8 {
	best := int8(-1)
	for w, p := range s.place {
		if p >= 0 && (best < 0 || p < s.place[best] != (c.Rules == PromiseLast)) {
			best = int8(w)
		}
	}
	return best
}

// tries reports whether actor i (a reader, or a writer) is a TryLock or
// TryRLock caller.
func (c *RWConfig) tries(reader bool, i int) bool {
	if reader {
		return c.TryReader && i == c.Readers-1
	}
	return c.TryWriter && i == c.Writers-1
}
