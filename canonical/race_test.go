//go:build race

package canonical

// raceEnabled is true when the tests run with -race, under which sync.Pool drops items at random.
const raceEnabled = true
