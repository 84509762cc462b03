package kvevents

import "github.com/sagellm/kvevict/prefix"

// MediumGPU is vLLM's medium for blocks in GPU memory.
const MediumGPU = "GPU"

// FromPrefix returns the vLLM event of a [prefix.Tree] event: a
// [*BlockStored] with its parent hash for [prefix.Stored], a
// [*BlockRemoved] for [prefix.Removed], nil for any other kind. blockSize
// is the pool's tokens per block and medium where its blocks live (nil for
// None; vLLM's engines send [MediumGPU]). The tree knows no token ids, so
// TokenIDs is empty. O(len(e.Hashes)).
func FromPrefix(e prefix.Event, blockSize int64, medium *string) Event {
	switch e.Kind {
	case prefix.Stored:
		s := &BlockStored{BlockHashes: IntHashes(e.Hashes), TokenIDs: []int64{}, BlockSize: blockSize, Medium: medium}
		if e.HasParent {
			p := IntHash(e.Parent)
			s.ParentBlockHash = &p
		}
		return s
	case prefix.Removed:
		return &BlockRemoved{BlockHashes: IntHashes(e.Hashes), Medium: medium}
	}
	return nil
}
