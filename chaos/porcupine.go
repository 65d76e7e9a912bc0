package chaos

import (
	"fmt"
	"math"
	"time"

	"github.com/anishathalye/porcupine"
)

// The hand-written checkers (check.go) look for the violations we thought
// of. Porcupine, a linearizability checker, asks a different question of
// the same history: is there any order of the operations, each taking
// effect at one instant between its call and its return, that a sequential
// model accepts? Two models:
//
//   - the fenced register: the store as the fence defines it (fence.go);
//   - the token order: tokens handed out increase with the real-time order
//     of acquisitions.
//
// A bug either finds and the other misses is a bug in a checker.

// ModelCheck is porcupine's verdict on one model of one run.
type ModelCheck struct {
	Model  string                `json:"model"`
	Ops    int                   `json:"ops"`
	Result porcupine.CheckResult `json:"result"` // Ok, Illegal, or Unknown (timed out)
	Note   string                `json:"note,omitempty"`
}

func (m ModelCheck) String() string {
	s := fmt.Sprintf("%s: %s (%d ops)", m.Model, m.Result, m.Ops)
	if m.Note != "" {
		s += ", " + m.Note
	}
	return s
}

// Porcupine model names.
const (
	ModelRegister   = "fenced register"
	ModelTokenOrder = "token order"
)

// porcupineTimeout bounds each check; linearizability checking is NP-hard,
// and a run's history is small enough that this is never near.
const porcupineTimeout = 20 * time.Second

// CheckModels runs porcupine over h with both models.
func CheckModels(h *History) []ModelCheck {
	reg := registerOps(h)
	m := ModelCheck{Model: ModelRegister, Ops: len(reg)}
	if !h.Fenced {
		m.Model, m.Note = "register", "no fence: a plain register, so stale writes are legal to it"
	}
	m.Result = porcupine.CheckOperationsTimeout(registerModel(h.Fenced), reg, porcupineTimeout)
	out := []ModelCheck{m}

	tok := ModelCheck{Model: ModelTokenOrder}
	if !h.Fenced {
		tok.Result, tok.Note = porcupine.Ok, "skipped: no tokens without fencing"
	} else {
		ops := tokenOps(h)
		tok.Ops = len(ops)
		tok.Result = porcupine.CheckOperationsTimeout(tokenModel, ops, porcupineTimeout)
	}
	return append(out, tok)
}

// regIn is a store operation: a fenced read or write.
type regIn struct {
	write  bool
	token  uint64
	holder string
	value  int64 // write: the value written
}

type regOutcome int

const (
	regAccepted regOutcome = iota
	regRefused             // the fence turned it away (stale, or a reused token)
	regUnknown             // the store failed: it may or may not have happened
)

type regOut struct {
	outcome regOutcome
	value   int64 // accepted read: the value seen
}

// regState is the store: the fence's mark and the register.
type regState struct {
	high   uint64
	holder string
	value  int64
}

// registerModel is fence.Redis's contract: a higher token raises the mark,
// an equal one is admitted from the same holder, anything else is refused
// and changes nothing; reads are fenced like writes. Without fencing every
// operation is admitted.
func registerModel(fenced bool) porcupine.Model {
	admits := func(s regState, in regIn) bool {
		return !fenced || in.token > s.high || (in.token == s.high && (s.holder == "" || s.holder == in.holder))
	}
	apply := func(s regState, in regIn) regState {
		if fenced {
			s.high, s.holder = in.token, in.holder
		}
		if in.write {
			s.value = in.value
		}
		return s
	}
	m := porcupine.NondeterministicModel{
		Init: func() []any { return []any{regState{}} },
		Step: func(state, input, output any) []any {
			s, in, out := state.(regState), input.(regIn), output.(regOut)
			ok := admits(s, in)
			switch out.outcome {
			case regAccepted:
				if ok && (in.write || out.value == s.value) {
					return []any{apply(s, in)}
				}
			case regRefused:
				if !ok {
					return []any{s}
				}
			case regUnknown:
				if ok {
					return []any{s, apply(s, in)}
				}
				return []any{s}
			}
			return nil
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(regIn), output.(regOut)
			op := fmt.Sprintf("read(%d)", in.token)
			if in.write {
				op = fmt.Sprintf("write(%d, %d)", in.token, in.value)
			}
			return fmt.Sprintf("%s by %s -> %v", op, in.holder, out)
		},
	}
	return m.ToModel()
}

func registerOps(h *History) []porcupine.Operation {
	var ops []porcupine.Operation
	for _, x := range h.Holds {
		holder := fmt.Sprintf("w%d#%d", x.Worker, x.Seq)
		for _, op := range []*Op{x.Read, x.Write} {
			if op == nil {
				continue
			}
			in := regIn{write: op == x.Write, token: x.Token, holder: holder, value: op.Value}
			out := regOut{outcome: regAccepted, value: op.Value}
			ret := int64(op.End)
			switch {
			case op.Accepted:
			case op.Refused:
				out.outcome = regRefused
			default:
				// A failed command may still run later: it returns never.
				out.outcome, ret = regUnknown, math.MaxInt64
			}
			ops = append(ops, porcupine.Operation{ClientId: x.Worker, Input: in, Call: int64(op.Start), Output: out, Return: ret})
		}
	}
	return ops
}

// tokenModel: each acquisition's token is above every token handed out
// before it.
var tokenModel = porcupine.Model{
	Init: func() any { return uint64(0) },
	Step: func(state, _, output any) (bool, any) {
		t := output.(uint64)
		return t > state.(uint64), t
	},
	DescribeOperation: func(_, output any) string { return fmt.Sprintf("acquire -> token %d", output) },
}

func tokenOps(h *History) []porcupine.Operation {
	ops := make([]porcupine.Operation, 0, len(h.Holds))
	for _, x := range h.Holds {
		ops = append(ops, porcupine.Operation{ClientId: x.Worker, Call: int64(x.Invoke), Output: x.Token, Return: int64(x.Grant)})
	}
	return ops
}
