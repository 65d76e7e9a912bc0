package redlock

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/lease"
	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/quorumlock/redlock/internal/verdict"
	"github.com/redis/go-redis/v9"
)

// LockInfo is what Inspect saw of a lock name: a snapshot, for dashboards
// and runbooks.
type LockInfo struct {
	Name string
	// Held: one value (one acquisition) is on a majority of the nodes
	// (N/2+1 of all of them, as a lock needs).
	Held bool
	// Holder is the value held on that majority: the holder's id
	// (one per acquisition). "" when not held.
	Holder string
	// Remaining is how long a majority of the nodes will still hold that
	// value by their TTLs, conservatively: the majority-th longest of
	// their remaining TTLs, less the time Inspect took and the drift
	// allowance (remaining × drift factor + 2ms). 0 when not held. The
	// holder may extend it, or unlock sooner. It is the nodes' view, not
	// the holder's: the holder's own validity (Lock.Until) subtracts the
	// drift of its whole TTL and may end earlier, by up to the drift
	// factor times the time since its last acquisition or extension.
	Remaining time.Duration
	// Token is the highest fencing token committed for the name on the
	// nodes that hold the lock: the holder's token once its acquisition
	// has committed it (between its two rounds it is the previous
	// holder's). 0 when not held, or with fencing off.
	Token uint64
	// Nodes is what each node answered, in the order given to New.
	Nodes []NodeLock
}

// NodeLock is what one node holds of a lock name.
type NodeLock struct {
	Node int
	// Err is why the node gave no answer (a timeout is ErrNodeTimeout);
	// nil when it answered, and then the fields below are its answer.
	Err error
	// Holder is the lock's value on the node: random, one per acquisition,
	// the same on every node for one lock. "" when the node holds none.
	Holder string
	// TTL is how long the node will still hold it: 0 when it holds none.
	TTL time.Duration
	// Token is the highest token the node records as committed for the
	// name (its H), held or not; 0 for none or with fencing off.
	Token uint64
	// Latency is the node's round trip.
	Latency time.Duration
}

// Inspect reads, on every node, what it holds of the lock called name,
// and tells whether the name is held, for how much longer, and under which
// token. It writes nothing, takes no lock and joins no queue: it is for
// dashboards, runbooks and `redlock doctor`-like tools, not for deciding
// to touch the protected resource. It reads the mutex of that name (Lock,
// TryLock, Do, and a multi-lock's members): a read-write lock, a semaphore
// and several names at once have their own (RWMutex.Inspect,
// Semaphore.Inspect, InspectMulti), since their keys are not a mutex's.
//
// It is a snapshot of replies that arrived over a round trip, and may be
// stale the moment it returns: the holder may unlock, extend, or lose the
// lock at once, and another client may take it. Held means a majority
// held one value when asked, not that the holder still runs or that its
// lock is valid on its own clock. Inspect does not check the nodes'
// fencing identities or the node list (see Client.Provision and
// `redlock doctor`): an emptied node answers that it holds nothing.
//
// It waits for every node, giving up on silent ones as a lock attempt
// does (about the node timeout once a majority has answered). With fewer
// than a majority of answers it returns the LockInfo with what it has
// (Held false) and a *QuorumError (Op "inspect") of Kind ErrUnavailable,
// whose Nodes count an answer as NodeGranted; with ErrWrongType where a
// node holds another type under the lock key. If ctx ends first the error
// also matches ctx's error. A bad name is refused as TryLock refuses it.
func (c *Client) Inspect(ctx context.Context, name string) (LockInfo, error) {
	info := LockInfo{Name: name}
	if err := validateName(name); err != nil {
		return info, err
	}
	key := c.lockKey(name)
	keys := []any{key}
	if c.cfg.fencing {
		keys = append(keys, lease.HighKey(key))
	}
	r, err := inspectRound(ctx, c, name, nodescript.NewCall(nodescript.Inspect, keys), parseInspect)
	if r == nil {
		return info, err
	}
	info.Nodes = make([]NodeLock, len(c.nodes))
	for i, a := range r.answers {
		a.Node, a.Err, a.Latency = i, r.errs[i], r.latency[i]
		info.Nodes[i] = a
	}
	if err != nil {
		return info, err
	}
	info.judge(r.majority, r.elapsed, c.cfg.driftOf)
	return info, nil
}

// inspected is what one Inspect round gathered: each node's parsed answer
// (the zero T where it gave none), its error (nil where it answered; a
// silent node's is ErrNodeTimeout) and round trip.
type inspected[T any] struct {
	answers  []T
	errs     []error
	latency  []time.Duration
	elapsed  time.Duration
	majority int
}

// inspectRound runs call on every node, as Inspect describes: it waits for
// every node, giving up on silent ones as a lock attempt does. With fewer
// than a majority of answers it returns what it has and a *QuorumError (Op
// "inspect", Kind ErrUnavailable, or ErrWrongType where a node holds
// another type under a key); nil and the error if nothing was sent.
func inspectRound[T any](ctx context.Context, c *Client, name string, call *nodescript.Call, parse func(*redis.Cmd) (T, error)) (*inspected[T], error) {
	var mu sync.Mutex
	answers := make([]T, len(c.nodes))
	op := func(ctx context.Context, i int, node redis.UniversalClient) (Outcome, int64, error) {
		a, err := parse(call.Run(ctx, node))
		if err != nil {
			return NodeFailed, 0, err
		}
		mu.Lock()
		answers[i] = a
		mu.Unlock()
		return NodeGranted, 0, nil
	}
	start := c.cfg.clock.Now()
	t, err := c.rounds.Run(ctx, round.Spec{Name: "inspect", Op: op}, nil, nil)
	if t == nil {
		return nil, err
	}
	r := &inspected[T]{
		errs:     make([]error, len(c.nodes)),
		latency:  make([]time.Duration, len(c.nodes)),
		elapsed:  c.cfg.clock.Now().Sub(start),
		majority: t.Majority,
	}
	// A late answer may still land in answers: copy what the round heard.
	r.answers = make([]T, len(c.nodes))
	mu.Lock()
	defer mu.Unlock()
	for i, res := range t.Results {
		r.latency[i] = res.Latency
		switch {
		case res.Outcome == NodeGranted:
			r.answers[i] = answers[i]
		case res.Err == nil:
			r.errs[i] = ErrNodeTimeout
		default:
			r.errs[i] = res.Err
		}
	}
	if err != nil || !t.Won() {
		qe := &QuorumError{Op: "inspect", Name: name, Kind: ErrUnavailable, Cause: err, Nodes: t.Snapshot()}
		switch kind := verdict.BlockingKind(t); {
		case wrongTypeBlocks(t):
			qe.Kind = ErrWrongType // no majority can answer until the key is fixed
		case kind != nil:
			qe.Kind = kind
		}
		return r, qe
	}
	return r, nil
}

// judge fills in Held, Remaining and Token from the nodes' answers.
func (info *LockInfo) judge(majority int, elapsed time.Duration, driftOf func(time.Duration) time.Duration) {
	count := map[string]int{}
	for _, n := range info.Nodes {
		if n.Err == nil && n.Holder != "" {
			count[n.Holder]++
		}
	}
	for holder, k := range count {
		if k < majority {
			continue
		}
		var ttls []time.Duration
		for _, n := range info.Nodes {
			if n.Err == nil && n.Holder == holder {
				ttls = append(ttls, n.TTL)
				info.Token = max(info.Token, n.Token)
			}
		}
		slices.Sort(ttls)
		// The majority-th longest: that many nodes hold it at least so long.
		agreed := ttls[len(ttls)-majority]
		info.Held, info.Holder = true, holder
		info.Remaining = max(agreed-elapsed-driftOf(agreed), 0)
		return
	}
}

// parseInspect reads nodescript.Inspect's reply.
func parseInspect(cmd *redis.Cmd) (NodeLock, error) {
	v, err := cmd.Slice()
	if err != nil {
		return NodeLock{}, wrongTypeOf(err)
	}
	if len(v) != 3 {
		return NodeLock{}, fmt.Errorf("redlock: unexpected reply %v", v)
	}
	holder, _ := v[0].(string)
	pttl, _ := v[1].(int64)
	token, _ := strconv.ParseUint(fmt.Sprint(v[2]), 10, 64)
	n := NodeLock{Holder: holder, Token: token}
	if holder != "" && pttl > 0 {
		n.TTL = time.Duration(pttl) * time.Millisecond
	}
	return n, nil
}

// MarshalJSON writes Err as its message (an error value has no JSON of
// its own), for dashboards and `redlock inspect --json`.
func (n NodeLock) MarshalJSON() ([]byte, error) {
	type plain NodeLock
	return json.Marshal(struct {
		plain
		Err string `json:",omitempty"`
	}{plain(n), errText(n.Err)})
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// wrongTypeBlocks reports whether so many nodes failed with ErrWrongType
// that no majority can answer until the key is fixed.
func wrongTypeBlocks(t *round.Tally) bool {
	wrong := 0
	for _, r := range t.Results {
		if errors.Is(r.Err, ErrWrongType) {
			wrong++
		}
	}
	return t.N-wrong < t.Majority
}
