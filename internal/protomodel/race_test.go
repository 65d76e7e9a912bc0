//go:build race

package protomodel

// raceOn: the race detector slows the search about tenfold and finds
// nothing in it (the search is one goroutine), so the tests search smaller
// spaces under it.
const raceOn = true
