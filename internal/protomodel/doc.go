// Package protomodel is an exhaustive model checker for the fenced
// acquisition and its repair (docs/fencing.md, revisions 2 and 3), in plain
// Go: no Redis.
//
// The model: N = 3 nodes, whose scripts are atomic transitions on a small
// state (node.go: acquire, commit, release, the state read, the uuid swap,
// the repair script, the identity prelude's stamp; the extension,
// extend.go, and Reprovision's reset, reprovision.go; and the faults: wipes
// with and without a restart, snapshots and restarts from them); clients
// making lock attempts (client.go, decide.go) and extending the lock they
// hold, for its TTL or a shorter one (extend.go, unheard.go), each call a
// separate event that may run late, after its round was decided, and each
// decision an event, so that a client pauses wherever it waits; online
// repairs (repair.go) and an operator's reprovision (reprovision.go), whose
// reads, decision and writes are separate events; a discrete clock that a
// tick advances (state.go). Rules (rules.go) selects today's repair (Old,
// the code at 5e7ef93) or the fix (New), and the broken variants that show
// the checker is not vacuous. New has issue 32's rules as the library has
// them: an Extend counts each granted node for no longer than the shortest
// TTL of the holder's extension calls unheard there (UnheardTTLs) when it
// began (UnheardAtStart), a shortening pulls the validity back as it begins
// (PullAtStart; PullDeadline, once it failed, was the first rule), and
// Reprovision waits out the restart delay (ProvDelay) and resets each node
// only if it holds what was read (ProvConditional), in the run it was read
// in (ProvSameRun). The last three closed what the search found in the
// first rules (extend_test.go, reprovision_test.go: NewPullOnFailure,
// NewUnheardAtEnd, NewProvAnyRun).
//
// The search (explore.go) visits every interleaving of the enabled events
// (events.go) within the bounds of a Config, breadth first (shortest
// counterexamples) or depth first (far less memory), identifying states by
// a hash of a canonical encoding (encode.go) that folds the symmetry of
// clients and of repairers. After every event it checks (props.go) U (no
// token returned twice), M1 (a token is above every token returned before
// its attempt began) and the lease (no two clients hold the lock within
// their validity). A violation comes with its trace, a line per event
// (trace.go), which Minimize can shorten.
//
// Provisioning is the initial state (every node has its id and uuid); a
// reprovision gives every node new ones; the node list is fixed. One lock
// name. Acquisitions apply one TTL, the longest in use (what repairs and
// reprovisions wait out); an extension applies it or Config.ShortTTL. H and
// E never expire (the retention is longer than the clock's range). Node
// clocks are the global clock unless Config.ClockJump lets one jump
// forward. A client's new attempt drops the calls of its previous one
// still in flight (its late extension calls included).
//
// `go test ./internal/protomodel` searches bounds that take about two
// minutes on one core (issue 32's searches about 20 s of them). The deep
// run (`make model-deep`) is
//
//	flock /tmp/redlock-heavy.lock env PROTOMODEL_DEEP=1 go test -run TestDeep -timeout 0 -v ./internal/protomodel
//
// and TestAdHoc searches any bounds given as PROTOMODEL_* variables
// (helpers_test.go).
package protomodel
