package redlock

import (
	"testing"
	"time"
)

// A node with a call pending past the node timeout is hung; it is still
// sent one call every probeEvery node timeouts, in case its pending calls
// never return; it is well again as soon as a call is answered.
func TestNodeHealth(t *testing.T) {
	c := &Client{cfg: defaultConfig(), epoch: time.Now()}
	const timeout = 5 * time.Millisecond
	c.cfg.nodeTimeout = timeout
	var h nodeHealth
	if h.hung(c) {
		t.Fatal("hung with nothing ever sent")
	}
	h.sending(c)
	if h.hung(c) {
		t.Fatal("hung right after a call was sent")
	}
	time.Sleep(2 * timeout)
	for i := range 3 {
		if !h.hung(c) {
			t.Fatalf("call %d after the node timeout not held back", i)
		}
	}
	for range 2 {
		time.Sleep((probeEvery + 1) * timeout)
		if h.hung(c) {
			t.Fatal("no probe after probeEvery node timeouts")
		}
		h.sending(c) // the probe, stuck too
		if !h.hung(c) {
			t.Fatal("two probes at once")
		}
	}
	h.returned(c, nil) // a reply, to one of the three pending calls
	if h.hung(c) {
		t.Fatal("still hung after an answer")
	}
	h.returned(c, nil)
	h.returned(c, nil)

	h.sending(c)
	h.sending(c)
	time.Sleep(2 * timeout)
	h.returned(c, errTest) // a timeout or broken connection proves nothing
	if !h.hung(c) {
		t.Fatal("well again after a call failed without an answer")
	}
	h.returned(c, errTest)
	if h.hung(c) {
		t.Fatal("hung with nothing pending")
	}
}

var errTest = timeoutError{}

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
