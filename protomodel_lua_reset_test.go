package redlock

import (
	"fmt"
	"strconv"

	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/protomodel"
)

// The differential test's cases of the scripts issue 32 added to the model
// (TestProtomodelMatchesLua runs them): an extension and Reprovision's
// reset.

// extendCases: fenced_extend.lua as the mutex's Extend sends it, against
// Node.Extend. The longest TTL key it raises is not in the model.
func (d *diffEnv) extendCases() {
	i := 0
	for id := range diffIDs {
		for uuid := range diffUUIDs {
			for stamp := range diffStamps {
				for lock := range diffLocks {
					for _, ttl := range []int{1, 4} {
						i++
						dc := mkCase(id, uuid, i%3, stamp, int32(i%3), 0, 0, lock)
						d.encode(dc)
						vals, err := d.l.Shape().Extend(d.l, int64(ttl*diffUnit)).Run(d.ctx, d.rdb).Int64Slice()
						want := dc.n
						ok, nid := want.Extend(diffNow, diffValue, ttl)
						d.check("fenced_extend", dc, fmt.Sprintf("value %d, ttl %d", diffValue, ttl),
							replyOf([]int64{b2i(ok), int64(nid)}, nil), replyOf(vals, err), want, rosterAfter(dc, want), "")
					}
				}
			}
		}
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// resetRead is what Reprovision may have read of a node that holds dc's
// keys now: the model's condition, and reset.lua's intact argument.
type resetRead struct {
	want   protomodel.ResetCond
	intact bool
	what   string
}

// resetReads are the reads a reprovisioner can have made of dc's node, in
// this run or an earlier one, with its keys as they are now or with
// another uuid or stamp since: read intact (only under the run its id was
// recorded in), or read not intact, which stamps the node in the run of
// the read (node_state.lua's prelude), so the stamp read is of that run.
func (d *diffEnv) resetReads(dc diffCase) []resetRead {
	n := dc.n
	var reads []resetRead
	if n.ID >= 0 {
		reads = append(reads, resetRead{protomodel.ResetCond{UUID: n.UUID, ID: n.ID, Stamp: n.Stamp, Run: int16(n.RecRun)}, true,
			fmt.Sprintf("read intact in run %d", n.RecRun)})
	}
	for w := range diffWants {
		ws := d.wantStamp(dc, w)
		if n.ID >= 0 && n.RecRun == ws.Run {
			continue // it was intact in that run
		}
		reads = append(reads, resetRead{protomodel.ResetCond{UUID: n.UUID, ID: n.ID, Stamp: ws, Run: int16(ws.Run)}, false,
			fmt.Sprintf("read stamped (%s) in run %d", diffWants[w], ws.Run)})
	}
	for _, r := range reads[:len(reads):len(reads)] {
		r.want.UUID, r.what = 2, r.what+", uuid 2 then"
		if n.UUID == 2 {
			r.want.UUID = 1
		}
		reads = append(reads, r)
	}
	return reads
}

// resetCases: reset.lua as Reprovision calls it, against Node.Reset with
// the conditions of New (uuid, id, stamp and run read).
func (d *diffEnv) resetCases() {
	k := &d.keys
	keys := []string{k.UUID, k.Roster, k.ID, k.Replid, k.Lost, k.Counter, k.Floor, k.MaxTTL}
	i := 0
	for id := range diffIDs {
		for uuid := range diffUUIDs {
			for stamp := range diffStamps {
				for _, f := range []int32{3, 7} {
					i++
					dc := mkCase(id, uuid, i%3, stamp, 5, int32(i%2)*6, int32(i%2)*(2*256+1), i%len(diffLocks))
					for _, r := range d.resetReads(dc) {
						const newID = 2
						idRead := ""
						if r.want.ID >= 0 {
							idRead = strconv.Itoa(int(r.want.ID))
						}
						intact := "0"
						if r.intact {
							intact = "1"
						}
						d.encode(dc)
						res, err := nodescript.Reset.Run(d.ctx, d.rdb, keys, f, diffRetention, uuidStr(r.want.UUID), idRead,
							d.stampStr(r.want.Stamp), uuidStr(newID), rosterStr(rosterRight), newID, diffTTL*diffUnit, intact).Int()
						want := dc.n
						cond := r.want
						got := want.Reset(f, newID, &cond)
						wantRoster := rosterAfter(dc, want)
						if got == protomodel.ResetDone {
							wantRoster = rosterRight
						}
						d.check("reset", dc, fmt.Sprintf("floor %d, %s %+v", f, r.what, r.want), replyOf(int64(got), nil),
							replyOf(int64(res), err), want, wantRoster, "")
					}
				}
			}
		}
	}
}
