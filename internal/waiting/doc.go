// Package waiting is the waiting loop of the calls that wait for a lock:
// Lock, a read-write lock's writers and readers, LockMulti and a
// semaphore's Acquire. It makes attempts until one succeeds, fails for
// good, the caller's context ends, the client closes, or an outage
// outlasts the client's bound; between attempts it pauses the client's
// jittered retry delay (doubled through an outage), listens to the
// release notifications and promises of internal/fairqueue, and leaves the
// nodes' queues when it gives up. It warns, rate-limited per name, while
// attempts fail for want of nodes.
//
// What an attempt is and what its error means are the caller's: the root
// package gives each Loop a Failed view of its *QuorumError, so this
// package knows the attempt's verdict (final, contended, lost to promises,
// a split vote), not its type.
package waiting
