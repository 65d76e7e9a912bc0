// Package waitmodel is an exhaustive model of one node's waiting lines for
// the mutex, the multi-lock and the read-write lock (docs/multilock.md, "The bound on a
// multi-lock's wait"): who a release promises a name to, and what a
// waiting multi-lock does with a member promised to it that it cannot use
// yet. It checks the rule of lua/multi_wait.lua (keepsPromises) in plain
// Go, no Redis: the scripts are atomic, so each is one transition here.
//
// The model: a few names; waiters, each waiting for a set of names (a Lock
// waiter for one, a multi-lock for several), in age order (their places:
// one place per waiter on a node, as the scripts give it); holders that
// release; Lock callers that take their name again after each release,
// joining the line at its end (the overlapping turns of issue 34). Events:
// a holder's release (the name promised to the first waiter in its line);
// a waiter's attempt (takeSet: the whole set if every name is free and
// promised to it or to nobody; else each name promised to it kept or
// passed on to the next waiter after it); a multi-lock's TTL of waiting
// running out (from then on it may keep). Promises kept by a live waiter
// are renewed by its attempts, so they do not lapse here.
//
// Two checks over every reachable state (Check):
//   - Stuck: a state from which no sequence of events lets every
//     waiter that does not take turns for ever finish (a deadlock, or a
//     cycle with no way out). With the keep rule's age condition removed
//     (Rules.NoAge), three multi-locks over {a,b}, {b,c}, {c,a} keep each
//     other's members for ever.
//   - Starved: a cycle of events, in which a given multi-lock has waited its
//     TTL, makes attempts, and never gets its set (an adversary's schedule
//     that starves it while it keeps trying). With the keep rule removed
//     (Rules.NeverKeep: the code before issue 34), two members held in
//     overlapping turns by Lock callers starve it.
//
// A second model (rw.go, rw_steps.go, rw_check.go: CheckRW) is the
// read-write lock's phase-fair rule on one node (docs/rwlock.md): writers
// in the queue and its promises, readers and the readers' wait with each
// reader's need counted in writer holds, every actor taking turns for
// ever. It checks the rule's bounds after every event (ReaderBound,
// ReaderEntry, WriterBound, WriterOrder: CheckRW's doc), and each part of
// the rule removed (RWRules) breaks one of them.
//
// The bound the rule gives is per node; a majority of nodes decides, and
// nodes may order near-simultaneous waiters differently (docs/multilock.md).
package waitmodel
