//go:build !race

package redlock_test

const raceEnabled = false
