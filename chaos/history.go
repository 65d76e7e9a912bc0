// Package chaos runs the lock against real Redis nodes while injecting
// faults, records everything that happened, and checks the record for
// violations: stale writes the store accepted, duplicate or out-of-order
// tokens, lost writes, and overlapping holders.
//
// It depends on the library and on node/; the library never depends on it.
package chaos

import (
	"sync"
	"time"
)

// History is what one run recorded. Times are offsets from the run's start
// on the monotonic clock, so they compare across workers.
type History struct {
	Scenario string
	Fenced   bool
	TTL      time.Duration
	Length   time.Duration // how long the workload ran

	// Primitive is what the workers took: "" for the mutex, or one of the
	// lock family's (family.go). Permits is a semaphore's K.
	Primitive string
	Permits   int
	// Finals is each resource's counter at the end, for the lock family,
	// whose holds name their Resource.
	Finals map[string]int64

	Observed []Observation // the election's: what its observers were told (election.go)

	Holds    []Hold     // every successful acquisition
	Faults   []Fault    // every injected fault
	Failures []Failure  // acquisitions that failed
	Acked    int        // writes the store acknowledged
	Final    int64      // the protected counter at the end
	Errors   []string   // unexpected errors (store down, bugs)
	mu       sync.Mutex // guards appends during the run
}

// Hold is one acquisition and what its holder did with it.
type Hold struct {
	Worker int
	Seq    int // the worker's n-th acquisition
	Invoke time.Duration
	Grant  time.Duration // when Lock returned
	Until  time.Duration // the validity end the client computed
	End    time.Duration // when the holder's last store operation returned
	Token  uint64
	Nodes  string // per-node outcomes of the acquisition
	Paused time.Duration
	Read   *Op
	Write  *Op
	Unlock string // Unlock's error, if any
	// The lock family's (family.go): the resource this hold guards (a
	// semaphore's slot, a multi-lock's member: a multi-lock records one
	// hold per member), and whether it is a read-write lock's reader.
	Resource string
	Reader   bool
}

// Op is one operation on the protected store.
type Op struct {
	Start, End time.Duration
	Value      int64 // read: the value seen; write: the value written
	Accepted   bool
	Refused    bool   // the fence turned it away (stale or reused token)
	Highest    uint64 // a stale refusal: the higher token the store had already admitted
	Err        string // why the store refused it, or how it failed
}

// Fault is an injected fault, with the node (or worker) it hit.
type Fault struct {
	At     time.Duration
	Until  time.Duration // zero for instantaneous faults
	Target string
	What   string
}

// Failure is an acquisition that returned an error.
type Failure struct {
	Worker      int
	Invoke, End time.Duration
	Err         string
}

func (h *History) addHold(x Hold) {
	h.mu.Lock()
	h.Holds = append(h.Holds, x)
	if x.Write != nil && x.Write.Accepted {
		h.Acked++
	}
	h.mu.Unlock()
}

func (h *History) addFault(f Fault) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Faults = append(h.Faults, f)
	return len(h.Faults) - 1
}

func (h *History) endFault(i int, at time.Duration) {
	h.mu.Lock()
	h.Faults[i].Until = at
	h.mu.Unlock()
}

func (h *History) addFailure(f Failure) {
	h.mu.Lock()
	h.Failures = append(h.Failures, f)
	h.mu.Unlock()
}

func (h *History) addError(s string) {
	h.mu.Lock()
	if len(h.Errors) < 20 {
		h.Errors = append(h.Errors, s)
	}
	h.mu.Unlock()
}
