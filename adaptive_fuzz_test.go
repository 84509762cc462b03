package kvevict

import "testing"

// FuzzAdaptive drives the adaptive strategies with arbitrary operations:
// accesses and selections over candidates with any mix of blocks, pins,
// references and partial eviction, against a small cache. After every
// operation the history's invariants must hold; every selection must
// satisfy the contract or fail atomically with ErrInsufficientBlocks.
func FuzzAdaptive(f *testing.F) {
	f.Add(byte(0), byte(3), []byte{1, 5, 1, 6, 0, 3, 5, 1, 0, 6, 2, 0, 2})
	f.Add(byte(1), byte(9), []byte{0, 20, 1, 0x81, 1, 2, 0x93, 1, 3, 3, 0, 4, 0xff, 2, 9})
	f.Add(byte(2), byte(0), []byte{4, 4, 4, 4, 0, 8, 1, 1, 1, 2, 1, 1, 3, 1, 1, 5})
	f.Fuzz(func(t *testing.T, strategy, capacity byte, data []byte) {
		ops(t, adaptiveStrategies[int(strategy)%len(adaptiveStrategies)], 1+int(capacity%32), data)
	})
}
