package chaos

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// A porcupine check that ran out of time (Unknown) proved nothing: the run
// is not judged ok on it. (Found by the adversarial review: it was.)
func TestUndecidedPorcupineCheckIsNotAPass(t *testing.T) {
	ms := time.Millisecond
	h := &History{Fenced: true, Holds: []Hold{
		{Worker: 0, Token: 10, Grant: 5 * ms, Until: time.Second, End: 40 * ms, Read: ok(10*ms, 20*ms, 0), Write: ok(30*ms, 40*ms, 1)},
	}}
	models := []ModelCheck{{Model: ModelRegister, Ops: 2, Result: porcupine.Unknown}, {Model: ModelTokenOrder, Ops: 1, Result: porcupine.Ok}}
	if v := judge(Scenarios[0], true, h, Check(h), models); v.OK {
		t.Errorf("porcupine undecided, yet the verdict is %+v", v)
	}
}
