package redlock

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/round"
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

func (e *NodeListError) Unwrap() error { return ErrWrongNodeList }

// nodeList holds the last check and runs the next.
type nodeList struct {
	view    atomic.Pointer[lease.View]
	mu      sync.Mutex
	running chan struct{} // closed when the check under way ends; nil: none
	last    time.Time     // when the last check began
	ended   time.Time     // when the last check ended
}

// checkedList returns the view this client's attempts count votes by,
// waiting for the first check if none ended yet.
func (c *Client) checkedList(ctx context.Context) (*lease.View, error) {
	if v := c.list.view.Load(); v != nil {
		return v, nil
	}
	running := c.checkList(true)
	select {
	case <-running:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if v := c.list.view.Load(); v != nil {
		return v, nil
	}
	return nil, ErrClosed
}

// attemptList is checkedList for an attempt on name: it fails as the
// attempt would, with a *QuorumError.
func (c *Client) attemptList(ctx context.Context, name string) (*lease.View, error) {
	list, err := c.checkedList(ctx)
	if err != nil {
		return nil, c.noVerdict(name, err)
	}
	if list.Err != nil || !slices.Contains(list.Seen, true) {
		// A verdict against the list may be stale (the operator fixed the
		// nodes), and a check that saw nobody tells nothing: check again,
		// unless one just ended, and go by that.
		if running := c.checkList(false); running != nil {
			select {
			case <-running:
			case <-ctx.Done():
				return nil, c.noVerdict(name, ctx.Err())
			}
			list = c.list.view.Load()
		}
	}
	if !slices.Contains(list.Seen, true) {
		// No node answered the check, which waited as long as an attempt
		// would: the attempt would find the same.
		kind := ErrUnavailable
		if list.Kind != nil {
			kind = list.Kind
		}
		return nil, &QuorumError{Op: "lock", Name: name, Kind: kind, Nodes: list.Nodes}
	}
	if list.Err != nil {
		return nil, &QuorumError{Op: "lock", Name: name, Kind: ErrWrongNodeList, Cause: list.Err}
	}
	return list, nil
}

// noVerdict is the error of an attempt on name whose ctx ended (err)
// while it waited for the check of the node list: too few nodes had
// answered the check to judge the list, and each node is reported as
// silent, or unreachable with its dial error. ErrClosed stays itself.
func (c *Client) noVerdict(name string, err error) error {
	if err == ErrClosed {
		return &QuorumError{Op: "lock", Name: name, Cause: err}
	}
	t := round.NewTally(len(c.nodes))
	t.CutShort(err, c.rounds.Unreachable)
	return &QuorumError{Op: "lock", Name: name, Kind: ErrUnavailable, Cause: err, Nodes: t.Results}
}

// refreshList runs a check of the node list that begins after it is
// called, and waits for it: after Provision and Repair, which change what
// the nodes show.
func (c *Client) refreshList(ctx context.Context) {
	since := time.Now()
	for range 2 {
		running := c.checkList(true)
		select {
		case <-running:
		case <-ctx.Done():
			return
		}
		c.list.mu.Lock()
		fresh := !c.list.last.Before(since)
		c.list.mu.Unlock()
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
func (c *Client) checkList(now bool) <-chan struct{} {
	c.list.mu.Lock()
	defer c.list.mu.Unlock()
	if c.list.running != nil {
		return c.list.running
	}
	if !now && (time.Since(c.list.last) < recheckEvery || time.Since(c.list.ended) < recheckEvery) {
		return nil
	}
	done := make(chan struct{})
	first := c.list.view.Load() == nil
	started := c.rounds.Go(func() {
		ctx, cancel := context.WithTimeout(c.rounds.Life(), c.cfg.patience()+c.cfg.nodeTimeout)
		defer cancel()
		if v := c.readList(ctx, first); v != nil {
			c.list.view.Store(v)
		} else if c.list.view.Load() == nil && c.rounds.Life().Err() == nil {
			c.list.view.Store(judgeList(make([]*nodeState, len(c.nodes)), len(c.nodes))) // nobody answered
		}
		c.list.mu.Lock()
		c.list.running, c.list.ended = nil, time.Now()
		c.list.mu.Unlock()
		close(done)
	})
	if !started {
		close(done)
		return done
	}
	// The check cannot end before these are set: it takes c.list.mu.
	c.list.running, c.list.last = done, time.Now()
	return done
}

// readList reads every node and judges the list; nil if the client closed
// or ctx ended first.
func (c *Client) readList(ctx context.Context, first bool) *lease.View {
	// The first attempt waits for the check, so the check waits no longer
	// than it must: a grace once a majority answered; a node timeout once
	// any node did (a majority paused, say: the attempt then waits for
	// them itself, and should not wait twice); and, while no node has
	// answered, up to the round's patience (a saturated machine answers
	// late, and a check that saw nobody would fail the attempts after it).
	// A node silent then is checked at its first reply (lease.View).
	// A later check runs in the background, and nobody waits for it: it
	// waits the node timeout for every node, so that a node a little
	// farther than the others is seen (a grace would miss it at every
	// check, and its replies would start one after another).
	end := time.Now().Add(c.cfg.nodeTimeout)
	soon := func(t *round.Tally) (time.Time, bool) {
		if first && t.Answered >= t.Majority {
			return t.LastReply.Add(c.rounds.Grace(t)), true
		}
		return end, t.Answered > 0
	}
	if c.cfg.fencing {
		states, t, err := c.readStatesUntil(ctx, soon)
		if err != nil {
			return nil
		}
		c.remember(states)
		v := judgeList(states, len(c.nodes))
		v.Nodes, v.Kind = t.Snapshot(), lease.BlockingKind(t)
		return v
	}
	states := make([]*nodeState, len(c.nodes))
	out := make([]string, len(c.nodes))
	t, err := c.onNodesUntil(ctx, func(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error) {
		info, err := node.Info(ctx, "server").Result()
		out[i] = infoField(info, "run_id")
		return outcomeOf(err)
	}, soon)
	if err != nil {
		return nil
	}
	for i, r := range t.Results {
		if r.Outcome == NodeGranted {
			states[i] = &nodeState{runID: out[i], id: -1}
		}
	}
	v := judgeList(states, len(c.nodes))
	v.Nodes, v.Kind = t.Snapshot(), lease.BlockingKind(t)
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
