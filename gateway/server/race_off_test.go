//go:build !race

package server_test

const raceEnabled = false

const soakCIRace = soakCI

const soakRaceRSSSlack = 0
