//go:build race

package main

// raceEnabled says the race detector is on. The tests that measure a
// process's memory skip then: the detector multiplies it, and .ci/run
// runs them once without the detector.
const raceEnabled = true
