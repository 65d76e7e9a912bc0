package redlock

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/identity"
	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/protomodel"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// TestProtomodelMatchesLua is a differential test of the protocol model
// (internal/protomodel) against the Lua scripts it models: for a grid of
// node states and script arguments, it writes the model's node into a real
// server's keys, runs the real script as the library calls it and the
// model's method on the same node, reads the keys back into a model node,
// and compares the replies and the states. A change to a script that the
// model does not follow (or the reverse) fails it.
//
// The mapping (one server, one lock name "x", prefix "redlock"):
//
//   - model time: tick diffNow is the node's TIME at the start of the case;
//     a tick is diffUnit ms. Lock TTLs, lock expiries and stamp times are
//     ticks times diffUnit; a stamp made by the script decodes to the tick
//     of its ms, rounded.
//   - runs (replication ids): the node's current run diffRun is its real
//     master_replid (INFO replication); any other run is a fixed other id.
//     A node's recorded replication id (Keys.RecRun) and a stamp's run map so.
//   - ids, uuids, lock values: id k is "k", uuid k is "uuid-k", lock value
//     (Holder) k is "vk", a stamp's nonce k is "ek"; a stamp the script makes
//     carries the caller's nonce, which decodes to the model node's Epoch
//     (the model's nonce of a stamp made now).
//   - the roster: the model's Roster is whether the key exists; the test
//     also keeps which roster it holds (the client's, or another
//     deployment's), which the model does not have.
//   - G, E, H: the counters; 0 is no key.
//
// Not compared, because the model leaves them out (node.go): the longest TTL
// key (fence:max-ttl), the release marker and the queue, the TTLs of H and E
// (the retention), and the node's uptime (a server's own; not encodable).
// Not in the grid: a node holding an id without a recorded replication id
// (identity.lua's trust on first use; the model has no such state).
//
// States outside the model: an intact node whose roster is not the client's
// (absent or another deployment's). The model's nodes hold the roster
// whenever they hold an id, and it has no other deployment, so it has no
// -3 reply; there the test checks the scripts' own rule instead: {-3, 0}
// and nothing written.

func TestProtomodelMatchesLua(t *testing.T) {
	t.Parallel() // its own node; it compares states, never timings (docs/tests.md)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := node.StartProcess(ctx, node.Config{Name: "protomodel"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer rdb.Close()
	d := newDiffEnv(ctx, t, rdb)

	start := time.Now()
	d.acquireCases()
	d.commitCases()
	d.releaseCases()
	d.readStateCases()
	d.swapCases()
	d.repairCases()
	d.extendCases()
	d.resetCases()
	if d.failures > diffMaxReports {
		t.Errorf("%d mismatches in all, %d reported", d.failures, diffMaxReports)
	}
	t.Logf("%d cases (%v): %s", d.total, time.Since(start).Round(time.Millisecond), d.perScript())
}

const (
	diffNow        = 10     // the model time of every case
	diffUnit       = 10_000 // ms per model tick
	diffRun        = 1      // the node's current run
	diffOtherRun   = 0      // any other run
	diffEpoch      = 3      // the node's epoch: the nonce of a stamp made now
	diffTTL        = 2      // the acquisition's TTL, in ticks
	diffRetention  = 600_000
	diffMaxReports = 25
	diffValue      = 1 // the caller's lock value
	diffOtherValue = 7 // another client's
	diffOwnID      = 1 // the id of a node that holds one
)

// rosterKind is which roster a node holds.
type rosterKind int

const (
	rosterAbsent rosterKind = iota
	rosterRight             // the client's (the deployment's)
	rosterOther             // another deployment's
)

func (r rosterKind) String() string { return [...]string{"absent", "right", "other"}[r] }

type diffEnv struct {
	ctx    context.Context
	t      *testing.T
	rdb    *redis.Client
	c      *Client
	e      *lease.Engine
	keys   nodescript.NodeKeys // the per-node fencing keys, as the client's
	l      *lease.Lease
	replid string // the node's master_replid
	other  string // another replication id
	base   int64  // node ms at diffNow, in the current case

	total, failures int
	counts          map[string]int
	order           []string
}

func newDiffEnv(ctx context.Context, t *testing.T, rdb *redis.Client) *diffEnv {
	info, err := rdb.Info(ctx, "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	var replid string
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "master_replid:"); ok {
			replid = v
		}
	}
	if replid == "" {
		t.Fatalf("no master_replid in INFO replication:\n%s", info)
	}
	other := strings.Repeat("0123456789abcdef", 3)[:len(replid)]
	if other == replid {
		other = strings.Repeat("f", len(replid))
	}
	// The library's own client, lease engine and lease, as far as building
	// the calls needs: the calls are made by the mutex's shape itself (the
	// release's as the engine builds it: a marker unless sure).
	c := &Client{
		nodes: make([]redis.UniversalClient, 1),
		cfg:   config{keyPrefix: "redlock", ttl: diffTTL * diffUnit * time.Millisecond, retention: diffRetention * time.Millisecond},
	}
	keys := nodescript.NewNodeKeys("redlock")
	c.args = scriptArgs{ttl: int64(diffTTL * diffUnit), retention: int64(diffRetention)}
	e := lease.New(lease.Config{Nodes: c.nodes, Fencing: true, TTL: c.cfg.ttl, Keys: keys,
		Args: lease.Args{MarkerTTL: int64(10 * diffTTL * diffUnit), StaleWaiter: int64(diffUnit),
			PromiseFor: int64(diffUnit), Retention: int64(diffRetention)}})
	ls := c.defaultLease()
	l := new(lease.Lease)
	e.Begin(l, lease.Request{Name: "x", Prefix: "redlock", Term: lease.Term{TTL: ls.ttl, Arg: ls.arg},
		List: &identity.View{Roster: rosterStr(rosterRight)},
		Shape: func(l *lease.Lease, prefix, name, _ string) lease.Shape {
			return lease.Mutex(l, prefix, name, valueStr(diffValue))
		}})
	return &diffEnv{ctx: ctx, t: t, rdb: rdb, c: c, e: e, keys: keys, l: l, replid: replid, other: other, counts: map[string]int{}}
}

func valueStr(v uint8) string { return "v" + strconv.Itoa(int(v)) }
func uuidStr(u int8) string {
	if u < 0 {
		return ""
	}
	return "uuid-" + strconv.Itoa(int(u))
}
func rosterStr(r rosterKind) string { return [...]string{"", "roster-A", "roster-B"}[r] }

func (d *diffEnv) runStr(run uint8) string {
	if run == diffRun {
		return d.replid
	}
	return d.other
}

// ms is the node time of model tick t in the current case.
func (d *diffEnv) ms(t int) int64 { return d.base + int64(t-diffNow)*diffUnit }

// tick is the model tick of node time ms, rounded.
func (d *diffEnv) tick(ms int64) int {
	return diffNow + int(math.Round(float64(ms-d.base)/diffUnit))
}

func (d *diffEnv) stampStr(s protomodel.Stamp) string {
	if !s.Set {
		return ""
	}
	return fmt.Sprintf("%d:e%d:%s", d.ms(int(s.T)), s.Nonce, d.runStr(s.Run))
}

// decodeStamp reads a stamp as stored; nonce is the nonce the script was
// given, which stands for the model's nonce of a stamp made now (the
// node's epoch). Parts it cannot map decode to 255, which no model state
// holds.
func (d *diffEnv) decodeStamp(s, nonce string) protomodel.Stamp {
	if s == "" {
		return protomodel.Stamp{}
	}
	out := protomodel.Stamp{Set: true, T: math.MaxInt16, Nonce: 255, Run: 255}
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return out
	}
	if ms, err := strconv.ParseInt(parts[0], 10, 64); err == nil {
		out.T = int16(d.tick(ms))
	}
	switch n, err := strconv.Atoi(strings.TrimPrefix(parts[1], "e")); {
	case parts[1] == nonce:
		out.Nonce = diffEpoch
	case strings.HasPrefix(parts[1], "e") && err == nil:
		out.Nonce = uint8(n)
	}
	switch parts[2] {
	case d.replid:
		out.Run = diffRun
	case d.other:
		out.Run = diffOtherRun
	}
	return out
}

// diffCase is one node state of the grid.
type diffCase struct {
	n      protomodel.Node
	roster rosterKind
}

func (dc diffCase) String() string {
	k := dc.n.Keys
	return fmt.Sprintf("{id %d recorded-run %d (run %d), uuid %d, roster %v, stamp %+v, G %d, E %d, H %d, holder %d expiry %d, now %d}",
		k.ID, k.RecRun, dc.n.Run, k.UUID, dc.roster, k.Stamp, k.G, k.E, k.H, k.Holder, k.Expiry, diffNow)
}

// The grid's values.
var (
	// id marker: none, ours with the current replication id recorded, ours
	// with another recorded (restarted, promoted), and id 0 (intact)
	diffIDs = []struct {
		id  int8
		rec uint8
	}{{-1, diffOtherRun}, {diffOwnID, diffRun}, {diffOwnID, diffOtherRun}, {0, diffRun}}
	diffUUIDs   = []int8{-1, 1, 2}
	diffRosters = []rosterKind{rosterRight, rosterAbsent, rosterOther}
	diffStamps  = []protomodel.Stamp{{}, // none, of this run, of an earlier run
		{Set: true, T: diffNow - 2, Nonce: 1, Run: diffRun},
		{Set: true, T: diffNow - 5, Nonce: 2, Run: diffOtherRun}}
	// the lock key: free, ours, another's, ours but expired
	diffLocks = []struct {
		holder uint8
		expiry int16
	}{{0, 0}, {diffValue, diffNow + 3}, {diffOtherValue, diffNow + 1}, {diffValue, diffNow}}
)

func mkCase(id, uuid, roster, stamp int, g, e, h int32, lock int) diffCase {
	n := protomodel.Node{Run: diffRun, Epoch: diffEpoch}
	n.ID, n.RecRun = diffIDs[id].id, diffIDs[id].rec
	n.UUID = diffUUIDs[uuid]
	n.Roster = diffRosters[roster] != rosterAbsent
	n.Stamp = diffStamps[stamp]
	n.G, n.E, n.H = g, e, h
	n.Holder, n.Expiry = diffLocks[lock].holder, diffLocks[lock].expiry
	return diffCase{n: n, roster: diffRosters[roster]}
}

// encode writes the case into the node, alone.
func (d *diffEnv) encode(dc diffCase) {
	ctx, k := d.ctx, &d.keys
	if err := d.rdb.FlushAll(ctx).Err(); err != nil {
		d.t.Fatal(err)
	}
	now, err := d.rdb.Time(ctx).Result()
	if err != nil {
		d.t.Fatal(err)
	}
	d.base = now.UnixMilli()
	n := dc.n
	expired := false
	_, err = d.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if n.ID >= 0 {
			p.Set(ctx, k.ID, strconv.Itoa(int(n.ID)), 0)
		}
		p.Set(ctx, k.Replid, d.runStr(n.RecRun), 0)
		if n.UUID >= 0 {
			p.Set(ctx, k.UUID, uuidStr(n.UUID), 0)
		}
		if dc.roster != rosterAbsent {
			p.Set(ctx, k.Roster, rosterStr(dc.roster), 0)
		}
		if n.Stamp.Set {
			p.Set(ctx, k.Lost, d.stampStr(n.Stamp), 0)
		}
		if n.G != 0 {
			p.Set(ctx, k.Counter, n.G, 0)
		}
		if n.E != 0 {
			p.Set(ctx, k.Floor, n.E, diffRetention*time.Millisecond)
		}
		if n.H != 0 {
			p.Set(ctx, lease.HighKey(lease.Key(d.l.Shape())), n.H, diffRetention*time.Millisecond)
		}
		if n.Holder != 0 {
			ttl := time.Duration(int(n.Expiry)-diffNow) * diffUnit * time.Millisecond
			if ttl <= 0 {
				ttl, expired = time.Millisecond, true
			}
			p.Set(ctx, lease.Key(d.l.Shape()), valueStr(n.Holder), ttl)
		}
		return nil
	})
	if err != nil {
		d.t.Fatal(err)
	}
	if expired {
		time.Sleep(3 * time.Millisecond) // the key's time passes
	}
}

// decode reads the node's keys back into a model node (the non-key fields
// copied from like), the roster held, and the stamp as stored.
func (d *diffEnv) decode(like protomodel.Node, nonce string) (protomodel.Node, rosterKind, string) {
	ctx, k := d.ctx, &d.keys
	var gets []*redis.StringCmd
	var pttl *redis.DurationCmd
	_, err := d.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, key := range []string{k.ID, k.Replid, k.UUID, k.Roster, k.Lost, k.Counter, k.Floor, lease.HighKey(lease.Key(d.l.Shape())), lease.Key(d.l.Shape())} {
			gets = append(gets, p.Get(ctx, key))
		}
		pttl = p.PTTL(ctx, lease.Key(d.l.Shape()))
		return nil
	})
	if err != nil && err != redis.Nil {
		d.t.Fatal(err)
	}
	val := func(i int) (string, bool) {
		v, err := gets[i].Result()
		return v, err == nil
	}
	num := func(i int) int64 {
		v, ok := val(i)
		if !ok {
			return 0
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return math.MinInt32
		}
		return n
	}
	n := like
	n.Keys = protomodel.Keys{ID: -1, UUID: -1, RecRun: 255}
	if v, ok := val(0); ok {
		n.ID = int8(num(0))
		if strconv.Itoa(int(n.ID)) != v {
			n.ID = 127
		}
	}
	switch v, _ := val(1); v {
	case d.replid:
		n.RecRun = diffRun
	case d.other:
		n.RecRun = diffOtherRun
	}
	if v, ok := val(2); ok {
		n.UUID = 127
		if u, err := strconv.Atoi(strings.TrimPrefix(v, "uuid-")); err == nil && uuidStr(int8(u)) == v {
			n.UUID = int8(u)
		}
	}
	roster := rosterAbsent
	if v, ok := val(3); ok {
		n.Roster = true
		roster = rosterOther
		if v == rosterStr(rosterRight) {
			roster = rosterRight
		}
	}
	stamp, _ := val(4)
	n.Stamp = d.decodeStamp(stamp, nonce)
	n.G, n.E, n.H = int32(num(5)), int32(num(6)), int32(num(7))
	if v, ok := val(8); ok {
		n.Holder = 255
		if h, err := strconv.Atoi(strings.TrimPrefix(v, "v")); err == nil && valueStr(uint8(h)) == v {
			n.Holder = uint8(h)
		}
		n.Expiry = int16(diffNow + int(math.Round(float64(pttl.Val().Milliseconds())/diffUnit)))
	}
	return n, roster, stamp
}

// heldKeys are a node's keys as compared: an expired lock key is no key.
func heldKeys(n protomodel.Node) protomodel.Keys {
	k := n.Keys
	if k.Holder == 0 || int(k.Expiry) <= diffNow {
		k.Holder, k.Expiry = 0, 0
	}
	return k
}

// check compares the model's reply and node after the script (want) with
// the script's reply and the node's keys (got), and reports a mismatch with
// the inputs.
func (d *diffEnv) check(script string, dc diffCase, args string, wantReply, gotReply string,
	want protomodel.Node, wantRoster rosterKind, nonce string) bool {
	d.total++
	if d.counts[script] == 0 {
		d.order = append(d.order, script)
	}
	d.counts[script]++
	got, gotRoster, _ := d.decode(want, nonce)
	var diffs []string
	if wantReply != gotReply {
		diffs = append(diffs, fmt.Sprintf("reply: model %s, script %s", wantReply, gotReply))
	}
	wk, gk := heldKeys(want), heldKeys(got)
	if wk.Stamp.Set != gk.Stamp.Set || (wk.Stamp != dc.n.Stamp) != (gk.Stamp != dc.n.Stamp) {
		diffs = append(diffs, fmt.Sprintf("stamp present/changed: model %v/%v, script %v/%v",
			wk.Stamp.Set, wk.Stamp != dc.n.Stamp, gk.Stamp.Set, gk.Stamp != dc.n.Stamp))
	}
	if wk != gk {
		diffs = append(diffs, fmt.Sprintf("state: model %+v, script %+v", wk, gk))
	}
	if wantRoster != gotRoster {
		diffs = append(diffs, fmt.Sprintf("roster: model %v, script %v", wantRoster, gotRoster))
	}
	if len(diffs) == 0 {
		return true
	}
	d.failures++
	if d.failures <= diffMaxReports {
		d.t.Errorf("%s on %v, %s:\n\t%s", script, dc, args, strings.Join(diffs, "\n\t"))
	}
	return false
}

// rosterAfter is the roster the node holds after the model's step: the
// client's if the step wrote one (the repair), else the one it held.
func rosterAfter(dc diffCase, after protomodel.Node) rosterKind {
	switch {
	case !after.Roster:
		return rosterAbsent
	case !dc.n.Roster:
		return rosterRight
	}
	return dc.roster
}

// outsideModel: an intact node holding another roster than the client's.
func outsideModel(dc diffCase) bool { return dc.n.Intact() && dc.roster != rosterRight }

func (d *diffEnv) perScript() string {
	var parts []string
	for _, s := range d.order {
		parts = append(parts, fmt.Sprintf("%s %d", s, d.counts[s]))
	}
	return strings.Join(parts, ", ")
}

func replyOf(vs ...any) string { return fmt.Sprint(vs...) }

// acquireCases: fenced_acquire.lua with the identity prelude, as TryLock
// sends it (no waiter), against Node.Acquire.
func (d *diffEnv) acquireCases() {
	i := 0
	for id := range diffIDs {
		for roster := range diffRosters {
			for stamp := range diffStamps {
				for _, g := range []int32{0, 5} {
					for _, h := range []int32{0, 3*256 + 2, 9 * 256} {
						for lock := range diffLocks {
							i++
							dc := mkCase(id, i%3, roster, stamp, g, []int32{0, 4}[i%2], h, lock)
							d.acquireCase(dc)
						}
					}
				}
			}
		}
	}
}

func (d *diffEnv) acquireCase(dc diffCase) {
	d.encode(dc)
	vals, err := d.l.Shape().Acquire(d.l, 0).Run(d.ctx, d.rdb).Int64Slice()
	got := replyOf(vals, err)
	want, wantReply := dc.n, ""
	if outsideModel(dc) {
		wantReply = replyOf([]int64{-3, 0}, nil)
	} else {
		st, cand := want.Acquire(diffNow, diffValue, diffTTL)
		wantReply = replyOf([]int64{int64(st), int64(cand)}, nil)
	}
	d.check("fenced_acquire", dc, fmt.Sprintf("value %d, ttl %d", diffValue, diffTTL), wantReply, got,
		want, rosterAfter(dc, want), valueStr(diffValue))
}

// commitCases: commit.lua with the identity prelude against Node.Commit.
func (d *diffEnv) commitCases() {
	i := 0
	for id := range diffIDs {
		for roster := range diffRosters {
			for _, stamp := range []int{0, 2} {
				for _, g := range []int32{0, 3, 7} {
					for _, e := range []int32{0, 3, 5} {
						for _, h := range []int32{0, 3*256 + 1, 4*256 + 2} {
							for _, tok := range []int32{2*256 + 2, 3*256 + 1, 4*256 + 1, 6*256 + 0} {
								i++
								dc := mkCase(id, i%3, roster, stamp, g, e, h, i%len(diffLocks))
								d.commitCase(dc, tok)
							}
						}
					}
				}
			}
		}
	}
}

func (d *diffEnv) commitCase(dc diffCase, tok int32) {
	d.encode(dc)
	vals, err := d.l.Shape().Commit(d.l, int64(tok)).Run(d.ctx, d.rdb).Int64Slice()
	got := replyOf(vals, err)
	want, wantReply := dc.n, ""
	if outsideModel(dc) {
		wantReply = replyOf([]int64{-3, 0}, nil)
	} else {
		h := want.Commit(diffNow, tok)
		id := int64(want.ID)
		if h == -1 {
			id = 0
		}
		wantReply = replyOf([]int64{int64(h), id}, nil)
	}
	d.check("commit", dc, fmt.Sprintf("token %d (%d*256+%d)", tok, tok/256, tok%256), wantReply, got,
		want, rosterAfter(dc, want), valueStr(diffValue))
}

// releaseCases: release.lua, as Unlock (announce) and a rollback send it,
// sure or not of the acquisition's outcome, against Node.Release. The
// release marker and the queue are not in the model.
func (d *diffEnv) releaseCases() {
	i := 0
	for lock := range diffLocks {
		for id := range diffIDs {
			for _, sure := range []bool{true, false} {
				for _, announce := range []bool{true, false} {
					i++
					dc := mkCase(id, i%3, i%3, i%3, int32(i%4), 0, int32(i%2)*(2*256+1), lock)
					d.encode(dc)
					n, err := d.e.ReleaseCall(d.l, sure, announce).Run(d.ctx, d.rdb).Int64()
					want := dc.n
					r := want.Release(diffNow, diffValue)
					d.check("release", dc, fmt.Sprintf("value %d, sure %v, announce %v", diffValue, sure, announce),
						replyOf(int64(r), nil), replyOf(n, err), want, rosterAfter(dc, want), valueStr(diffValue))
				}
			}
		}
	}
}

// readStateCases: node_state.lua (with the identity prelude) as
// readStates calls it, parsed by parseNodeState (identity.Parsed), against Node.ReadState.
// The uptime is not compared.
func (d *diffEnv) readStateCases() {
	k := &d.keys
	keys := []string{k.UUID, k.Roster, k.ID, k.Replid, k.Lost, k.Counter, k.MaxTTL}
	const nonce = "r0"
	i := 0
	for id := range diffIDs {
		for uuid := range diffUUIDs {
			for roster := range diffRosters {
				for stamp := range diffStamps {
					for _, g := range []int32{0, 4} {
						i++
						dc := mkCase(id, uuid, roster, stamp, g, int32(i%2)*3, 0, i%len(diffLocks))
						d.encode(dc)
						var got string
						v, err := nodescript.NodeState.Run(d.ctx, d.rdb, keys, nonce).Slice()
						if err == nil {
							var sUUID string
							var sID int
							var sIntact bool
							var sNow, sCounter int64
							if sUUID, sID, sIntact, sNow, sCounter, err = identity.Parsed(v); err == nil {
								u := int8(-1)
								if sUUID != "" {
									u = 127
									if n, err := strconv.Atoi(strings.TrimPrefix(sUUID, "uuid-")); err == nil && uuidStr(int8(n)) == sUUID {
										u = int8(n)
									}
								}
								stamp, _ := v[5].(string)
								got = fmt.Sprintf("%+v", protomodel.NodeState{UUID: u, ID: int8(sID), Intact: sIntact,
									Stamp: d.decodeStamp(stamp, nonce), Now: int16(d.tick(sNow)), G: int32(sCounter)})
							}
						}
						if err != nil {
							got = err.Error()
						}
						want := dc.n
						st := want.ReadState(diffNow)
						st.Uptime = 0
						d.check("node_state", dc, "", fmt.Sprintf("%+v", st), got, want, rosterAfter(dc, want), nonce)
					}
				}
			}
		}
	}
}

// The stamps a repairer may have read (ARGV of swap_uuid.lua and
// repair.lua): the one the node holds (of this run if it holds none),
// another of this run, and one of an earlier run.
var diffWants = []string{"held", "other-this-run", "earlier-run"}

func (d *diffEnv) wantStamp(dc diffCase, w int) protomodel.Stamp {
	switch w {
	case 0:
		if dc.n.Stamp.Set {
			return dc.n.Stamp
		}
		return protomodel.Stamp{Set: true, T: diffNow - 3, Nonce: 1, Run: diffRun}
	case 1:
		return protomodel.Stamp{Set: true, T: diffNow - 4, Nonce: 5, Run: diffRun}
	}
	return protomodel.Stamp{Set: true, T: diffNow - 5, Nonce: 2, Run: diffOtherRun}
}

// swapCases: swap_uuid.lua as takeUUID calls it (claim, and give back with
// u = none) against Node.SwapUUID with the stamped writes and no prelude
// (Rules New, which the scripts implement).
func (d *diffEnv) swapCases() {
	k := &d.keys
	keys := []string{k.UUID, k.ID, k.Lost}
	i := 0
	for id := range diffIDs {
		for uuid := range diffUUIDs {
			for stamp := range diffStamps {
				for w := range diffWants {
					for _, read := range []int8{-1, 1} {
						for _, u := range []int8{1, 2, -1} {
							i++
							dc := mkCase(id, uuid, i%3, stamp, int32(i%3), 0, 0, i%len(diffLocks))
							ws := d.wantStamp(dc, w)
							d.encode(dc)
							got, err := nodescript.SwapUUID.Run(d.ctx, d.rdb, keys, uuidStr(read), uuidStr(u), d.stampStr(ws)).Text()
							args := fmt.Sprintf("read uuid %d, new uuid %d, stamp read %s %+v", read, u, diffWants[w], ws)
							want := dc.n
							r := want.SwapUUID(diffNow, read, u, &ws, false)
							wantReply := replyOf(uuidStr(r), nil)
							d.check("swap_uuid", dc, args, wantReply, replyOf(got, err), want, rosterAfter(dc, want), "")
						}
					}
				}
			}
		}
	}
}

// repairCases: repair.lua as repair calls it, against Node.RepairWrite with
// the stamped writes and no prelude. The script's 2 (stamp changed) and 0
// (uuid lost) are both the model's RepairLostUUID; its error reply (another
// id) is RepairOtherID.
func (d *diffEnv) repairCases() {
	k := &d.keys
	keys := []string{k.UUID, k.Roster, k.ID, k.Replid, k.Lost, k.Counter, k.Floor, k.MaxTTL}
	i := 0
	ids := []struct {
		id  int8
		rec uint8
	}{{-1, diffOtherRun}, {diffOwnID, diffOtherRun}, {2, diffOtherRun}}
	for idc := range ids {
		for uuid := range diffUUIDs {
			for stamp := range diffStamps {
				for w := range diffWants {
					for _, g := range []int32{3, 7} {
						for _, e := range []int32{0, 6} {
							i++
							dc := mkCase(0, uuid, i%3, stamp, 5, e, int32(i%2)*(2*256+1), i%len(diffLocks))
							dc.n.ID, dc.n.RecRun = ids[idc].id, ids[idc].rec
							ws := d.wantStamp(dc, w)
							const u, id = 1, diffOwnID
							d.encode(dc)
							res, err := nodescript.Repair.Run(d.ctx, d.rdb, keys, uuidStr(u), rosterStr(rosterRight), id, g,
								diffRetention, diffTTL*diffUnit, d.stampStr(ws)).Int()
							got := strconv.Itoa(res)
							switch {
							case err != nil && strings.Contains(err.Error(), "node holds id"):
								got = strconv.Itoa(protomodel.RepairOtherID)
							case err != nil:
								got = err.Error()
							case res == 2:
								got = strconv.Itoa(protomodel.RepairLostUUID)
							}
							args := fmt.Sprintf("uuid %d, id %d, g %d, stamp read %s %+v", u, id, g, diffWants[w], ws)
							want := dc.n
							wantReply := strconv.Itoa(want.RepairWrite(diffNow, u, id, g, &ws, false))
							wantRoster := rosterAfter(dc, want)
							if wantReply == strconv.Itoa(protomodel.RepairDone) {
								wantRoster = rosterRight // the script writes the client's roster
							}
							d.check("repair", dc, args, wantReply, got, want, wantRoster, "")
						}
					}
				}
			}
		}
	}
}
