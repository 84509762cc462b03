//go:build race

package kvevict

// raceEnabled says the race detector is on. Single-goroutine property tests
// run fewer rounds then: CI runs them in full without it.
const raceEnabled = true
