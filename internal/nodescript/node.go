package nodescript

import (
	cryptorand "crypto/rand"
	"encoding/hex"
)

// What the scripts run on and carry: a node's own keys, and the random
// values that name a lock's holder or make a stamp unique.

// NodeKeys are the per-node keys of the fencing state.
type NodeKeys struct {
	UUID, Roster, ID, Replid, Lost string // identity
	Counter, Floor, MaxTTL         string // G, E, the longest TTL in use
}

// NewNodeKeys returns the per-node keys under prefix.
func NewNodeKeys(prefix string) NodeKeys {
	return NodeKeys{
		UUID:    prefix + ":node-uuid",
		Roster:  prefix + ":node-roster",
		ID:      prefix + ":node-id",
		Replid:  prefix + ":node-replid",
		Lost:    prefix + ":node-lost",
		Counter: prefix + ":fence:counter",
		Floor:   prefix + ":fence:floor",
		MaxTTL:  prefix + ":fence:max-ttl",
	}
}

// NewValue returns a random lock value: 128 bits, hex-encoded, made with
// one allocation (uuid.NewString takes two, and this is on every attempt).
func NewValue() string {
	var raw [16]byte
	var text [32]byte
	_, _ = cryptorand.Read(raw[:]) // never fails (crypto/rand.Read's contract)
	hex.Encode(text[:], raw[:])
	return string(text[:])
}
