package identity

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/redlock/internal/kind"
	"github.com/quorumlock/redlock/internal/verdict"

	"github.com/quorumlock/redlock/internal/nodescript"
	"github.com/quorumlock/redlock/internal/round"
	"github.com/redis/go-redis/v9"
)

// Node identity (docs/fencing.md, "Node identity"). Every node holds a
// uuid, claimed once; the roster, the sorted uuids of every node, recorded on
// every node; and its id, the rank of its uuid in the roster. Ids are
// written only to nodes that hold the same roster, so two provisioners that
// saw different nodes (one lost its data in between) cannot both write
// them, and ids are unique by construction.
//
// Provisioning is explicit (Provision, `redlock provision`): a deployment
// whose nodes all lost their data looks exactly like a new one, and
// provisioning it again would restart the tokens without a word. A fenced
// acquisition on nodes that hold no identity fails with ErrNotProvisioned.

// nodeState is what one node holds of its fencing identity and counters.
type nodeState struct {
	uuid, roster string
	id           int // -1: none
	replid       string
	curReplid    string // the replication id the node serves under now
	stamp        string // the lost stamp of this episode, as stored; "": none
	rawID        string // the id marker as stored ("": none), for the writes conditional on it
	rawStamp     string // the lost stamp as stored, of any episode ("": none)
	lostAt       int64  // node ms when first found not intact in this episode; 0: never
	now          int64  // node ms
	counter      int64  // G
	maxTTL       time.Duration
	runID        string
	usedMemory   int64
	maxMemory    int64  // 0: no limit
	role         string // "master", or "slave" for a replica
	master       string // a replica's master, "host:port"
}

// intact: the node counts in fenced quorums.
func (s *nodeState) intact() bool {
	return s.id >= 0 && (s.replid == "" || s.replid == s.curReplid)
}

func parseNodeState(v []any) (*nodeState, error) {
	if len(v) != 15 {
		return nil, fmt.Errorf("redlock: unexpected node state %v", v)
	}
	str := func(i int) string { s, _ := v[i].(string); return s }
	num := func(i int) int64 { n, _ := strconv.ParseInt(str(i), 10, 64); return n }
	s := &nodeState{
		uuid: str(0), roster: str(1), id: -1, replid: str(3), curReplid: str(4),
		now:     num(6),
		counter: num(8), maxTTL: time.Duration(num(9)) * time.Millisecond, runID: str(10),
		usedMemory: num(11), maxMemory: num(12), role: str(13), master: str(14),
	}
	s.rawID, s.rawStamp = str(2), str(5)
	if id, err := strconv.Atoi(str(2)); err == nil {
		s.id = id
	}
	// A stamp made under another replication id dates an earlier episode.
	if ms, ok := stampTime(str(5), s.curReplid); ok {
		s.stamp, s.lostAt = str(5), ms
	}
	return s, nil
}

// Parsed is what parseNodeState reads of a node_state.lua reply, for the
// root package's differential test of the scripts against the protocol
// model (protomodel_lua_test.go), which cannot reach the unexported state.
func Parsed(v []any) (uuid string, id int, intact bool, now, counter int64, err error) {
	s, err := parseNodeState(v)
	if err != nil {
		return "", 0, false, 0, 0, err
	}
	return s.uuid, s.id, s.intact(), s.now, s.counter, nil
}

// stampTime returns the node time in ms of a lost stamp
// ('<ms>:<nonce>:<replid>'; '<ms>:<replid>' before stamps had nonces), if it
// was made under replication id replid.
func stampTime(stamp, replid string) (int64, bool) {
	ms, rest, ok := strings.Cut(stamp, ":")
	if !ok || rest[strings.LastIndexByte(rest, ':')+1:] != replid {
		return 0, false
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	return n, err == nil && n > 0
}

// onNodes runs op on every node, each call bounded by the node timeout, and
// returns the tally once every node answered or timed out.
func (d *Deployment) onNodes(ctx context.Context, op round.NodeOp) (*round.Tally, error) {
	return d.onNodesUntil(ctx, op, nil)
}

// onNodesUntil is onNodes that stops waiting for the silent nodes at the
// time soon gives, if it gives one (see round.Engine.Run).
func (d *Deployment) onNodesUntil(ctx context.Context, op round.NodeOp, soon func(*round.Tally) (time.Time, bool)) (*round.Tally, error) {
	t, err := d.rounds.Run(ctx, round.Spec{Name: "admin", Op: op}, nil, soon)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// readStates reads every node's state; a node that did not answer is nil.
func (d *Deployment) readStates(ctx context.Context) ([]*nodeState, *round.Tally, error) {
	return d.readStatesUntil(ctx, nil)
}

// readStatesUntil is readStates that stops waiting as onNodesUntil does.
func (d *Deployment) readStatesUntil(ctx context.Context, soon func(*round.Tally) (time.Time, bool)) ([]*nodeState, *round.Tally, error) {
	out := make([]*nodeState, len(d.nodes))
	k := &d.keys
	keys := []string{k.UUID, k.Roster, k.ID, k.Replid, k.Lost, k.Counter, k.MaxTTL}
	nonce := nodescript.NewValue()
	t, err := d.onNodesUntil(ctx, func(ctx context.Context, i int, node redis.UniversalClient) (round.Outcome, int64, error) {
		v, err := nodescript.NodeState.Run(ctx, node, keys, nonce).Slice()
		if err != nil {
			return round.NodeFailed, 0, err
		}
		s, err := parseNodeState(v)
		if err != nil {
			return round.NodeFailed, 0, err
		}
		out[i] = s
		return round.NodeGranted, 0, nil
	}, soon)
	if err != nil {
		return nil, nil, err
	}
	// A call that timed out may still write its slot: keep only answers.
	states := make([]*nodeState, len(d.nodes))
	for i, r := range t.Results {
		if r.Outcome == round.NodeGranted {
			states[i] = out[i]
		}
	}
	return states, t, nil
}

// readAllStates is readStates where every node must answer.
func (d *Deployment) readAllStates(ctx context.Context, op string) ([]*nodeState, error) {
	states, t, err := d.readStates(ctx)
	if err != nil {
		return nil, err
	}
	if t.Granted() < len(d.nodes) {
		return nil, d.quorumError(&verdict.Failure{Op: op, Kind: kind.ErrUnavailable, Nodes: t.Snapshot()})
	}
	return states, distinctServers(states)
}

// distinctServers refuses two clients for one server: it would count twice
// in every quorum.
func distinctServers(states []*nodeState) error {
	seen := map[string]int{}
	for i, s := range states {
		if s == nil || s.runID == "" {
			continue
		}
		if j, dup := seen[s.runID]; dup {
			return fmt.Errorf("%w: nodes %d and %d are the same server (run_id %s)", kind.ErrDuplicateNode, j, i, s.runID)
		}
		seen[s.runID] = i
	}
	return nil
}

func outcomeOf(err error) (round.Outcome, int64, error) {
	if err != nil {
		return round.NodeFailed, 0, err
	}
	return round.NodeGranted, 0, nil
}

// NodeIDs returns each node's fencing id, -1 for a node whose fencing
// state is not intact or that did not answer (the root package's NodeIDs
// documents how it fails).
func (d *Deployment) NodeIDs(ctx context.Context) ([]int, error) {
	ctx, cancel := d.adminContext(ctx)
	defer cancel()
	states, t, err := d.readStates(ctx)
	if err != nil {
		return nil, err
	}
	if v := judgeList(states, len(d.nodes)); v.Err != nil {
		return nil, v.Err
	}
	if err := distinctServers(states); err != nil {
		return nil, err
	}
	ids := make([]int, len(states))
	for i, s := range states {
		ids[i] = -1
		if s != nil && s.intact() {
			ids[i] = s.id
		}
	}
	if t.Granted() < len(d.nodes) {
		return ids, d.quorumError(&verdict.Failure{Op: "read node ids", Kind: kind.ErrUnavailable, Nodes: t.Snapshot()})
	}
	return ids, nil
}

// adminContext bounds provisioning and repair, which go-redis may not bound
// by itself.
func (d *Deployment) adminContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Minute)
}
