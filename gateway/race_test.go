//go:build race

package gateway_test

// raceEnabled is true when the tests run with -race.
const raceEnabled = true
