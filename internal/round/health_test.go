package round

import (
	"testing"
	"time"
)

// A node with a call pending is hung once it has been silent for more than
// the node timeout and a majority of the nodes (here both others)
// answered more than a node timeout into that silence. It is still sent one call every probeEvery
// node timeouts, in case its pending calls never return; it is well again
// as soon as a call is answered. A silence every node shares (a saturated
// machine, a dial burst) makes none of them hung, and neither does being a
// little slower than the others.
func TestNodeHealth(t *testing.T) {
	const timeout = 5 * time.Millisecond
	c := &Engine{timeout: timeout, epoch: time.Now(), health: make([]nodeHealth, 3)}
	h := &c.health[0]
	hung := func() bool { return c.hung(0) }
	others := func() { // both other nodes are sent a call and answer it
		for j := 1; j < 3; j++ {
			c.health[j].sending(c)
			c.health[j].returned(c, nil)
		}
	}
	if hung() {
		t.Fatal("hung with nothing ever sent")
	}
	h.sending(c)
	others() // at once: before node 0 was a node timeout late
	if hung() {
		t.Fatal("hung right after a call was sent")
	}
	time.Sleep(2 * timeout)
	if hung() {
		t.Fatal("hung although no other node answered during its silence")
	}
	c.health[1].sending(c)
	c.health[1].returned(c, nil)
	if hung() {
		t.Fatal("hung while only a minority of the nodes answers")
	}
	c.health[2].sending(c)
	c.health[2].returned(c, nil) // now a majority answers while node 0 is silent
	for i := range 3 {
		if !hung() {
			t.Fatalf("call %d after 2 silent node timeouts not held back", i)
		}
	}
	for range 2 {
		time.Sleep((probeEvery + 1) * timeout)
		if hung() {
			t.Fatal("no probe after probeEvery node timeouts")
		}
		h.sending(c) // the probe, stuck too
		if !hung() {
			t.Fatal("two probes at once")
		}
	}
	h.returned(c, nil) // a reply, to one of the three pending calls
	if hung() {
		t.Fatal("still hung after an answer")
	}
	h.returned(c, nil)
	h.returned(c, nil)

	// The others answered, but not after node 0 was a node timeout late.
	h.sending(c)
	h.sending(c)
	others()
	time.Sleep(2 * timeout)
	if hung() {
		t.Fatal("hung although the others' answers came early in its silence")
	}
	others()
	h.returned(c, errTest) // a timeout or broken connection proves nothing
	if !hung() {
		t.Fatal("well again after a call failed without an answer")
	}
	h.returned(c, errTest)
	if hung() {
		t.Fatal("hung with nothing pending")
	}
}

var errTest = timeoutError{}

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
