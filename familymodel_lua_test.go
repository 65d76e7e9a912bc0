package redlock

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	fm "github.com/quorumlock/redlock/internal/familymodel"
	"github.com/quorumlock/redlock/internal/identity"
	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// TestFamilyModelMatchesLua is the differential test of the lock family's
// model (internal/familymodel) against the scripts it models, as
// TestProtomodelMatchesLua is the mutex's: for a grid of node states it
// writes the model's node into a real server's keys, runs the script as the
// library builds the call (the lease's shape) and the model's method on the
// same node, reads the keys back and compares the replies and the states.
//
// The mapping (one server, model node 0, whose id is 1): model tick diffNow
// is the node's TIME at the start of the case, a tick diffUnit ms; the
// value of client c's attempt a is "c<c>a<a>"; a model token c*4+id is the
// library's c*256+id; an amnesiac node holds its roster and no id. The
// read-write lock is name "x", the multi-lock {"a", "b"} beside the mutex
// of "b", the semaphore "s" with its slots.
//
// Not compared, because the model leaves them out: the waiting lines,
// promises and reader phases, the longest-TTL key, the lost stamp, the
// TTLs of H, HR, E and the size.
func TestFamilyModelMatchesLua(t *testing.T) {
	t.Parallel() // its own node; it compares states, never timings (docs/tests.md)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := node.StartProcess(ctx, node.Config{Name: "familymodel"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer rdb.Close()
	f := &famEnv{diffEnv: newDiffEnv(ctx, t, rdb)}

	start := time.Now()
	f.rwCases()
	f.multiCases()
	f.semCases()
	if f.failures > diffMaxReports {
		t.Errorf("%d mismatches in all, %d reported", f.failures, diffMaxReports)
	}
	t.Logf("%d cases (%v): %s", f.total, time.Since(start).Round(time.Millisecond), f.perScript())
}

type famEnv struct {
	*diffEnv
}

var famRules = fm.Library

const (
	famOwn, famOther = 0, 1 // the clients: the caller, and another
	famAtt           = 1    // their attempt
)

func famValue(c uint8) string { return "c" + strconv.Itoa(int(c)) + "a" + strconv.Itoa(famAtt) }

// famToken maps a model token (or H, HR, E*4) to the library's.
func famToken(x uint8) int64 { return int64(x/4)*256 + int64(x%4) }

// leaseOf is a lease of the caller's value with shape, as the library
// builds one (fenced, the client's roster).
func (f *famEnv) leaseOf(name string, shape func(l *lease.Lease, prefix, name, value string) lease.Shape) *lease.Lease {
	l := new(lease.Lease)
	ls := f.c.defaultLease()
	f.e.Begin(l, lease.Request{Name: name, Prefix: "redlock", Term: lease.Term{TTL: ls.ttl, Arg: ls.arg},
		List: &identity.View{Roster: rosterStr(rosterRight)}, Shape: shape})
	return l
}

// famKeys names the model's keys on the server for one scenario.
type famKeys struct {
	key     [fm.MaxNames]string // each name's lock key
	h       [fm.MaxNames]string
	readers string // RW: the readers' set
	hr      string
	size    string // Sem: the size key
}

func keysOf(prefix string, names ...string) famKeys {
	var k famKeys
	for m, name := range names {
		k.key[m], _, _ = lease.LockKeys(prefix, name)
		k.h[m] = lease.HighKey(k.key[m])
	}
	return k
}

// encode writes model node n (node 0) into the server, alone.
func (f *famEnv) encode(n fm.Node, k famKeys) {
	ctx, nk := f.ctx, &f.keys
	if err := f.rdb.FlushAll(ctx).Err(); err != nil {
		f.t.Fatal(err)
	}
	now, err := f.rdb.Time(ctx).Result()
	if err != nil {
		f.t.Fatal(err)
	}
	f.base = now.UnixMilli()
	ttl := func(until uint8) time.Duration {
		return time.Duration(int(until)-diffNow) * diffUnit * time.Millisecond
	}
	_, err = f.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, nk.Roster, rosterStr(rosterRight), 0)
		if n.Up {
			p.Set(ctx, nk.ID, diffOwnID, 0)
			p.Set(ctx, nk.Replid, f.replid, 0)
		}
		if n.G != 0 {
			p.Set(ctx, nk.Counter, n.G, 0)
		}
		if n.E != 0 {
			p.Set(ctx, nk.Floor, n.E, diffRetention*time.Millisecond)
		}
		for m := range fm.MaxNames {
			if e := n.Key[m]; e.Who != 0 && k.key[m] != "" {
				p.Set(ctx, k.key[m], famValue(e.Who-1), ttl(e.Until))
			}
			if n.H[m] != 0 && k.h[m] != "" {
				p.Set(ctx, k.h[m], famToken(n.H[m]), diffRetention*time.Millisecond)
			}
		}
		for c, e := range n.Readers {
			if e.Who != 0 {
				p.ZAdd(ctx, k.readers, redis.Z{Score: float64(f.ms(int(e.Until))), Member: famValue(uint8(c))})
				p.PExpire(ctx, k.readers, ttl(e.Until))
			}
		}
		if n.HR != 0 {
			p.Set(ctx, k.hr, famToken(n.HR), diffRetention*time.Millisecond)
		}
		for c, att := range n.Marker {
			if att != 0 {
				p.Set(ctx, lease.MarkerKey(k.key[0], famValue(uint8(c))), 1, time.Minute)
				p.Set(ctx, lease.MarkerKey(k.key[1], famValue(uint8(c))), 1, time.Minute)
			}
		}
		if n.SizeK != 0 {
			size := strconv.Itoa(int(n.SizeK))
			if n.SizeV != 0 {
				size += ":" + strconv.Itoa(int(n.SizeV))
			}
			p.Set(ctx, k.size, size, time.Minute)
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// decode reads the server's keys back into a model node (Marker and
// WipedAt copied from like: the scripts compared do not write them).
func (f *famEnv) decode(like fm.Node, k famKeys) fm.Node {
	ctx, nk := f.ctx, &f.keys
	n := fm.Node{Marker: like.Marker, WipedAt: like.WipedAt}
	// The caller's marker (the only one a compared script writes): on any
	// of the names' keys.
	n.Marker[famOwn] = 0
	for m := range fm.MaxNames {
		if k.key[m] != "" && f.rdb.Exists(ctx, lease.MarkerKey(k.key[m], famValue(famOwn))).Val() == 1 {
			n.Marker[famOwn] = famAtt
		}
	}
	get := func(key string) string { v, _ := f.rdb.Get(ctx, key).Result(); return v }
	num := func(key string) uint8 { v, _ := strconv.Atoi(get(key)); return uint8(v) }
	tok := func(key string) uint8 {
		v, _ := strconv.ParseInt(get(key), 10, 64)
		return uint8(v/256*4 + v%256)
	}
	who := func(v string) uint8 {
		c, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(v, "c"), "a"+strconv.Itoa(famAtt)))
		return uint8(c) + 1
	}
	n.Up = get(nk.ID) != ""
	n.G, n.E = num(nk.Counter), num(nk.Floor)
	for m := range fm.MaxNames {
		if k.key[m] == "" {
			continue
		}
		if v := get(k.key[m]); v != "" {
			pttl, _ := f.rdb.PTTL(ctx, k.key[m]).Result()
			n.Key[m] = fm.Entry{Who: who(v), Att: famAtt, Until: uint8(diffNow + int(math.Round(float64(pttl.Milliseconds())/diffUnit)))}
		}
		n.H[m] = tok(k.h[m])
	}
	if k.readers != "" {
		zs, _ := f.rdb.ZRangeWithScores(ctx, k.readers, 0, -1).Result()
		for _, z := range zs {
			c := who(z.Member.(string)) - 1
			n.Readers[c] = fm.Entry{Who: c + 1, Att: famAtt, Until: uint8(f.tick(int64(z.Score)))}
		}
		n.HR = tok(k.hr)
	}
	if k.size != "" {
		if s := get(k.size); s != "" {
			ks, vs, _ := strings.Cut(s, ":")
			kk, _ := strconv.Atoi(ks)
			vv, _ := strconv.Atoi(vs)
			n.SizeK, n.SizeV = uint8(kk), uint8(vv)
		}
	}
	return n
}

// famCompare reports a mismatch between the model's reply and node after
// the step (want) and the script's (got).
func (f *famEnv) famCompare(script string, before fm.Node, args, wantReply, gotReply string, want fm.Node, k famKeys) {
	f.total++
	if f.counts[script] == 0 {
		f.order = append(f.order, script)
	}
	f.counts[script]++
	want.Shrunk = false
	got := f.decode(want, k)
	if k.size != "" {
		want.G = got.G // the model's semaphore is not fenced; the engine's take is
	}
	var diffs []string
	if wantReply != gotReply {
		diffs = append(diffs, fmt.Sprintf("reply: model %s, script %s", wantReply, gotReply))
	}
	if want != got {
		diffs = append(diffs, fmt.Sprintf("state: model %v, script %v", want, got))
	}
	if len(diffs) == 0 {
		return
	}
	f.failures++
	if f.failures <= diffMaxReports {
		f.t.Errorf("%s on [%v], %s:\n\t%s", script, before, args, strings.Join(diffs, "\n\t"))
	}
}

// acquireReply is a fenced round 1's reply as the script gives it.
func acquireReply(n fm.Node, r fm.Reply) string {
	switch {
	case !n.Up:
		return replyOf([]int64{-1, 0}, nil)
	case r.OK:
		return replyOf([]int64{1, famToken(r.Cand)}, nil)
	}
	return replyOf([]int64{0, famToken(r.Cand)}, nil)
}

// commitReply is a commit's reply: the token, or the floor above it, and
// the node's id.
func commitReply(n fm.Node, r fm.Reply, t uint8) string {
	switch {
	case !n.Up:
		return replyOf([]int64{-1, 0}, nil)
	case r.OK:
		return replyOf([]int64{famToken(t), diffOwnID}, nil)
	}
	return replyOf([]int64{famToken(r.Cand), diffOwnID}, nil)
}
