//go:build race

package redlock_test

// raceEnabled: the race detector slows the client about tenfold.
const raceEnabled = true
