package identity

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/quorumlock/redlock/internal/verdict"
	"github.com/redis/go-redis/v9"
)

// The node list is part of the deployment's identity (docs/fencing.md,
// "The node list"). Before its first attempt counts any vote, a client
// reads every node (the fencing identity, which it needs anyway, or the
// server's run_id without fencing) and checks that its list is the
// deployment's: no server listed twice and, with fencing, one roster, as
// many nodes as the roster has members, and no member held by two nodes. A
// list that fails gets a *NodeListError on every attempt, which names the
// nodes and what to fix.
//
// A node counts only with the identity it showed at the check: each fenced
// acquisition sends the roster, a node holding another refuses without
// touching anything, and a node answering with an id other than the one it
// showed (another server now behind its address) is not counted. A node
// that did not answer the check, or was not intact then, does not count
// until a new check, which its first reply starts in the background.

// NodeListError says why a client's node list is not the deployment's.
// It matches ErrWrongNodeList.
type NodeListError struct {
	Problems []string // one sentence each: which nodes, and what to fix
}

func (e *NodeListError) Error() string {
	return "redlock: wrong node list: " + strings.Join(e.Problems, "; ")
}

func (e *NodeListError) Unwrap() error { return kind.ErrWrongNodeList }

// nodeList holds the last check and runs the next.
type nodeList struct {
	view    atomic.Pointer[View]
	mu      sync.Mutex
	running chan struct{} // closed when the check under way ends; nil: none
	last    time.Time     // when the last check began
	ended   time.Time     // when the last check ended
}

// checkedList returns the view this client's attempts count votes by,
// waiting for the first check if none ended yet.
func (d *Deployment) checkedList(ctx context.Context) (*View, error) {
	if v := d.list.view.Load(); v != nil {
		return v, nil
	}
	running := d.checkList(true)
	select {
	case <-running:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if v := d.list.view.Load(); v != nil {
		return v, nil
	}
	return nil, round.ErrClosed
}

// AttemptList returns the view an attempt on name counts votes by,
// waiting for the first check of the node list if none ended yet: it fails
// as the attempt would, with a *QuorumError (Config.QuorumError).
func (d *Deployment) AttemptList(ctx context.Context, name string) (*View, error) {
	list, err := d.checkedList(ctx)
	if err != nil {
		return nil, d.noVerdict(name, err)
	}
	if list.Err != nil || !slices.Contains(list.Seen, true) {
		// A verdict against the list may be stale (the operator fixed the
		// nodes), and a check that saw nobody tells nothing: check again,
		// unless one just ended, and go by that.
		if running := d.checkList(false); running != nil {
			select {
			case <-running:
			case <-ctx.Done():
				return nil, d.noVerdict(name, ctx.Err())
			}
			list = d.list.view.Load()
		}
	}
	if !slices.Contains(list.Seen, true) {
		// No node answered the check, which waited as long as an attempt
		// would: the attempt would find the same.
		blocking := kind.ErrUnavailable
		if list.Kind != nil {
			blocking = list.Kind
		}
		return nil, d.quorumError(&verdict.Failure{Op: "lock", Name: name, Kind: blocking, Nodes: list.Nodes})
	}
	if list.Err != nil {
		return nil, d.quorumError(&verdict.Failure{Op: "lock", Name: name, Kind: kind.ErrWrongNodeList, Cause: list.Err})
	}
	return list, nil
}

// noVerdict is the error of an attempt on name whose ctx ended (err)
// while it waited for the check of the node list: too few nodes had
// answered the check to judge the list, and each node is reported as
// silent, or unreachable with its dial error. ErrClosed stays itself.
func (d *Deployment) noVerdict(name string, err error) error {
	if err == round.ErrClosed {
		return d.quorumError(&verdict.Failure{Op: "lock", Name: name, Cause: err})
	}
	t := round.NewTally(len(d.nodes))
	t.CutShort(err, d.rounds.Unreachable, 0)
	return d.quorumError(&verdict.Failure{Op: "lock", Name: name, Kind: kind.ErrUnavailable, Cause: err, Nodes: t.Results})
}

// refreshList runs a check of the node list that begins after it is
// called, and waits for it: after Provision and Repair, which change what
// the nodes show.
func (d *Deployment) refreshList(ctx context.Context) {
	since := time.Now()
	for range 2 {
		running := d.checkList(true)
		select {
		case <-running:
		case <-ctx.Done():
			return
		}
		d.list.mu.Lock()
		fresh := !d.list.last.Before(since)
		d.list.mu.Unlock()
		if fresh {
			return
		}
	}
}

// recheckEvery bounds how often replies start a new check.
const recheckEvery = 100 * time.Millisecond

// checkList starts a check of the node list in the background unless one
// runs, or (unless now) one began less than recheckEvery ago, and returns a
// channel closed when the check under way ends (nil if none started).
func (d *Deployment) checkList(now bool) <-chan struct{} {
	d.list.mu.Lock()
	defer d.list.mu.Unlock()
	if d.list.running != nil {
		return d.list.running
	}
	if !now && (time.Since(d.list.last) < recheckEvery || time.Since(d.list.ended) < recheckEvery) {
		return nil
	}
	done := make(chan struct{})
	first := d.list.view.Load() == nil
	started := d.rounds.Go(func() {
		ctx, cancel := context.WithTimeout(d.rounds.Life(), d.cfg.Patience+d.cfg.NodeTimeout)
		defer cancel()
		if v := d.readList(ctx, first); v != nil {
			d.list.view.Store(v)
		} else if d.list.view.Load() == nil && d.rounds.Life().Err() == nil {
			d.list.view.Store(judgeList(make([]*nodeState, len(d.nodes)), len(d.nodes))) // nobody answered
		}
		d.list.mu.Lock()
		d.list.running, d.list.ended = nil, time.Now()
		d.list.mu.Unlock()
		close(done)
	})
	if !started {
		close(done)
		return done
	}
	// The check cannot end before these are set: it takes d.list.mu.
	d.list.running, d.list.last = done, time.Now()
	return done
}

// readList reads every node and judges the list; nil if the client closed
// or ctx ended first.
func (d *Deployment) readList(ctx context.Context, first bool) *View {
	// The first attempt waits for the check, so the check waits no longer
	// than it must: a grace once a majority answered; a node timeout once
	// any node did (a majority paused, say: the attempt then waits for
	// them itself, and should not wait twice); and, while no node has
	// answered, up to the round's patience (a saturated machine answers
	// late, and a check that saw nobody would fail the attempts after it).
	// A node silent then is checked at its first reply (View).
	// A later check runs in the background, and nobody waits for it: it
	// waits the node timeout for every node, so that a node a little
	// farther than the others is seen (a grace would miss it at every
	// check, and its replies would start one after another).
	end := time.Now().Add(d.cfg.NodeTimeout)
	soon := func(t *round.Tally) (time.Time, bool) {
		if first && t.Answered >= t.Majority {
			return t.LastReply.Add(d.rounds.Grace(t)), true
		}
		return end, t.Answered > 0
	}
	if d.cfg.Fencing {
		states, t, err := d.readStatesUntil(ctx, soon)
		if err != nil {
			return nil
		}
		d.remember(states)
		v := judgeList(states, len(d.nodes))
		v.Nodes, v.Kind = t.Snapshot(), verdict.BlockingKind(t)
		return v
	}
	states := make([]*nodeState, len(d.nodes))
	out := make([]string, len(d.nodes))
	t, err := d.onNodesUntil(ctx, func(ctx context.Context, i int, node redis.UniversalClient) (round.Outcome, int64, error) {
		info, err := node.Info(ctx, "server").Result()
		out[i] = infoField(info, "run_id")
		return outcomeOf(err)
	}, soon)
	if err != nil {
		return nil
	}
	for i, r := range t.Results {
		if r.Outcome == round.NodeGranted {
			states[i] = &nodeState{runID: out[i], id: -1}
		}
	}
	v := judgeList(states, len(d.nodes))
	v.Nodes, v.Kind = t.Snapshot(), verdict.BlockingKind(t)
	return v
}

// infoField returns field's value in an INFO reply.
func infoField(info, field string) string {
	_, v, ok := strings.Cut(info, "\n"+field+":")
	if !ok {
		return ""
	}
	v, _, _ = strings.Cut(v, "\n")
	return strings.TrimSpace(v)
}
