// Package fairqueue is the lock's waiting line as the clients see it:
// waiters' notifications (each node's subscriber connection, who waits for
// what, promises heard), and the fan-outs that leave the queue or give a
// promise back. The queue itself lives on the nodes (the scripts of
// internal/nodescript); a Lock call's retry loop, and when it tries, stay
// with the client.
//
// Release notifications: a waiter in Lock wakes when the lock is released
// instead of sleeping out its retry delay (Redisson does the same).
//
// When Unlock deletes the lock, the release script promises it to the
// oldest waiter (the queue prelude of internal/nodescript) and PUBLISHes
// that waiter's id on "<key>:promised:<client id>", which only the
// waiter's own client hears, or "" on "<key>:released", which every waiting
// client hears, when nobody waits. Each client keeps one subscriber
// connection per node, shared by all of its waiters, subscribed to both
// channels of the names being waited for. A message naming a waiter wakes
// that waiter only; an empty one wakes the client's oldest waiter for the
// name, which then retries after a delay that shrinks with how long it has
// waited. Notifications are a hint: a lost one costs only the jittered
// retry delay, which stays in place as the fallback. Rollbacks of failed
// attempts do not notify, or every failed attempt would wake the others
// into another round of split votes.
//
// What a node is subscribed to follows what the client wants: the lock keys
// with waiters or a lingering subscription (Queue.locks). Each node's
// subscriber brings its connection in line with that set in its own
// goroutine (subscriber.go), so a slow or paused node delays only its own
// subscriptions, and no request is ever dropped.
//
// The package gets what it needs from its client (the nodes, the round
// engine, the client id, the node timeout, a promise's life, the lock
// clock): it imports internal/round, internal/nodescript and go-redis, and
// never the root package.
package fairqueue
