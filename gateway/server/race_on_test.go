//go:build race

package server_test

// raceEnabled: this test binary has the race detector, which makes the soak ~10x slower.
const raceEnabled = true

// soakCIRace is the soak's CI count under -race.
const soakCIRace = 500

// soakRaceRSSSlack widens the soak's RSS check under -race: the race detector's shadow memory
// (several times each heap page it has seen) and its per-goroutine state grow with the
// addresses the run touches and are not handed back; 300-500 request runs grew RSS 30-72 MiB
// from ~900 MiB after warm-up, against 0 or less without -race.
const soakRaceRSSSlack = 64 << 20
