//go:build !race

package kvevents

// raceEnabled says the race detector is on. Tests that move more bytes
// than it lets through in their deadlines skip then: .ci/run runs them
// without it.
const raceEnabled = false
