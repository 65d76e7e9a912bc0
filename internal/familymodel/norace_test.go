//go:build !race

package familymodel_test

const raceOn = false
