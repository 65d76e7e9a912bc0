//go:build !race

package protomodel

const raceOn = false
