//go:build race

package prefix

// raceEnabled says the race detector is on. Long tests that run on one
// goroutine skip then: the detector finds nothing in them, and .ci/run runs
// them without it.
const raceEnabled = true
