//go:build race

package waitmodel

// RaceOn: the race detector slows the largest search about eightfold and
// has nothing to find in it (one goroutine); make test runs it again
// without -race.
const RaceOn = true
