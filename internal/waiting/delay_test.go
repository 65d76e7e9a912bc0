package waiting

import (
	"testing"
	"time"
)

// Attempts lost to an outage double the retry delay, up to a second; one
// lost to contention starts the count again; the bound gives up once the
// outage has lasted it, and the last pause before it ends on time.
func TestOutageDoublesTheDelayAndGivesUpAtTheBound(t *testing.T) {
	d := Delays{RetryMin: 100 * time.Millisecond, RetryMax: 100 * time.Millisecond, MaxOutage: 5 * time.Second}
	start := time.Unix(1000, 0)
	var o outage
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		delay, lasted := d.next(&o, false, start.Add(time.Duration(i)*time.Millisecond), start.Add(time.Duration(i)*time.Millisecond))
		if delay != w*time.Millisecond || lasted != 0 {
			t.Fatalf("attempt %d: delay %v lasted %v, want %v and 0", i+1, delay, lasted, w*time.Millisecond)
		}
	}
	if !o.since.Equal(start) {
		t.Fatalf("the outage began at %v, want the first attempt's start %v", o.since, start)
	}
	if delay, lasted := d.next(&o, false, start.Add(4800*time.Millisecond), start.Add(4800*time.Millisecond)); delay != 200*time.Millisecond || lasted != 0 {
		t.Fatalf("200 ms before the bound: delay %v lasted %v, want the 200 ms left", delay, lasted)
	}
	if _, lasted := d.next(&o, false, start.Add(5*time.Second), start.Add(5*time.Second)); lasted != 5*time.Second {
		t.Fatalf("at the bound: lasted %v, want 5s", lasted)
	}
	if delay, lasted := d.next(&o, true, start.Add(6*time.Second), start.Add(6*time.Second)); delay != 100*time.Millisecond || lasted != 0 || o.n != 0 {
		t.Fatalf("contended: delay %v lasted %v count %d, want the retry delay, 0, 0", delay, lasted, o.n)
	}
}

// Without a bound (WithMaxOutage(0)) an outage never gives up.
func TestNoBoundNeverGivesUp(t *testing.T) {
	d := Delays{RetryMin: time.Millisecond, RetryMax: 2 * time.Millisecond}
	start := time.Unix(1000, 0)
	var o outage
	for i := range 100 {
		if _, lasted := d.next(&o, false, start, start.Add(time.Duration(i)*time.Hour)); lasted != 0 {
			t.Fatalf("gave up after %v with no bound", lasted)
		}
	}
}

// A woken waiter that has waited long goes first: its delay falls with
// its age, from handoffSpread.
func TestWakeDelayFallsWithAge(t *testing.T) {
	if wakeDelay(0) != handoffSpread {
		t.Fatalf("a newcomer waits %v, want %v", wakeDelay(0), handoffSpread)
	}
	prev := wakeDelay(0)
	for _, age := range []time.Duration{time.Millisecond, 10 * time.Millisecond, time.Second, time.Minute} {
		if d := wakeDelay(age); d >= prev {
			t.Fatalf("age %v waits %v, not less than %v", age, d, prev)
		} else {
			prev = d
		}
	}
}
