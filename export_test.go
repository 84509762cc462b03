package kvevict

// RaceEnabled is raceEnabled for the external tests.
const RaceEnabled = raceEnabled
