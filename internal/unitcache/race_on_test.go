//go:build race

package unitcache_test

// raceEnabled says the race detector is on; long replays skip then, since
// they check numbers, not concurrency.
const raceEnabled = true
