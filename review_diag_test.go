package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// failScript fails every call of one library script (by ScriptName): a
// provisioning step interrupted on every node.
type failScript string

func (failScript) DialHook(next redis.DialHook) redis.DialHook { return next }
func (failScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (f failScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if redlock.ScriptName(cmd.Args()) == string(f) {
			err := errors.New("interrupted")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

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
func TestReviewProvisionOfAMajorityRestoredFromAPreIDSnapshot(t *testing.T) {
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

// Review of issue 23, item 4 (adversarial): lock names are user input, and
// the key a WRONGTYPE names is parsed out of the node's message
// ('WRONGTYPE key <key> holds a <type>, not a string'). A name containing
// ", not a string" or " holds a " makes the error name another key (a
// prefix of the real one) and another type: wrongType cuts at the FIRST
// ", not a string". The type is one word the server chose, so parsing from
// the end (LastIndex) names the key exactly.
//
// On ce151f8:
//
//	review_diag_test.go:177: fenced true: WrongTypeError key "redlock:{a" type "b", want key "redlock:{a holds a b, not a string c}" type "list"
//	review_diag_test.go:177: fenced false: WrongTypeError key "redlock:{a" type "b", want key "redlock:{a holds a b, not a string c (unfenced)}" type "list"
func TestReviewWrongTypeErrorWithACraftedName(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	for _, fenced := range []bool{true, false} {
		name := "a holds a b, not a string c"
		var opts []redlock.Option
		if !fenced {
			name += " (unfenced)"
			opts = append(opts, redlock.WithoutFencing())
		}
		key := "redlock:{" + name + "}"
		for _, n := range cl.inspect {
			if err := n.RPush(ctx, key, "x").Err(); err != nil {
				t.Fatal(err)
			}
		}
		_, err := cl.newClient(t, opts...).TryLock(ctx, name)
		var wt *redlock.WrongTypeError
		for _, r := range quorumError(t, err).Nodes {
			if errors.As(r.Err, &wt) {
				break
			}
		}
		if wt == nil {
			t.Fatalf("fenced %v: TryLock on a list: %v, want a node's *WrongTypeError", fenced, err)
		}
		if wt.Key != key || wt.Type != "list" {
			t.Errorf("fenced %v: WrongTypeError key %q type %q, want key %q type %q", fenced, wt.Key, wt.Type, key, "list")
		}
	}
}

// beforeScript runs fn before every call of one library script on the
// client it hooks: a forced order between a provisioner's steps.
type beforeScript struct {
	name string
	fn   func()
}

func (beforeScript) DialHook(next redis.DialHook) redis.DialHook { return next }
func (beforeScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (b beforeScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if redlock.ScriptName(cmd.Args()) == b.name {
			b.fn()
		}
		return next(ctx, cmd)
	}
}

// Review of issue 23, item 4 (adversarial): Provision refuses a replica
// only in its first read. A node that becomes a replica of another member
// after the claims (REPLICAOF between the claim and the roster steps, forced
// here) holds that member's uuid, roster and, once replicated, its id:
// the roster and id scripts write nothing on it (it already holds what they
// would write), so Provision succeeds, and reports the copy's id as node
// 2's own: two nodes with one fencing id, one a replica. Every client then
// refuses the list. Provision's final read (provisionReport) judges nothing.
//
// On ce151f8:
//
//	review_diag_test.go:260: Provision with node 2 made a replica of node 0 during it: <nil> (ids [2 1 2]), want a *NodeListError naming node 2 a replica
func TestReviewProvisionWithANodeMadeAReplicaDuringIt(t *testing.T) {
	cl := startFreshCluster(t, 3)
	ctx := context.Background()
	waitKey := func(key string) {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if cl.inspect[2].Exists(ctx, key).Val() == 1 {
				return
			}
		}
		t.Errorf("node 2 never replicated %s", key)
	}
	var once bool
	roster := beforeScript{"roster", func() {
		if once {
			return
		}
		once = true
		if err := cl.inspect[2].SlaveOf(ctx, "127.0.0.1", port(t, cl.nodes[0].Addr())).Err(); err != nil {
			t.Error(err)
		}
		waitKey("redlock:node-roster")
	}}
	assign := beforeScript{"assign", func() { waitKey("redlock:node-id") }}
	var clients []redis.UniversalClient
	for i, n := range cl.nodes {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr()})
		if i == 2 {
			rc.AddHook(roster)
			rc.AddHook(assign)
		}
		clients = append(clients, rc)
		defer rc.Close()
	}
	c, err := redlock.New(clients, redlock.WithNodeTimeout(12*time.Second), redlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rep, err := c.ProvisionWithReport(ctx)
	var nle *redlock.NodeListError
	if !errors.As(err, &nle) || !strings.Contains(err.Error(), "node 2 is a replica") {
		var ids []int
		if rep != nil {
			ids = rep.IDs
		}
		t.Errorf("Provision with node 2 made a replica of node 0 during it: %v (ids %v), want a *NodeListError "+
			"naming node 2 a replica", err, ids)
	}
}
