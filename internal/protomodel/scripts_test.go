package protomodel

import "testing"

// The node scripts on chosen inputs: what a differential test against the
// Lua scripts would compare.

func TestAcquire(t *testing.T) {
	n := provisioned(2, -10)
	if st, c := n.Acquire(0, 1, 2); st != AcqGranted || c != 1*256+2 || n.G != 1 || n.Holder != 1 || n.Expiry != 2 {
		t.Fatalf("free key: %d %d, node %+v", st, c, n)
	}
	if st, c := n.Acquire(1, 1, 2); st != AcqGranted || c != 2*256+2 || n.Expiry != 2 {
		t.Fatalf("own value again (SET NX fails, GET matches; the TTL is not renewed): %d %d, node %+v", st, c, n)
	}
	if st, c := n.Acquire(1, 5, 2); st != AcqRefused || c != 3*256+2 || n.Holder != 1 {
		t.Fatalf("held by another value (INCR all the same): %d %d, node %+v", st, c, n)
	}
	if st, _ := n.Acquire(2, 5, 2); st != AcqGranted || n.Holder != 5 {
		t.Fatalf("expired key: %d, node %+v", st, n)
	}
	n.H = 9*256 + 1
	if _, c := n.Acquire(2, 5, 2); c != 10*256+2 || n.G != 10 {
		t.Fatalf("c <= floor(H/256) is raised above it, and G with it: %d, node %+v", c, n)
	}
	n.Wipe(3, false)
	if st, c := n.Acquire(4, 5, 2); st != AcqNoIdent || c != 0 || n.Stamp != (Stamp{true, 4, 1, 0}) || n.Holder != 0 || n.G != 0 {
		t.Fatalf("emptied node: %d %d, node %+v", st, c, n)
	}
	if n.Acquire(6, 5, 2); n.Stamp.T != 4 {
		t.Fatalf("a stamp is written only where none exists: %+v", n.Stamp)
	}
}

func TestCommit(t *testing.T) {
	n := provisioned(0, -10)
	if h := n.Commit(0, 3*256+1); h != 3*256+1 || n.H != 3*256+1 || n.G != 3 {
		t.Fatalf("commit raises H and G: %d, node %+v", h, n)
	}
	if h := n.Commit(0, 2*256+2); h != 3*256+1 || n.H != 3*256+1 {
		t.Fatalf("an older token gets the effective H: %d, node %+v", h, n)
	}
	if h := n.Commit(0, 3*256+1); h != 3*256+1 {
		t.Fatalf("the same token again is accepted: %d", h)
	}
	n.E = 5
	if h := n.Commit(0, 4*256); h != 5*256 {
		t.Fatalf("the repair floor counts as H = E*256: %d", h)
	}
	n.Wipe(1, true)
	if h := n.Commit(2, 9*256); h != -1 || n.H != 0 || n.Stamp != (Stamp{true, 2, 1, 1}) {
		t.Fatalf("emptied node: %d, node %+v", h, n)
	}
}

func TestRelease(t *testing.T) {
	n := provisioned(0, -10)
	n.Acquire(0, 3, 2)
	if n.Release(0, 4) != 0 || n.Holder != 3 {
		t.Fatal("another value's release deletes nothing")
	}
	if n.Release(2, 3) != 0 {
		t.Fatal("an expired key is not there")
	}
	n.Acquire(2, 3, 2)
	if n.Release(3, 3) != 1 || n.Holder != 0 {
		t.Fatal("own value: deleted")
	}
}

func TestRepairScripts(t *testing.T) {
	n := provisioned(1, -10)
	n.G = 7
	n.Wipe(4, false)
	st := n.ReadState(5)
	if st.ID != -1 || st.UUID != -1 || st.Stamp != (Stamp{true, 5, 1, 0}) || st.Uptime != 15 || st.G != 0 {
		t.Fatalf("state read stamps and reads: %+v", st)
	}
	stale := Stamp{true, 1, 0, 0}
	if got := n.SwapUUID(5, -1, 1, &stale, false); got != -1 {
		t.Fatalf("revised swap with another stamp: holds %d", got)
	}
	if got := n.SwapUUID(5, -1, 1, nil, false); got != 1 {
		t.Fatalf("swap from none: holds %d", got)
	}
	if got := n.SwapUUID(5, -1, 2, nil, false); got != 1 {
		t.Fatalf("swap from a uuid no longer held: holds %d", got)
	}
	if r := n.RepairWrite(5, 2, 1, 9, nil, false); r != RepairLostUUID {
		t.Fatalf("repair of another uuid: %d", r)
	}
	if r := n.RepairWrite(5, 1, 1, 9, &stale, false); r != RepairLostUUID {
		t.Fatalf("revised repair, stamp changed: %d", r)
	}
	if r := n.RepairWrite(5, 1, 1, 9, &st.Stamp, false); r != RepairDone || n.ID != 1 || n.G != 9 || n.E != 9 || !n.Roster || n.Stamp.Set {
		t.Fatalf("repair: %d, node %+v", r, n)
	}
	if r := n.RepairWrite(5, 1, 1, 8, nil, false); r != RepairDone || n.G != 9 || n.E != 9 {
		t.Fatalf("today's repair again (raises only): %d, node %+v", r, n)
	}
	if r := n.RepairWrite(5, 1, 1, 10, &st.Stamp, false); r != RepairLostUUID {
		t.Fatalf("revised repair after another completed (stamp removed): %d", r)
	}
	if r := n.RepairWrite(5, 1, 2, 10, nil, false); r != RepairOtherID {
		t.Fatalf("node holding another id: %d", r)
	}
	if got := n.SwapUUID(5, 1, 2, nil, false); got != 1 {
		t.Fatalf("no swap on a node with an id: holds %d", got)
	}
}

// A restart from an older snapshot brings its stamp back, under a new run:
// the revised scripts accept it as the stamp a repairer read unless they
// run the identity prelude first.
func TestRollbackBringsBackAStamp(t *testing.T) {
	n := provisioned(1, -10)
	n.Wipe(0, false)
	st := n.ReadState(0) // stamped (t0, nonce 1, run 0)
	n.Save()
	n.SwapUUID(1, -1, 1, &st.Stamp, false)
	n.RepairWrite(1, 1, 1, 5, &st.Stamp, false)
	if !n.Intact() {
		t.Fatal("repaired node not intact")
	}
	n.Rollback(2)
	if n.Intact() || n.Stamp != st.Stamp || n.Run != 1 {
		t.Fatalf("rolled back: %+v", n)
	}
	m := n
	if m.SwapUUID(2, -1, 1, &st.Stamp, true) != -1 || m.Stamp == st.Stamp || m.Stamp.Run != 1 {
		t.Fatalf("with the prelude, the old stamp is replaced: %+v", m)
	}
	if n.SwapUUID(2, -1, 1, &st.Stamp, false) != -1 || n.RepairWrite(2, 1, 1, 5, &st.Stamp, false) != RepairLostUUID {
		t.Fatalf("without the prelude, the old stamp is refused all the same (it is of another run): %+v", n)
	}
}
