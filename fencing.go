package redlock

// Fencing tokens, minted by the quorum (docs/fencing.md).
//
// Every fenced acquisition returns a token that only grows: round 1 rides on
// the acquisition itself (each node proposes a candidate c*256 + id from its
// counter G, above the highest token it holds for the name), round 2
// commits the largest candidate on a majority, raising the name's H and
// every committing node's G, and aborts if a node reports a higher token.
// The validity is computed after round 2.
//
// Per lock name a node keeps only H, which expires a retention R after its
// last commit: G, one counter per node, carries the order across names and
// across H's expiry. Tokens are below 2^53, so they are exact in JSON
// numbers and Lua doubles.

// MaxFencingNodes is the most nodes a fenced client can use: a node id is
// the low byte of every token.
const MaxFencingNodes = 256
