//go:build !race

package waitmodel_test

const raceOn = false
