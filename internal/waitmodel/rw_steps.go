package waitmodel

// The scripts of the read-write lock as transitions of one node (rw.go),
// each atomic as the script is, with the ghosts the bounds are checked
// with.

// read is rw_read.lua for reader r.
func (c *RWConfig) read(s rwState, r int) rwState {
	switch {
	case s.holder >= 0:
		return c.waitRead(s, r, true)
	case s.next >= 0:
		return c.waitRead(s, r, false)
	case c.Rules != ReaderIgnoresQueue && s.queued() && !(s.due[r] != notWaiting && s.due[r] <= 0):
		return c.waitRead(s, r, false)
	}
	s.reading[r] = true
	return s
}

// tryRead is rw_read.lua for a TryRLock caller: refused, it does not join
// the readers' wait, and it is never admitted ahead of a queued writer.
func (c *RWConfig) tryRead(s rwState, r int) rwState {
	if s.holder >= 0 || s.next >= 0 || c.Rules != ReaderIgnoresQueue && s.queued() {
		return s
	}
	s.reading[r] = true
	return s
}

// waitRead is rw_phase.lua's waitRead: a refused reader joins the wait
// (once; its need is kept if it is there), needing the hold in progress
// to end if held, else the next hold.
func (c *RWConfig) waitRead(s rwState, r int, held bool) rwState {
	if s.due[r] != notWaiting {
		return s
	}
	s.due[r] = 1
	if held || c.Rules == NoNextPhase {
		s.due[r] = 0
	}
	s.ghost[r] = rGhost{held: held}
	return s
}

// write is rw_write_block.lua, then acquire.lua, for writer w.
func (c *RWConfig) write(s rwState, w int) rwState {
	me := int8(w)
	promised := s.anyWaiting() && s.next == me
	admitted := c.Rules != WriterIgnoresAdmitted && s.anyWaiting() && !promised && s.admittedReaders()
	if s.anyReading() || admitted {
		return enqueue(s, w)
	}
	if s.holder >= 0 || s.next >= 0 && s.next != me {
		return enqueue(s, w)
	}
	return c.grantWrite(s, w)
}

// tryWrite is the same for a TryLock caller: refused, it does not queue,
// and no promise is ever its own.
func (c *RWConfig) tryWrite(s rwState, w int) rwState {
	admitted := c.Rules != WriterIgnoresAdmitted && s.anyWaiting() && s.admittedReaders()
	if s.anyReading() || admitted || s.holder >= 0 || s.next >= 0 {
		return s
	}
	return c.grantWrite(s, w)
}

// grantWrite grants writer w the lock.
func (c *RWConfig) grantWrite(s rwState, w int) rwState {
	me := int8(w)
	// Granted. The hold counts as the next phase for the waiting readers
	// (nextPhase); NEXT stays until this writer's Unlock.
	for r := range s.due {
		if s.due[r] == notWaiting {
			continue
		}
		s.due[r] = max(s.due[r]-1, -1)
		if !s.reading[r] {
			s.ghost[r].grants = min(s.ghost[r].grants+1, 3)
		}
	}
	for v := range s.place {
		if v != w && s.place[v] >= 0 {
			s.holds[v] = min(s.holds[v]+1, 3)
		}
	}
	s.holder = me
	return s
}

// enqueue is queue.lua's: w joins the end of the queue, or keeps its place.
func enqueue(s rwState, w int) rwState {
	if s.place[w] >= 0 {
		return s
	}
	ahead := int8(0)
	for v, p := range s.place {
		if p >= 0 || s.holder == int8(v) {
			ahead++
		}
	}
	s.place[w] = MaxWriters
	s.phases[w], s.holds[w], s.ahead[w] = 0, 0, ahead
	return rank(s)
}

// writerUnlock is rw_release.lua for the holding writer w: while a reader
// waits whose hold has ended, no writer is promised the lock; else it is
// promised to the first queued writer (release.lua).
func (c *RWConfig) writerUnlock(s rwState, w int) rwState {
	s.holder = -1
	s.place[w], s.phases[w], s.holds[w], s.ahead[w] = -1, 0, 0, 0
	for r := range s.due {
		if s.due[r] != notWaiting && !s.reading[r] {
			s.ghost[r].through = true
		}
	}
	if c.Rules != UnlockPromisesWriter && s.anyWaiting() && s.admittedReaders() {
		// A reader phase begins: every writer waiting in the queue counts it.
		for v := range s.place {
			if s.place[v] >= 0 {
				s.phases[v] = min(s.phases[v]+1, 3)
			}
		}
		s.next = -1
		return rank(s)
	}
	s.next = c.first(&s)
	return rank(s)
}

// readerUnlock is rw_release.lua for reader r: it leaves the readers and
// their wait; the last one out promises the lock to the first queued
// writer, unless a reader still waits whose hold has ended.
func (c *RWConfig) readerUnlock(s rwState, r int) rwState {
	s.reading[r] = false
	s.due[r], s.ghost[r] = notWaiting, rGhost{}
	if s.anyReading() || s.admittedReaders() {
		return s
	}
	if !s.queued() && s.next < 0 {
		return s
	}
	s.next = c.first(&s)
	return s
}

// rank numbers the queued writers' places 0, 1, ... in order.
func rank(s rwState) rwState {
	for r := int8(0); ; r++ {
		best := -1
		for w, p := range s.place {
			if p >= r && (best < 0 || p < s.place[best]) {
				best = w
			}
		}
		if best < 0 {
			return s
		}
		s.place[best] = r
	}
}
