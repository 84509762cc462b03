//go:build race

package main

// raceEnabled says the race detector is on. The tests that measure a
// process's memory skip then, since the detector multiplies it, and long
// tests keep the part where goroutines meet: .ci/run runs them all in full
// once without the detector.
const raceEnabled = true
