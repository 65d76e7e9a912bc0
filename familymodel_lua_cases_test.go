package redlock

import (
	"fmt"
	"strings"

	fm "github.com/quorumlock/redlock/internal/familymodel"
	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/nodescript"
)

// The grids of TestFamilyModelMatchesLua.

const famNow, famTTL = uint8(diffNow), uint8(diffTTL)

var (
	famEntries = []fm.Entry{{}, {Who: famOther + 1, Att: famAtt, Until: famNow + 1}, {Who: famOwn + 1, Att: famAtt, Until: famNow + 1}}
	famHs      = []uint8{0, 2*4 + 3, 9*4 + 2}
	famGs      = []uint8{0, 3}
)

// famNodes is every combination of the grid's fields for one scenario:
// up or amnesiac, G, E, the caller's marker, and what vary gives.
func famNodes(vary func(n fm.Node) []fm.Node) []fm.Node {
	var out []fm.Node
	for _, up := range []bool{true, false} {
		for _, g := range famGs {
			for _, e := range []uint8{0, 4} {
				for _, marked := range []bool{false, true} {
					n := fm.Node{Up: up, G: g, E: e}
					if marked {
						n.Marker[famOwn] = famAtt
					}
					out = append(out, vary(n)...)
				}
			}
		}
	}
	return out
}

// rwCases: the read-write lock's fenced write and read acquisitions
// (rw_write_block.lua + fenced_acquire.lua, rw_read.lua) against
// Node.Acquire and Node.Read, and their commits (rw_write_commit.lua,
// rw_read_commit.lua) against Node.Commit.
func (f *famEnv) rwCases() {
	writer := f.leaseOf("x", func(l *lease.Lease, prefix, name, _ string) lease.Shape {
		return lease.RW(false)(l, prefix, name, famValue(famOwn))
	})
	reader := f.leaseOf("x", func(l *lease.Lease, prefix, name, _ string) lease.Shape {
		return lease.RW(true)(l, prefix, name, famValue(famOwn))
	})
	key := lease.RWKey("redlock", "x")
	k := famKeys{key: [fm.MaxNames]string{key}, h: [fm.MaxNames]string{lease.HighKey(key)},
		readers: lease.ReadersKey(key), hr: lease.ReadHighKey(key)}
	nodes := famNodes(func(n fm.Node) []fm.Node {
		var out []fm.Node
		for _, w := range famEntries {
			for _, rd := range []int{-1, famOther, famOwn} {
				for _, h := range famHs {
					for _, hr := range famHs {
						m := n
						m.Key[0], m.H[0], m.HR = w, h, hr
						if rd >= 0 {
							m.Readers[rd] = fm.Entry{Who: uint8(rd) + 1, Att: famAtt, Until: famNow + 1}
						}
						out = append(out, m)
					}
				}
			}
		}
		return out
	})
	for _, n := range nodes {
		f.encode(n, k)
		want := n
		r := want.Acquire(&famRules, true, famNow, diffOwnID, famOwn, famAtt, famTTL, 0)
		f.famCompare("fenced rw write", n, "", acquireReply(n, r), run(writer.Shape().Acquire(writer, 0).Run(f.ctx, f.rdb).Int64Slice()), want, k)

		f.encode(n, k)
		want = n
		r = want.Read(&famRules, famNow, diffOwnID, famOwn, famAtt, famTTL)
		f.famCompare("fenced rw read", n, "", acquireReply(n, r), run(reader.Shape().Acquire(reader, 0).Run(f.ctx, f.rdb).Int64Slice()), want, k)

		for _, t := range []uint8{3*4 + 1, 8*4 + 3} {
			for _, side := range []struct {
				name string
				l    *lease.Lease
				role fm.Role
			}{{"rw write commit", writer, fm.Writer}, {"rw read commit", reader, fm.Reader}} {
				f.encode(n, k)
				want = n
				r = want.Commit(&famRules, side.role, 0, t)
				f.famCompare(side.name, n, fmt.Sprintf("token %d", famToken(t)), commitReply(n, r, t),
					run(side.l.Shape().Commit(side.l, famToken(t)).Run(f.ctx, f.rdb).Int64Slice()), want, k)
			}
		}
		f.releaseCases(n, k, []famSide{{"rw write release", writer, fm.Writer}, {"rw read release", reader, fm.Reader}})
	}
}

// famSide is a lease of the caller's and the model's role for it.
type famSide struct {
	name string
	l    *lease.Lease
	role fm.Role
}

// releaseCases: the release as a rollback and as Unlock send it, unsure
// the node has the acquisition (a marker asked for), against
// Node.Release. Only the keys and the caller's marker are compared (the
// reply, the queues and the wake-ups are outside the model).
//
// Outside the model: the caller's value both in the writer's key and in a
// reader entry (a lease downgraded on some nodes: the release removes
// both, and the model has no Downgrade).
func (f *famEnv) releaseCases(n fm.Node, k famKeys, sides []famSide) {
	if n.Readers[famOwn].Who != 0 && n.Key[0].Who == famOwn+1 {
		return
	}
	for _, side := range sides {
		if side.role == fm.Writer && n.Readers[famOwn].Who != 0 || side.role == fm.Reader && n.Key[0].Who == famOwn+1 {
			continue
		}
		for _, announce := range []bool{false, true} {
			f.encode(n, k)
			want := n
			want.Release(side.role, 0, famNow, famOwn, famAtt)
			call := f.e.ReleaseCall(side.l, false, announce)
			_, err := call.Run(f.ctx, f.rdb).Result()
			f.famCompare(side.name, n, fmt.Sprintf("announce %v", announce), "<nil>", fmt.Sprint(err), want, k)
		}
	}
}

// multiCases: the multi-lock's fenced take (multi_fenced_acquire.lua, as
// TryLockMulti sends it) and its commit (multi_commit.lua) against
// Node.MultiTake and Node.Commit.
func (f *famEnv) multiCases() {
	l := f.leaseOf(lease.MultiName([]string{"a", "b"}), func(l *lease.Lease, prefix, name, _ string) lease.Shape {
		return lease.Multi([]string{"a", "b"})(l, prefix, name, famValue(famOwn))
	})
	k := keysOf("redlock", "a", "b")
	nodes := famNodes(func(n fm.Node) []fm.Node {
		var out []fm.Node
		for _, a := range famEntries {
			for _, b := range famEntries {
				for _, ha := range famHs {
					for _, hb := range famHs {
						m := n
						m.Key[0], m.Key[1], m.H[0], m.H[1] = a, b, ha, hb
						out = append(out, m)
					}
				}
			}
		}
		return out
	})
	for _, n := range nodes {
		f.encode(n, k)
		want := n
		r := want.MultiTake(&famRules, famNow, diffOwnID, famOwn, famAtt, famTTL)
		f.famCompare("fenced multi take", n, "", acquireReply(n, r), run(l.Shape().Acquire(l, 0).Run(f.ctx, f.rdb).Int64Slice()), want, k)
		for _, t := range []uint8{3*4 + 1, 9*4 + 3} {
			f.encode(n, k)
			want = n
			r = want.Commit(&famRules, fm.MultiLock, 0, t)
			f.famCompare("multi commit", n, fmt.Sprintf("token %d", famToken(t)), commitReply(n, r, t),
				run(l.Shape().Commit(l, famToken(t)).Run(f.ctx, f.rdb).Int64Slice()), want, k)
		}
		f.releaseCases(n, k, []famSide{{"multi release", l, fm.MultiLock}})
	}
}

// semCases: a permit's take under the versioned size (permits.lua, then
// the slot, as sem_take.lua) against Node.Take, and SetPermits' write
// (setpermits.lua) against Node.SetSize. The engine is fenced, so the take
// runs its fenced script; the model's semaphore is not, and only the
// status and the size and slot are compared.
func (f *famEnv) semCases() {
	sizes := []struct{ k, v uint8 }{{0, 0}, {2, 0}, {1, 1}, {2, 1}, {1, 2}}
	k := keysOf("redlock", lease.SlotName("s", 0), lease.SlotName("s", 1))
	k.h = [fm.MaxNames]string{}
	k.size = lease.PermitsKey("redlock", "s")
	for _, size := range sizes {
		for _, slot := range famEntries {
			for _, marked := range []bool{false, true} {
				n := fm.Node{Up: true, SizeK: size.k, SizeV: size.v}
				n.Key[0] = slot
				if marked {
					n.Marker[famOwn] = famAtt
				}
				for _, client := range sizes[1:] {
					l := f.leaseOf("s#0", func(l *lease.Lease, prefix, name, _ string) lease.Shape {
						return lease.Permit("s", []int{0}, int(client.k), int64(client.v))(l, prefix, name, famValue(famOwn))
					})
					f.encode(n, k)
					want := n
					r := want.Take(&famRules, famNow, famOwn, famAtt, famTTL, 0, client.k, client.v)
					vals, err := l.Shape().Acquire(l, 0).Run(f.ctx, f.rdb).Int64Slice()
					got := replyOf(err)
					if err == nil {
						got = fmt.Sprint(vals[0] == 1)
					} else if parts := strings.Fields(err.Error()); len(parts) > 2 && parts[0] == "PERMITS" {
						got = "PERMITS " + parts[1] + " " + parts[2]
					}
					wantReply := fmt.Sprint(r.OK)
					if r.K != 0 {
						wantReply = fmt.Sprintf("PERMITS %d %d", r.K, r.V)
					}
					f.famCompare("sem take", n, fmt.Sprintf("size %d:%d", client.k, client.v), wantReply, got, want, k)
				}
			}
		}
		for _, set := range sizes[1:] {
			n := fm.Node{Up: true, SizeK: size.k, SizeV: size.v}
			f.encode(n, k)
			want := n
			ok := want.SetSize(set.k, set.v)
			// As SetPermits builds it (semaphore_size.go).
			call := nodescript.NewCall(nodescript.SetPermits, []any{k.size}, int(set.k), int64(60_000), int64(set.v))
			vals, err := call.Run(f.ctx, f.rdb).Int64Slice()
			got := replyOf(err)
			if err == nil {
				got = fmt.Sprint(vals[0] == 1)
			}
			f.famCompare("setpermits", n, fmt.Sprintf("size %d:%d", set.k, set.v), fmt.Sprint(ok), got, want, k)
		}
	}
}

// run is a script's reply as replyOf prints it.
func run(vals []int64, err error) string { return replyOf(vals, err) }
