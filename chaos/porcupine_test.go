package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func ok(start, end time.Duration, v int64) *Op {
	return &Op{Start: start, End: end, Value: v, Accepted: true}
}

func modelResult(t *testing.T, h *History, model string) porcupine.CheckResult {
	t.Helper()
	for _, m := range CheckModels(h) {
		if m.Model == model {
			return m.Result
		}
	}
	t.Fatalf("no %q model in %v", model, CheckModels(h))
	return ""
}

// Porcupine must flag a history in which the store accepted a stale write,
// pass a good one, and agree with the hand-written store-order checker.
func TestPorcupineFencedRegister(t *testing.T) {
	ms := time.Millisecond
	good := &History{Fenced: true, Holds: []Hold{
		{Worker: 0, Seq: 0, Token: 10, Invoke: 0, Grant: 5 * ms, Read: ok(10*ms, 20*ms, 0), Write: ok(30*ms, 40*ms, 1)},
		{Worker: 1, Seq: 0, Token: 20, Invoke: 35 * ms, Grant: 45 * ms, Read: ok(50*ms, 60*ms, 1), Write: ok(70*ms, 80*ms, 2)},
		// A paused holder comes back: the fence refuses its write.
		{Worker: 2, Seq: 0, Token: 5, Invoke: 0, Grant: 2 * ms, Read: ok(3*ms, 4*ms, 0),
			Write: &Op{Start: 90 * ms, End: 95 * ms, Value: 1, Refused: true, Err: "stale"}},
	}}
	if r := modelResult(t, good, ModelRegister); r != porcupine.Ok {
		t.Errorf("good history: %s", r)
	}
	if n := checkStoreOrder(good, func(string, string, ...any) {}); n != 0 {
		t.Errorf("hand-written checker found %d stale writes in the good history", n)
	}

	stale := &History{Fenced: true, Holds: []Hold{
		{Worker: 0, Token: 10, Grant: 5 * ms, Read: ok(10*ms, 20*ms, 0), Write: ok(90*ms, 95*ms, 1)},
		{Worker: 1, Token: 20, Grant: 25 * ms, Read: ok(30*ms, 40*ms, 0), Write: ok(50*ms, 60*ms, 1)},
	}}
	if r := modelResult(t, stale, ModelRegister); r != porcupine.Illegal {
		t.Errorf("stale write accepted after a newer write returned: porcupine says %s, want Illegal", r)
	}
	if n := checkStoreOrder(stale, func(string, string, ...any) {}); n != 1 {
		t.Errorf("hand-written checker found %d stale writes, want 1", n)
	}

	// An operation takes effect somewhere between its call and return: a
	// read may see a write that has not returned yet.
	concurrent := &History{Fenced: true, Holds: []Hold{
		{Worker: 0, Token: 10, Read: ok(0, 10*ms, 0), Write: ok(20*ms, 60*ms, 1)},
		{Worker: 1, Token: 20, Read: ok(30*ms, 40*ms, 1), Write: ok(50*ms, 70*ms, 2)},
	}}
	if r := modelResult(t, concurrent, ModelRegister); r != porcupine.Ok {
		t.Errorf("concurrent writes: %s, want Ok", r)
	}

	// What the hand-written checkers never look at: a fence that refuses a
	// holder it should have admitted, and a read that saw the wrong value.
	wrongRefusal := &History{Fenced: true, Holds: []Hold{
		{Worker: 0, Token: 10, Read: ok(0, 10*ms, 0), Write: ok(20*ms, 30*ms, 1)},
		{Worker: 1, Token: 20, Read: &Op{Start: 40 * ms, End: 50 * ms, Refused: true, Err: "stale"}},
	}}
	if r := modelResult(t, wrongRefusal, ModelRegister); r != porcupine.Illegal {
		t.Errorf("the fence refused a newer token: %s, want Illegal", r)
	}
	wrongRead := &History{Fenced: true, Holds: []Hold{
		{Worker: 0, Token: 10, Read: ok(0, 10*ms, 0), Write: ok(20*ms, 30*ms, 1)},
		{Worker: 1, Token: 20, Read: ok(40*ms, 50*ms, 0)},
	}}
	if r := modelResult(t, wrongRead, ModelRegister); r != porcupine.Illegal {
		t.Errorf("a read missed an acknowledged write: %s, want Illegal", r)
	}

	// A write whose store call failed may have happened or not; either
	// continuation is legal.
	for _, seen := range []int64{0, 1} {
		unknown := &History{Fenced: true, Holds: []Hold{
			{Worker: 0, Token: 10, Read: ok(0, 10*ms, 0), Write: &Op{Start: 20 * ms, End: 30 * ms, Value: 1, Err: "i/o timeout"}},
			{Worker: 1, Token: 20, Read: ok(40*ms, 50*ms, seen)},
		}}
		if r := modelResult(t, unknown, ModelRegister); r != porcupine.Ok {
			t.Errorf("after a failed write the next read saw %d: %s, want Ok", seen, r)
		}
	}
}

func TestPorcupineTokenOrder(t *testing.T) {
	ms := time.Millisecond
	good := &History{Fenced: true, Holds: []Hold{
		{Worker: 0, Token: 5, Invoke: 0, Grant: 10 * ms},
		{Worker: 1, Token: 3, Invoke: 5 * ms, Grant: 15 * ms}, // concurrent with the first: either order
		{Worker: 0, Token: 7, Invoke: 20 * ms, Grant: 30 * ms},
	}}
	if r := modelResult(t, good, ModelTokenOrder); r != porcupine.Ok {
		t.Errorf("good token order: %s", r)
	}
	bad := &History{Fenced: true, Holds: []Hold{
		{Worker: 0, Token: 5, Invoke: 0, Grant: 10 * ms},
		{Worker: 1, Token: 3, Invoke: 20 * ms, Grant: 30 * ms},
	}}
	if r := modelResult(t, bad, ModelTokenOrder); r != porcupine.Illegal {
		t.Errorf("a later acquisition got a smaller token: %s, want Illegal", r)
	}
	dup := &History{Fenced: true, Holds: []Hold{
		{Worker: 0, Token: 5, Invoke: 0, Grant: 10 * ms},
		{Worker: 1, Token: 5, Invoke: 5 * ms, Grant: 15 * ms},
	}}
	if r := modelResult(t, dup, ModelTokenOrder); r != porcupine.Illegal {
		t.Errorf("a duplicate token: %s, want Illegal", r)
	}
	if d, o := checkTokens(bad, func(string, string, ...any) {}); d+o == 0 {
		t.Error("the hand-written token checker passed the bad history")
	}
}

// A model porcupine finds violated fails the run even where the
// hand-written checkers found nothing, and the report says which.
func TestJudgeAndReportPorcupine(t *testing.T) {
	h := &History{Fenced: true, Holds: []Hold{{Worker: 0, Token: 1}}}
	models := []ModelCheck{{Model: ModelRegister, Result: porcupine.Illegal}, {Model: ModelTokenOrder, Result: porcupine.Ok}}
	v := judge(Scenario{Unfenced: Holds}, true, h, Findings{}, models)
	if v.OK || !strings.Contains(v.Text, "porcupine") {
		t.Errorf("verdict %+v, want a porcupine BUG", v)
	}
	r := &Result{Config: Config{Scenario: Scenario{Name: "s"}, Fenced: true, Workers: 1}, History: h, Models: models, Verdict: v}
	var table, evidence strings.Builder
	WriteTable(&table, []*Result{r})
	WriteEvidence(&evidence, []*Result{r})
	if !strings.Contains(table.String(), "illegal: fenced register") {
		t.Errorf("table lacks porcupine's finding:\n%s", table.String())
	}
	for _, want := range []string{"hand-written checkers: nothing found", "porcupine, fenced register: Illegal", "porcupine, token order: Ok"} {
		if !strings.Contains(evidence.String(), want) {
			t.Errorf("evidence lacks %q:\n%s", want, evidence.String())
		}
	}
}
