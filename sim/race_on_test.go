//go:build race

package sim

// raceEnabled says the race detector is on. The simulator runs on one
// goroutine, so long replays check numbers, not concurrency: they run
// their -short subset then.
const raceEnabled = true
