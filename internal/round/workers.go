package round

import (
	"slices"
	"sync"
	"time"
)

// workers runs the node calls of the rounds (FanOut) on goroutines that
// outlive one call. A goroutine's stack starts small, and go-redis's call
// path grows it several times: with a new goroutine per call, growing and
// copying stacks was a fifth of the client's CPU for an uncontended
// TryLock+Unlock. A worker keeps its stack from one call to the next.
//
// A call goes to an idle worker if there is one, and to a new goroutine if
// not, so calls never queue behind each other: a hung node holds up only
// the workers calling it, as it held up only its own goroutines before. A
// worker ends once it has been idle for workerIdle, or when the engine
// closes.
//
// A call goes to the worker that became idle last, so a steady pace keeps
// busy only the few workers it needs, and those of a burst end. Handed to
// the worker idle longest (the order in which a channel serves the
// goroutines waiting on it), the calls went round all of a burst's workers,
// and none stayed idle long enough to end: a client that once ran 200
// locks at a time kept 600 goroutines while it took one lock every few
// milliseconds (TestBurstWorkersEndUnderASteadyPace).
type workers struct {
	mu   sync.Mutex
	idle []*worker       // the idle workers, the last to become idle last
	stop <-chan struct{} // closed by Close
	// wg counts the workers, which Close waits for: run is not called
	// once the client is closed (FanOut).
	wg sync.WaitGroup
}

// worker is one idle-able goroutine of workers.
type worker struct {
	job chan nodeCall // buffered: run hands a job to the worker it took out of idle
}

// workerIdle is how long a worker waits for its next call before it ends:
// long enough to span the gaps between the locks of a busy client, short
// enough that a burst's workers do not linger.
const workerIdle = time.Second

// run runs f on the worker that became idle last, or on a new one.
func (w *workers) run(f nodeCall) {
	w.mu.Lock()
	if n := len(w.idle); n > 0 {
		wk := w.idle[n-1]
		w.idle[n-1] = nil
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		wk.job <- f
		return
	}
	w.mu.Unlock()
	w.wg.Go(func() { w.work(f) })
}

func (w *workers) work(f nodeCall) {
	wk := &worker{job: make(chan nodeCall, 1)}
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f.run()
		f = nodeCall{} // an idle worker keeps no caller's context or Lock alive
		w.mu.Lock()
		w.idle = append(w.idle, wk)
		w.mu.Unlock()
		idle.Reset(workerIdle)
		select {
		case f = <-wk.job:
			continue
		case <-idle.C:
		case <-w.stop:
		}
		if w.leave(wk) {
			return
		}
		// run took this worker out of idle as it timed out: its job is
		// on the way, and must run.
		f = <-wk.job
	}
}

// leave takes wk out of the idle workers, and reports false if run took it
// out first.
func (w *workers) leave(wk *worker) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := slices.Index(w.idle, wk)
	if i < 0 {
		return false
	}
	w.idle = slices.Delete(w.idle, i, i+1)
	return true
}
