package redlock_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// Provisioning against snapshots: a majority restored from before the
// ids, a deployment from before rosters, a provisioning snapshot.

// Review of issue 23, items 1 and 4 (adversarial): a MAJORITY restored from
// a snapshot taken while the deployment was being provisioned (after the
// roster, before the ids: docs and doctor name this state, "restored from a
// snapshot taken then") is given its ids by Provision at once, with the
// counters of the snapshot (none), instead of being refused as a majority
// that lost its data. assignIDs assumes "such a node never had an id", which
// a snapshot restore contradicts; repairMissing handles the restore only
// when a majority kept its ids. Tokens then go backwards (M1 broken): a lock
// on the restored majority gets a token below one returned before.
// doctor's per-node advice for this state is "`redlock provision` gives it
// its id through a repair, which waits out the delayed restart" — which is
// not what Provision does when the nodes holding ids are a minority.
//
// On ce151f8:
//
//	review_diag_test.go:111: Provision of a deployment whose majority was restored from a pre-id snapshot: <nil>, want ErrAmnesia (a majority lost)
//	review_diag_test.go:132: token 258 on the restored majority after 2049 before: tokens went backwards
//
// (e1c99f5 did the same: the hole predates issue 23, which now points
// operators at it; see TestReviewDoctor* in cmd/redlock.)
// Origin: the adversarial review of provisioning and diagnostics.
func TestProvisionOfAMajorityRestoredFromAPreIDSnapshot(t *testing.T) {
	cl := startFreshCluster(t, 3)
	ctx := context.Background()

	// A Provision interrupted after the roster: every node holds its uuid
	// and the roster, none an id. This is what the snapshot captures.
	var hooked []redis.UniversalClient
	for _, n := range cl.nodes {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr()})
		rc.AddHook(failScript("assign"))
		hooked = append(hooked, rc)
		defer rc.Close()
	}
	p, err := redlock.New(hooked, redlock.WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Provision(ctx); err == nil {
		t.Fatal("Provision succeeded although every id write failed")
	}
	p.Close()
	type snap struct{ uuid, roster string }
	snaps := map[int]snap{}
	for _, i := range []int{1, 2} {
		u := cl.inspect[i].Get(ctx, "redlock:node-uuid").Val()
		r := cl.inspect[i].Get(ctx, "redlock:node-roster").Val()
		if u == "" || r == "" || cl.inspect[i].Exists(ctx, "redlock:node-id").Val() != 0 {
			t.Fatalf("node %d: uuid %q roster %q: the replay did not stop Provision before the ids", i, u, r)
		}
		snaps[i] = snap{u, r}
	}

	// The deployment is provisioned and used: tokens are issued.
	c := cl.newClient(t, redlock.WithNodeTimeout(time.Second))
	if err := c.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	var top uint64
	for range 8 {
		l, err := c.TryLock(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		top = max(top, l.Token())
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Nodes 1 and 2, a majority, come back from the snapshot.
	for i, s := range snaps {
		if err := cl.inspect[i].FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		cl.inspect[i].Set(ctx, "redlock:node-uuid", s.uuid, 0)
		cl.inspect[i].Set(ctx, "redlock:node-roster", s.roster, 0)
	}

	op := cl.newClient(t, redlock.WithNodeTimeout(time.Second))
	err = op.Provision(ctx)
	if !errors.Is(err, redlock.ErrAmnesia) {
		t.Errorf("Provision of a deployment whose majority was restored from a pre-id snapshot: %v, "+
			"want ErrAmnesia (a majority lost)", err)
	}
	if err != nil {
		return
	}
	// Node 0, the only node that kept its counter, is down: the restored
	// majority mints alone.
	if err := cl.nodes[0].Kill(ctx); err != nil {
		t.Fatal(err)
	}
	after := cl.newClient(t, redlock.WithNodeTimeout(time.Second))
	l, err := after.TryLock(ctx, "job")
	if err != nil {
		if !strings.Contains(err.Error(), "not intact") {
			t.Logf("lock on the restored majority: %v", err)
		}
		return
	}
	defer l.Unlock(ctx)
	if l.Token() <= top {
		t.Errorf("token %d on the restored majority after %d before: tokens went backwards", l.Token(), top)
	}
}

// Break 6 (availability): a deployment provisioned before rosters is
// refused for ever. docs/fencing.md, "What is not covered": "Nodes
// provisioned before the roster and replication id existed are trusted on
// first use: the first acquisition records the replication id they serve
// under." Such nodes hold an id marker and no roster. The check finds no
// roster and sends "" as the roster; fenced_acquire.lua and commit.lua
// compare it with GET of the roster key, which is false in Lua for a
// missing key, and false ~= "": every node answers -3 ("another
// roster"), which foreign() turns into errNotChecked, for ever. Provision
// and Repair cannot add a roster either (commonRoster: ErrNotProvisioned),
// so only Reprovision brings the deployment back.
//
// On 3c74a1e (every run):
//
//	review_test.go:530: a deployment provisioned before rosters takes no lock: redlock: lock "job": too few nodes answered [1 no reply, 2 failed of 3: node not counted: it did not show its identity at the node list check (a new check is under way) (nodes 0,2)] (ids [1 0 2] <nil>)
//
// Origin: the adversarial review of 3c74a1e (repair as a conditional transition, the node list check); fails on 3c74a1e.
func TestADeploymentProvisionedBeforeRostersStillTakesLocks(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	for _, c := range cl.inspect { // as provisioned before bfa7d52: a uuid and an id
		if err := c.Del(ctx, "redlock:node-roster", "redlock:node-replid").Err(); err != nil {
			t.Fatal(err)
		}
	}
	c := cl.newClient(t, redlock.WithTTL(2*time.Second), redlock.WithNodeTimeout(200*time.Millisecond))
	var err error
	for try := 0; try < 5; try++ {
		var l *redlock.Lock
		if l, err = c.TryLock(ctx, "job"); err == nil {
			l.Unlock(ctx)
			return
		}
		time.Sleep(150 * time.Millisecond) // past recheckEvery
	}
	ids, idErr := c.NodeIDs(ctx)
	t.Fatalf("a deployment provisioned before rosters takes no lock: %v (ids %v %v)", err, ids, idErr)
}

// Break 1b, the same root cause as break 1 through Provision: assignIDs
// gives an id to any node that holds the roster and its uuid but no id,
// without a delay or a counter raise, on the ground that "such a node never
// had an id: one that lost its data lost its uuid and roster with it". A
// node restored (through a restart, as docs/fencing.md prescribes) from a
// snapshot taken while it was being provisioned did have an id, was in
// commit majorities, and lost them. doctor says of it "holds the roster but
// no id (provisioning did not finish on it)" and advises `redlock
// provision`; Provision ("may be called again later: it converges")
// readmits it with the counter of the snapshot.
//
// N = 3. Provisioning is held before its id assignment on n2, and n2 is
// snapshotted then (uuid and roster, no id). A, its link to n1 cut, takes
// "x" for 10 s on {n0, n2}. n2 crashes and is restored from the snapshot.
// Provision runs again. B, invoked after A returned, its link to n0 cut, is
// granted "x" on {n1, n2} with a smaller token.
//
// On 3c74a1e (every run):
//
//	review_test.go:620: two holders and M1 broken: A holds "x" for 9.8s more with token 1280256; B, invoked after A returned, was granted "x" with token 258 (n2 readmitted by Provision, G "1") [worker 0 invoked at 121.374172ms and got token 258, but worker 0 had already got 1280256 at 5.679039ms]
//
// Origin: the adversarial review of 3c74a1e (repair as a conditional transition, the node list check); fails on 3c74a1e.
func TestProvisionDoesNotReadmitANodeRestoredFromAProvisioningSnapshot(t *testing.T) {
	cl := startFreshCluster(t, 3)
	ctx := context.Background()
	n2, ok := cl.nodes[2].(*node.Process)
	if !ok {
		t.Skip("needs a process node")
	}
	backup := filepath.Join(t.TempDir(), "dump.rdb")
	var once sync.Once
	links := []redis.UniversalClient{hooked(t, cl.nodes[0].Addr(), nil), hooked(t, cl.nodes[1].Addr(), nil),
		hooked(t, cl.nodes[2].Addr(), &faultHook{before: func(s string) error {
			if s == "assign" {
				once.Do(func() {
					if err := cl.inspect[2].Save(ctx).Err(); err != nil {
						t.Error(err)
					}
					copyFile(t, filepath.Join(n2.Dir(), "dump.rdb"), backup)
				})
			}
			return nil
		}})}
	p := newOn(t, links, redlock.WithTTL(time.Second), redlock.WithNodeTimeout(300*time.Millisecond))
	if err := p.Provision(ctx); err != nil {
		t.Fatalf("Provision: %v", err)
	}

	la, ops := highTokenHolderOnN0N2(ctx, t, cl)
	defer la.Unlock(ctx)

	restartFromSnapshot(ctx, t, n2, backup)
	// As doctor advises for a node that "holds the roster but no id".
	admin := newOn(t, []redis.UniversalClient{hooked(t, cl.nodes[0].Addr(), nil), hooked(t, cl.nodes[1].Addr(), nil),
		hooked(t, cl.nodes[2].Addr(), nil)}, redlock.WithTTL(time.Second), redlock.WithNodeTimeout(300*time.Millisecond))
	perr := admin.Provision(ctx)
	t.Logf("Provision after the restore: %v; n2 holds id %q, G %q", perr,
		cl.inspect[2].Get(ctx, "redlock:node-id").Val(), cl.inspect[2].Get(ctx, "redlock:fence:counter").Val())

	b := cl.actor(t, []*faultHook{cut(), nil, nil}, redlock.WithTTL(time.Second),
		redlock.WithNodeTimeout(200*time.Millisecond))
	invB := time.Now()
	lb, err := b.TryLock(ctx, "x")
	if err != nil {
		t.Logf("B: %v (held)", err)
		return
	}
	defer lb.Unlock(ctx)
	retB := time.Now()
	ops = append(ops, op{invB, retB, lb.Token()})
	bad := checkTokens(ops)
	if retB.Before(la.Until()) || len(bad) > 0 {
		t.Fatalf("two holders and M1 broken: A holds %q for %v more with token %d; B, invoked after A returned, "+
			"was granted %q with token %d (n2 readmitted by Provision, G %q) %v", "x",
			la.Until().Sub(retB).Round(100*time.Millisecond), la.Token(), "x", lb.Token(),
			cl.inspect[2].Get(ctx, "redlock:fence:counter").Val(), bad)
	}
}
