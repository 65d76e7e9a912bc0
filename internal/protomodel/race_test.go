//go:build race

package protomodel

// raceOn: the race detector slows a search about twentyfold and has nothing
// to find in it (the search is one goroutine), so under it the tests skip
// their searches, but item 1's (skipUnderRace).
const raceOn = true
