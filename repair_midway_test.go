package redlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/node"
	"github.com/redis/go-redis/v9"
)

// hooked returns a go-redis client for addr with hook h (nil: none), closed
// at the end of the test.
func hooked(t *testing.T, addr string, h *faultHook) redis.UniversalClient {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	if h != nil {
		rc.AddHook(h)
	}
	t.Cleanup(func() { rc.Close() })
	return rc
}

func newOn(t *testing.T, clients []redis.UniversalClient, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	c, err := redlock.New(clients, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Found by an adversarial review (fixed: the effective H is max(H, E*256)):
// the repair-floor trap of TestRepairFloorAbortsTheIntersectionTrap,
// with n1 not wiped but replaced by its promoted replica (the failover that
// revision 2 treats as amnesia). The replica still holds an OLD H for the
// name (it missed A's commit). Repair sets E above t_A, but commit.lua uses E
// only where H is absent: the stale H (< t_B) lets B commit t_B < t_A although
// A committed and unlocked before B was granted (M2 broken).
func TestRepairFloorBoundsAStaleHOnAPromotedReplica(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startFreshCluster(t, 3)
	ctx := context.Background()
	replica, rc := cl.startReplica(t, 1)
	opts := []redlock.Option{redlock.WithTTL(30 * time.Second), redlock.WithNodeTimeout(10 * time.Second)}
	// Provisioned after the replica attached (attaching the first replica
	// changes the master's replication id).
	if err := cl.newClient(t, opts...).Provision(ctx); err != nil {
		t.Fatal(err)
	}
	waitReplicated(t, cl.inspect[1], rc)
	cl.withCounter(t, 1, 1000)

	// P: an earlier holder of the name, committed on n0, n1 (and n1's replica).
	p := cl.actor(t, []*faultHook{nil, nil, cut()}, opts...)
	lp, err := p.TryLock(ctx, "trap")
	if err != nil {
		t.Fatal(err)
	}
	lp.Unlock(ctx)
	if n, err := cl.inspect[1].Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT: %d %v", n, err)
	}
	if h, _ := rc.Get(ctx, "redlock:{trap}:fence:high").Result(); h == "" {
		t.Fatal("replica has no H")
	}
	if err := replica.Pause(ctx); err != nil { // the replica falls behind
		t.Fatal(err)
	}
	// and its link drops (the master keeps nothing in flight for it).
	if err := cl.inspect[1].Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		t.Fatal(err)
	}

	bReachedN0 := make(chan struct{})
	releaseN2 := make(chan struct{})
	var once sync.Once
	b := newOn(t, []redis.UniversalClient{
		hooked(t, cl.nodes[0].Addr(), &faultHook{before: func(s string) error {
			if s == "commit" {
				return errLinkCut
			}
			return nil
		}, after: func(s string) {
			if s == "acquire" {
				once.Do(func() { close(bReachedN0) })
			}
		}}),
		hooked(t, replica.Addr(), cutScript("acquire")), // B's node 1 is where n1's replica will serve
		hooked(t, cl.nodes[2].Addr(), &faultHook{before: func(s string) error {
			if s == "acquire" {
				<-releaseN2
			}
			return nil
		}}),
	}, opts...)
	a := cl.actor(t, []*faultHook{nil, nil, cutScript("commit")}, opts...)

	bDone := tryLockAsync(ctx, b, "trap")
	<-bReachedN0
	la, err := a.TryLock(ctx, "trap")
	if err != nil {
		close(releaseN2)
		replica.Resume(ctx)
		t.Fatalf("A: %v", err)
	}
	la.Unlock(ctx)
	// n1 dies; its replica is promoted and repaired in its place.
	if err := cl.nodes[1].Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := replica.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rc.ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	admin := newOn(t, []redis.UniversalClient{hooked(t, cl.nodes[0].Addr(), nil), hooked(t, replica.Addr(), nil),
		hooked(t, cl.nodes[2].Addr(), nil)}, opts...)
	if err := admin.Repair(ctx, 1, redlock.RepairWithoutDelay()); err != nil {
		close(releaseN2)
		t.Fatal(err)
	}
	e, _ := rc.Get(ctx, "redlock:fence:floor").Result()
	h, _ := rc.Get(ctx, "redlock:{trap}:fence:high").Result()
	t.Logf("P %d, A %d; repaired replica: E=%s (x256), stale H=%s", lp.Token(), la.Token(), e, h)
	close(releaseN2)
	rb := <-bDone
	if rb.err == nil {
		defer rb.l.Unlock(ctx)
		if rb.l.Token() < la.Token() {
			t.Fatalf("M2 broken: A committed %d and unlocked before B was granted; B got %d", la.Token(), rb.l.Token())
		}
	}
	if !errors.Is(rb.err, redlock.ErrSuperseded) {
		t.Fatalf("B: %v, want ErrSuperseded", rb.err)
	}
}

// argHook runs f on every command of one go-redis client, before it is sent;
// an error fails the command unsent.
type argHook struct{ f func(args []any) error }

func (h argHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h argHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h argHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := h.f(cmd.Args()); err != nil {
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func runID(t *testing.T, c redis.UniversalClient) string {
	t.Helper()
	s, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(s, "run_id:")
	id, _, _ := strings.Cut(after, "\r\n")
	return id
}

// Found by an adversarial review (fixed: such a node counts as emptied and
// takes a free orphan):
// two repairers of two emptied nodes; X's claim lands after Y's
// check, and X's give-back fails (one dropped write; a crash of X between
// claim and check does the same). Node a is left holding, without an id, the
// uuid that Y's repair gave node b: every later Repair(a) fails with
// ErrNodeIDConflict, for ever. The roster's other orphan is never taken.
func TestAClaimNeverGivenBackDoesNotWedgeTheNode(t *testing.T) {
	cl := startCluster(t, 5)
	ctx := context.Background()
	uuids := make([]string, 5)
	for i, c := range cl.inspect {
		uuids[i] = c.Get(ctx, "redlock:node-uuid").Val()
	}
	// a, b: a's uuid sorts first, so it is orphans[0] when both are empty.
	a, b := 1, 2
	if uuids[b] < uuids[a] {
		a, b = b, a
	}
	opts := []redlock.Option{redlock.WithTTL(5 * time.Second), redlock.WithNodeTimeout(time.Second)}
	// a's new run id in the upper half, so that one for b below it comes
	// soon (run ids are random hex).
	for try := 0; ; try++ {
		cl.restartEmpty(t, a)
		if runID(t, cl.inspect[a]) >= "8" {
			break
		}
		if try == 30 {
			t.Fatal("a's run id never sorted as needed")
		}
	}

	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	xLinks := make([]redis.UniversalClient, 5)
	for i := range xLinks {
		xLinks[i] = hooked(t, cl.nodes[i].Addr(), nil)
	}
	xLinks[a].AddHook(argHook{f: func(args []any) error {
		if redlock.ScriptName(args) != "swap-uuid" {
			return nil
		}
		if args[len(args)-1] == "" {
			return errLinkCut // the give-back is lost
		}
		once.Do(func() { close(reached); <-release })
		return nil
	}})
	x := newOn(t, xLinks, opts...)
	xDone := make(chan error, 1)
	go func() { xDone <- x.Repair(ctx, a, redlock.RepairWithoutDelay(), redlock.RepairAdopting()) }()
	select { // X read only a emptied and picked uuids[a]; its claim waits
	case <-reached:
	case err := <-xDone:
		t.Fatalf("X returned before its claim: %v", err)
	}

	// b is emptied; its new run id must sort before a's so that b's rank is 0.
	for try := 0; ; try++ {
		cl.restartEmpty(t, b)
		if runID(t, cl.inspect[b]) < runID(t, cl.inspect[a]) {
			break
		}
		if try == 30 {
			close(release)
			t.Fatal("run ids never sorted as needed")
		}
	}
	y := cl.newClient(t, opts...)
	if err := y.Repair(ctx, b, redlock.RepairWithoutDelay(), redlock.RepairAdopting()); err != nil {
		close(release)
		t.Fatalf("Y: %v", err)
	}
	close(release)
	t.Logf("X: %v", <-xDone)
	t.Logf("a=%d holds %q id %q; b=%d holds %q id %q", a, cl.inspect[a].Get(ctx, "redlock:node-uuid").Val(),
		cl.inspect[a].Get(ctx, "redlock:node-id").Val(), b, cl.inspect[b].Get(ctx, "redlock:node-uuid").Val(),
		cl.inspect[b].Get(ctx, "redlock:node-id").Val())
	var last error
	for range 3 {
		if last = y.Repair(ctx, a, redlock.RepairWithoutDelay(), redlock.RepairAdopting()); last == nil {
			break
		}
	}
	if last != nil {
		t.Fatalf("node %d can never be repaired: %v", a, last)
	}
	ids, err := y.NodeIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ids %v", ids)
}

// Found by an adversarial review (fixed: the stamp names its replication
// id, and a stamp of another episode dates nothing):
// a lost stamp from an earlier episode survives on a replica
// that missed the repair's DEL; when it is promoted, Repair measures the
// delayed restart from the OLD stamp and repairs at once, while a lock
// granted on the dead master still lasts: two holders within validity.
// Episode 1 is simply attaching the replica (that changes the master's
// replication id, so the master is stamped and must be repaired).
func TestALostStampFromAnEarlierEpisodeDoesNotShortenTheDelay(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 3)
	ctx := context.Background()
	const ttl = 2 * time.Second
	opts := []redlock.Option{redlock.WithTTL(ttl), redlock.WithNodeTimeout(200 * time.Millisecond)}
	replica, rc := cl.startReplica(t, 0)
	waitReplicated(t, cl.inspect[0], rc)
	// Episode 1: n0 serves under a new replication id; the first fenced call stamps it.
	touch := cl.actor(t, nil, opts...)
	if l, err := touch.TryLock(ctx, "touch"); err == nil {
		l.Unlock(ctx)
	}
	stamp := cl.inspect[0].Get(ctx, "redlock:node-lost").Val()
	if stamp == "" {
		t.Fatal("n0 was not stamped")
	}
	if n, err := cl.inspect[0].Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT: %d %v", n, err)
	}
	// The replica falls behind, and n0 is repaired.
	if err := replica.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.inspect[0].Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		t.Fatal(err)
	}
	if err := cl.newClient(t, opts...).Repair(ctx, 0, redlock.RepairWithoutDelay()); err != nil {
		replica.Resume(ctx)
		t.Fatal(err)
	}
	time.Sleep(ttl + 500*time.Millisecond)
	// A holds the lock on n0, n1.
	a := cl.actor(t, []*faultHook{nil, nil, cut()}, opts...)
	la, err := a.TryLock(ctx, "x")
	if err != nil {
		replica.Resume(ctx)
		t.Fatal(err)
	}
	defer la.Unlock(ctx)
	// n0 dies; its replica is promoted.
	if err := cl.nodes[0].Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := replica.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rc.ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("replica's stamp %q (episode 1 stamp %s)", rc.Get(ctx, "redlock:node-lost").Val(), stamp)
	admin := newOn(t, []redis.UniversalClient{hooked(t, replica.Addr(), nil), hooked(t, cl.nodes[1].Addr(), nil),
		hooked(t, cl.nodes[2].Addr(), nil)}, opts...)
	err = admin.Repair(ctx, 0)
	t.Logf("Repair right after the promotion: %v", err)
	b := newOn(t, []redis.UniversalClient{hooked(t, replica.Addr(), nil), hooked(t, cl.nodes[1].Addr(), cut()),
		hooked(t, cl.nodes[2].Addr(), nil)}, opts...)
	if lb, err := b.TryLock(ctx, "x"); err == nil {
		defer lb.Unlock(ctx)
		if time.Now().Before(la.Until()) {
			t.Fatalf("two holders: A until %v, B granted now (%v) through the promoted replica", la.Until().Format(time.StampMilli), time.Now().Format(time.StampMilli))
		}
	}
	if !errors.Is(err, redlock.ErrRepairTooSoon) {
		t.Fatalf("Repair right after the promotion: %v, want ErrRepairTooSoon", err)
	}
}

// Found by an adversarial review (fixed: an online repair gives a node back
// only the uuid this client saw it hold):
// a client configured with a different node list (n2 swapped
// for a fresh n3, say during a migration, while n2 still serves others)
// repairs n3 online and gives it n2's uuid and id: two live nodes with one
// id, which U rests on.
func TestAClientWithAnotherNodeListCannotStealAnID(t *testing.T) {
	t.Parallel() // its own nodes, waiting on real leases (docs/tests.md)
	cl := startCluster(t, 3)
	ctx := context.Background()
	n3, err := node.StartProcess(ctx, node.Config{Name: "n3"})
	if err != nil {
		t.Fatal(err)
	}
	defer n3.Close()
	opts := []redlock.Option{redlock.WithTTL(300 * time.Millisecond), redlock.WithNodeTimeout(50 * time.Millisecond)}
	b := newOn(t, []redis.UniversalClient{hooked(t, cl.nodes[0].Addr(), nil), hooked(t, cl.nodes[1].Addr(), nil),
		hooked(t, n3.Addr(), nil)}, opts...)
	n3c := n3.NewClient()
	defer n3c.Close()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if l, err := b.TryLock(ctx, "x"); err == nil {
			l.Unlock(ctx)
		}
		if n3c.Get(ctx, "redlock:node-id").Val() != "" {
			break
		}
	}
	id2, id3 := cl.inspect[2].Get(ctx, "redlock:node-id").Val(), n3c.Get(ctx, "redlock:node-id").Val()
	u2, u3 := cl.inspect[2].Get(ctx, "redlock:node-uuid").Val(), n3c.Get(ctx, "redlock:node-uuid").Val()
	t.Logf("n2: id %q uuid %s; n3: id %q uuid %s", id2, u2, id3, u3)
	if id3 != "" && id3 == id2 {
		t.Fatalf("two live nodes hold id %s (uuid %s)", id3, u3)
	}
}
