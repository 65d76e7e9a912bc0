// Package nodescript holds what the nodes run: the Lua scripts (lua/*.lua,
// embedded), assembled from their preludes at init, and Call, one script
// invocation built once and sent to every node of a round.
//
// Every key a script touches is passed in KEYS and shares the lock's hash
// tag (the per-node fencing keys carry none), so a Redis Cluster can serve
// as one node. Calls go out with EVALSHA, and EVAL on NOSCRIPT; the digest
// is the one a node told (internal/luascript), so nothing is hashed in Go
// and the library works under GODEBUG=fips140=only.
//
// The package knows nothing of quorums, locks or clients: it imports only
// luascript and go-redis.
package nodescript
