// Package round is the round engine: one round of calls on N independent
// nodes, decided at a majority.
//
// A round sends one operation (a NodeOp) to every node at once, each call
// on a worker goroutine kept between calls or, if it would wait for its
// node's next batch, riding that batch with no goroutine of its own (a
// Split: batched.go), under the node timeout and the round's patience, and counts the replies in a Tally until the caller's
// predicate decides the round, every node has an outcome, or ctx ends.
// The engine tells a hung node from a slow one and skips it, gives up on
// silent nodes once a majority has answered, and names each node's cause:
// its reply, a timeout, or the error of its last failed dial.
//
// The engine knows nothing of locks, keys or scripts: what a call does is
// the caller's NodeOp. It imports only go-redis and package batch.
package round
