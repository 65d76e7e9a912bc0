package protomodel

// A node's fencing state and the scripts that change it. Each script is a
// method that runs atomically (A3) on the node's state, given the node's own
// clock reading now and the script's arguments, and returns the script's
// reply: a later differential test can run the Lua script and the method on
// the same state and inputs and compare. Keys the model leaves out: the
// longest TTL used (one TTL), the release marker and the queue (the model's
// releases wait for the round-1 call, as afterAcquire does), and the expiry
// of H and E (the retention R is longer than MaxTime). The replication id
// is a run number: a restart begins a new run.

// N is the number of nodes.
const N = 3

// Majority is the smallest number of nodes any two of which intersect.
const Majority = N/2 + 1

// Stamp is the loss stamp: the node's time when it was first found not
// intact, a nonce, and the run it was made in (identity.lua's
// "<ms>:<replid>"). The model's nonce is the node's epoch (how many times
// it lost its data): a stamp is written only while none of the current run
// exists, and a wipe or a repair removes it, so at most one stamp is made
// per epoch and run, and two stamps are equal exactly when a random nonce
// would make them equal. A restart from an older copy of the data brings
// back the stamp of that copy, nonce and all.
type Stamp struct {
	Set   bool
	T     int16 // node time
	Nonce uint8
	Run   uint8
}

// Keys is what one node holds in its keyspace. The per-name keys are those
// of the one lock name the model uses.
type Keys struct {
	ID     int8  // id marker, -1: none. Provisioning gives node i the id i.
	UUID   int8  // -1: none. Node i's uuid is i.
	Roster bool  // the roster key
	RecRun uint8 // the recorded replication id (the run the id was given in)
	Stamp  Stamp
	G      int32 // the node's counter
	E      int32 // the repair floor
	H      int32 // the highest token committed for the name, 0: none
	Holder uint8 // the lock key's value, 0: no key
	Expiry int16 // node time at which the lock key expires
}

// Node is one node: its keys, and what is not a key.
type Node struct {
	Keys
	RestartAt int16 // node time of the last restart (uptime = now - RestartAt)
	Run       uint8 // the current run (replication id); a restart begins another
	Epoch     uint8 // data losses so far (the stamps' nonce)
	Skew      int8  // node clock minus the global clock (clock faults)
	Saved     Keys  // the last snapshot (RDB or AOF on disk), if HasSaved
	HasSaved  bool
}

// Replies of the acquisition script (fenced_acquire.lua).
const (
	AcqRefused   = 0
	AcqGranted   = 1
	AcqNotIntact = -1 // has an id, or a roster, but is not intact
	AcqNoIdent   = -2 // holds no identity at all
)

// provisioned is node i as Provision leaves it.
func provisioned(i int, restartAt int16) Node {
	return Node{Keys: Keys{ID: int8(i), UUID: int8(i), Roster: true}, RestartAt: restartAt}
}

// Intact mirrors identity.lua's nodeID() != nil: the node holds its id and
// serves under the replication id recorded with it.
func (n *Node) Intact() bool { return n.ID >= 0 && n.RecRun == n.Run }

// stampIfLost is the rest of identity.lua's nodeID(): a node found not
// intact is stamped with its time and run, unless it holds a stamp of this
// run already.
func (n *Node) stampIfLost(now int) {
	if !n.Intact() && (!n.Stamp.Set || n.Stamp.Run != n.Run) {
		n.Stamp = Stamp{Set: true, T: int16(now), Nonce: n.Epoch, Run: n.Run}
	}
}

// lockHeldBy is the lock key's value at node time now, 0 if it expired.
func (n *Node) lockHeldBy(now int) uint8 {
	if n.Holder != 0 && now < int(n.Expiry) {
		return n.Holder
	}
	return 0
}

// Acquire is round 1 (lua/fenced_acquire.lua with identity.lua, no waiter):
// a node not intact is stamped and replies {-2, 0} without a roster, {-1, 0}
// with one. Else SET lock value NX PX
// ttl (granted also when the key already holds value), c = INCR G, raised
// above H's counter where H exists, and the reply {ok, c*256 + id}.
func (n *Node) Acquire(now int, value uint8, ttl int) (status int, cand int32) {
	if !n.Intact() {
		n.stampIfLost(now)
		if !n.Roster {
			return AcqNoIdent, 0
		}
		return AcqNotIntact, 0
	}
	status = AcqRefused
	switch n.lockHeldBy(now) {
	case 0:
		n.Holder, n.Expiry = value, int16(now+ttl)
		status = AcqGranted
	case value:
		status = AcqGranted
	}
	c := n.G + 1
	n.G = c
	if n.H != 0 {
		if f := n.H / 256; c <= f {
			c = f + 1
			n.G = c
		}
	}
	return status, c*256 + int32(n.ID)
}

// Commit is round 2 (lua/commit.lua with identity.lua): -1 (and the stamp)
// if the node is not intact; else the effective H, max(H, E*256), if it
// exceeds t (the client aborts); else H = t, G = max(G, t/256), reply t.
func (n *Node) Commit(now int, t int32) int32 {
	if !n.Intact() {
		n.stampIfLost(now)
		return -1
	}
	if eff := max(n.H, n.E*256); eff > t {
		return eff
	}
	n.H = t
	n.G = max(n.G, t/256)
	return t
}

// Release is the unlock and rollback (lua/release.lua, without the queue and
// the release marker): delete the lock key if it holds value. Returns 1 if
// deleted.
func (n *Node) Release(now int, value uint8) int {
	if n.lockHeldBy(now) == value {
		n.Holder, n.Expiry = 0, 0
		return 1
	}
	return 0
}

// NodeState is what lua/node_state.lua returns, of the fields the model
// has; Intact is what the client computes from it (nodeState.intact).
type NodeState struct {
	UUID   int8
	ID     int8
	Intact bool
	Stamp  Stamp
	Now    int16 // node time
	Uptime int16
	G      int32
}

// ReadState is lua/node_state.lua: it stamps a node that is not intact (the
// identity prelude), then reads uuid, id, replication ids, stamp, time,
// uptime and G.
func (n *Node) ReadState(now int) NodeState {
	n.stampIfLost(now)
	return NodeState{UUID: n.UUID, ID: n.ID, Intact: n.Intact(), Stamp: n.Stamp, Now: int16(now),
		Uptime: int16(now - int(n.RestartAt)), G: n.G}
}

// SwapUUID is lua/swap_uuid.lua: on a node without an id, replace its uuid
// by u if it still holds read (-1: none). Returns the uuid it holds after.
// want != nil is the revised script: the swap is also conditional on the
// node still holding the stamp *want (time, nonce, run); prelude as for
// RepairWrite.
func (n *Node) SwapUUID(now int, read, u int8, want *Stamp, prelude bool) int8 {
	if prelude {
		n.stampIfLost(now)
	}
	if n.ID >= 0 {
		return n.UUID
	}
	if n.UUID == read && (want == nil || n.stampStill(*want)) {
		n.UUID = u
	}
	return n.UUID
}

// stampStill is the stamped writes' condition (swap_uuid.lua, repair.lua):
// the node holds the very stamp the repairer read, made in the run it
// serves now (a node restored from a snapshot, or restarted, brings back a
// stamp of an earlier run, and has lost what happened since).
func (n *Node) stampStill(want Stamp) bool { return n.Stamp == want && want.Run == n.Run }

// Replies of RepairWrite.
const (
	RepairLostUUID = 0  // the node no longer holds the uuid (or, revised, the stamp)
	RepairDone     = 1  //
	RepairOtherID  = -1 // the node holds another id: an error reply
)

// RepairWrite is lua/repair.lua: if the node still holds uuid u (and, when
// want != nil, the revised script's condition: still the stamp *want), and
// holds no id other than id: G = max(G, g), E = max(E, g), roster, id, the
// replication id recorded, and the stamp removed. prelude: the script runs
// the identity prelude first, which stamps the node anew if its stamp names
// an earlier run.
func (n *Node) RepairWrite(now int, u, id int8, g int32, want *Stamp, prelude bool) int {
	if prelude {
		n.stampIfLost(now)
	}
	if n.UUID != u || want != nil && !n.stampStill(*want) {
		return RepairLostUUID
	}
	if n.ID >= 0 && n.ID != id {
		return RepairOtherID
	}
	n.G = max(n.G, g)
	n.E = max(n.E, g)
	n.Roster = true
	n.ID = id
	n.RecRun = n.Run
	n.Stamp = Stamp{}
	return RepairDone
}

// Wipe is the node losing every key: FLUSHALL, a mistaken DEL of every key,
// or a restart without its data (restart: a new run, and its uptime starts
// again at now).
func (n *Node) Wipe(now int, restart bool) {
	n.Keys = Keys{ID: -1, UUID: -1}
	n.Epoch++
	if restart {
		n.Run++
		n.RestartAt = int16(now)
	}
}

// Save is a snapshot of the keys reaching the disk (BGSAVE, an AOF fsync).
func (n *Node) Save() { n.Saved, n.HasSaved = n.Keys, true }

// Rollback is a restart that loads the last snapshot: the keys written
// since are lost, the keys of then come back (a stamp among them), and the
// node serves under a new replication id. Without a snapshot it is a wipe.
func (n *Node) Rollback(now int) {
	if !n.HasSaved {
		n.Wipe(now, true)
		return
	}
	n.Keys = n.Saved
	n.Epoch++
	n.Run++
	n.RestartAt = int16(now)
}

// expire drops a lock key whose time has passed (canonical form: an expired
// key and no key are the same state).
func (n *Node) expire(now int) {
	if n.Holder != 0 && now >= int(n.Expiry) {
		n.Holder, n.Expiry = 0, 0
	}
}
