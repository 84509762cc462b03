//go:build race

package tier

// raceEnabled says the race detector is on. The long replays skip then:
// they check numbers, not concurrency, and .ci/run runs them once without
// the detector.
const raceEnabled = true
