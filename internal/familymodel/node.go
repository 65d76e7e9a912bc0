package familymodel

// A node's state and its scripts, each an atomic transition. Tokens are
// c*4 + id, where c is a counter and id the node's (node index + 1): the
// library's c*256 + id with room for three nodes.
//
// Left out, because they only refuse more (liveness, which the search does
// not need to be safe): the waiting lines, promises and reader phases
// (internal/waitmodel models the multi-lock's; the RW lock's phases are
// replayed on real nodes), the TTLs of H, HR and E (the retention is longer
// than the clock's range), and the node's roster and replication id (the
// mutex's model, internal/protomodel, has them; here a node is intact or
// amnesiac).

// Entry is a lock key (a writer's, a mutex's, a member's, a slot's) or a
// reader's entry: whose value, which of its attempts, and until when it
// lives (it is gone once the clock reaches Until).
type Entry struct{ Who, Att, Until uint8 }

func (e Entry) live(now uint8) bool   { return e.Who != 0 && now < e.Until }
func (e Entry) is(c, att uint8) bool  { return e.Who == c+1 && e.Att == att }
func value(c, att, until uint8) Entry { return Entry{c + 1, att, until} }

// Node is one node's data for the model's names.
type Node struct {
	// Up: fenced, the node holds its identity (amnesiac otherwise: every
	// fenced script refuses); a semaphore's node, it serves (it is down
	// during its delayed restart).
	Up      bool
	WipedAt uint8
	G, E    uint8 // the counter and the repair floor, in counter units

	Key     [MaxNames]Entry   // each name's lock key (a slot's, for Sem)
	Readers [MaxClients]Entry // RW: each client's reader entry
	H       [MaxNames]uint8   // each name's committed token
	HR      uint8             // RW: the readers' committed mark
	Marker  [MaxClients]uint8 // the attempt of each client released here (its release marker)

	SizeK, SizeV uint8 // Sem: the stored size (K 0: none) and its version
	Shrunk       bool  // Sem: holds the SetPermits' write, not wiped since
}

func (n *Node) wipe(now uint8) { *n = Node{WipedAt: now} }

// retain is the retention passing: H, HR and E expire (G stays).
func (n *Node) retain() { n.H, n.HR, n.E = [MaxNames]uint8{}, 0, 0 }

// expire drops what has expired by now: nothing reads an expired entry, so
// states that differ only in them are one (a reduction).
func (n *Node) expire(now uint8) {
	for m := range n.Key {
		if !n.Key[m].live(now) {
			n.Key[m] = Entry{}
		}
	}
	for c := range n.Readers {
		if !n.Readers[c].live(now) {
			n.Readers[c] = Entry{}
		}
	}
}

// mint is round 1's candidate: INCR G, raised above every given name's H.
func (n *Node) mint(id uint8, names ...int) uint8 {
	if n.G >= 60 {
		panic("familymodel: the counter outgrew its byte; search smaller bounds")
	}
	n.G++
	for _, m := range names {
		if f := n.H[m] / 4; n.H[m] != 0 && n.G <= f {
			n.G = f + 1
		}
	}
	return n.G*4 + id
}

// raise is a commit's G = max(G, T's counter).
func (n *Node) raise(t uint8) { n.G = max(n.G, t/4) }

// floor is max(H of names, E*4): a commit of T aborts where it exceeds T.
func (n *Node) floor(names ...int) uint8 {
	f := n.E * 4
	for _, m := range names {
		f = max(f, n.H[m])
	}
	return f
}

// Reply of a node to one call.
type Reply struct {
	OK   bool
	Cand uint8 // round 1: the candidate (0: none); round 2: the node's floor on a refusal
	// Sem: a refusal that names a later size than the client's.
	K, V uint8
}

// Acquire is lua/fenced_acquire.lua on a mutex's name m (after
// rw_write_block.lua for a writer of the RW lock).
func (n *Node) Acquire(r *Rules, rw bool, now, id, c, att, ttl uint8, m int) Reply {
	if !n.Up || n.Marker[c] == att {
		return Reply{}
	}
	if rw && !r.WriterIgnoresReaders {
		for _, e := range n.Readers {
			if e.live(now) {
				return Reply{}
			}
		}
	}
	ok := false
	switch k := n.Key[m]; {
	case !k.live(now):
		n.Key[m] = value(c, att, now+ttl)
		ok = true
	case k.is(c, att):
		ok = true
	}
	return Reply{OK: ok, Cand: n.mint(id, m)}
}

// Read is lua/rw_read.lua, fenced: a reader's entry where no write hold
// lives, and a candidate above H (not HR: readers do not conflict).
func (n *Node) Read(r *Rules, now, id, c, att, ttl uint8) Reply {
	if !n.Up || n.Marker[c] == att {
		return Reply{}
	}
	if n.Key[0].live(now) && !r.ReaderIgnoresWriter {
		return Reply{}
	}
	// ZADD NX: a copy of the call that lands again keeps the entry.
	if e := n.Readers[c]; !(e.is(c, att) && e.live(now)) {
		n.Readers[c] = value(c, att, now+ttl)
	}
	return Reply{OK: true, Cand: n.mint(id, 0)}
}

// MultiTake is lua/multi_fenced_acquire.lua over the names {0, 1}: every member
// or none, and a candidate above both H whatever the outcome.
func (n *Node) MultiTake(r *Rules, now, id, c, att, ttl uint8) Reply {
	if !n.Up {
		return Reply{}
	}
	free := [MaxNames]bool{}
	all := n.Marker[c] != att
	for m := range MaxNames {
		k := n.Key[m]
		free[m] = !k.live(now) || k.is(c, att)
		all = all && free[m]
	}
	if all || r.PartialTake && n.Marker[c] != att {
		for m := range MaxNames {
			if free[m] && !n.Key[m].is(c, att) {
				n.Key[m] = value(c, att, now+ttl)
			}
		}
	}
	return Reply{OK: all || r.PartialTake && n.Marker[c] != att, Cand: n.mint(id, 0, 1)}
}

// Commit is round 2 on the names of role, by lua/commit.lua,
// rw_write_commit.lua, rw_read_commit.lua or multi_commit.lua.
func (n *Node) Commit(r *Rules, role Role, m int, t uint8) Reply {
	if !n.Up {
		return Reply{}
	}
	switch role {
	case Reader:
		if f := n.floor(0); f > t && !r.NoReaderCommitH {
			return Reply{Cand: f}
		}
		n.HR = max(n.HR, t)
		if !r.NoReaderCommitG {
			n.raise(t)
		}
		return Reply{OK: true}
	case MultiLock:
		f := n.floor(0, 1)
		if r.MultiCommitFirst {
			f = n.floor(0)
		}
		if f > t {
			return Reply{Cand: f}
		}
		n.H = [MaxNames]uint8{t, t}
	default:
		if n.HR > t && !r.NoHRCheck {
			return Reply{Cand: n.HR}
		}
		if f := n.floor(m); f > t {
			return Reply{Cand: f}
		}
		n.H[m] = t
		if r.NoCommitG {
			return Reply{OK: true}
		}
	}
	n.raise(t)
	return Reply{OK: true}
}

// Release is lua/release.lua (and rw_release.lua): it deletes what holds
// the attempt's value, and leaves the value's release marker where nothing
// does, so that a call of the attempt still in flight cannot land after it.
func (n *Node) Release(role Role, m int, now, c, att uint8) {
	found := false
	switch role {
	case Reader:
		if n.Readers[c].is(c, att) && n.Readers[c].live(now) {
			n.Readers[c], found = Entry{}, true
		}
	case Writer, Slot:
		if n.Key[m].is(c, att) && n.Key[m].live(now) {
			n.Key[m], found = Entry{}, true
		}
	case MultiLock:
		// Each member is release.lua's: its marker where it does not hold
		// the value, and one marker refuses a late take of the whole set.
		found = true
		for k := range MaxNames {
			if n.Key[k].is(c, att) && n.Key[k].live(now) {
				n.Key[k] = Entry{}
			} else {
				found = false
			}
		}
	}
	if !found {
		n.Marker[c] = att
	}
}

// Take is lua/sem_take.lua (unfenced): the size check of lua/permits.lua,
// then slot s as a mutex.
func (n *Node) Take(r *Rules, now, c, att, ttl, s, k, v uint8) Reply {
	if !n.Up {
		return Reply{}
	}
	switch {
	case n.SizeK == 0 || v > n.SizeV || r.AdoptAny && (k != n.SizeK || v != n.SizeV):
		n.SizeK, n.SizeV = k, v
	case k != n.SizeK:
		return Reply{K: n.SizeK, V: n.SizeV}
	}
	if n.Marker[c] == att {
		return Reply{}
	}
	switch e := n.Key[s]; {
	case !e.live(now):
		n.Key[s] = value(c, att, now+ttl)
	case !e.is(c, att):
		return Reply{}
	}
	return Reply{OK: true}
}

// SetSize is SetPermits' conditional write of (k, v) (lua/setpermits.lua):
// refused where a later version is stored, or this one with another K.
func (n *Node) SetSize(k, v uint8) bool {
	if !n.Up || n.SizeV > v || n.SizeV == v && n.SizeK != k && n.SizeK != 0 {
		return false
	}
	n.SizeK, n.SizeV, n.Shrunk = k, v, true
	return true
}
