//go:build !race

package waitmodel

const RaceOn = false
