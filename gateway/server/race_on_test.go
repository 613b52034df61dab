//go:build race

package server_test

// raceEnabled: this test binary has the race detector, which makes the soak ~10x slower.
const raceEnabled = true

// soakCIRace is the soak's CI count under -race.
const soakCIRace = 500
