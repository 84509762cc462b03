//go:build !race

package unitcache_test

// raceEnabled says the race detector is on; the long replays then run a
// prefix of their traces, since they check numbers, not concurrency.
const raceEnabled = false
