package kvevents

import "github.com/sagellm/kvevict/tier"

// FromTier returns the vLLM event of a [tier.Hierarchy] event: a
// [*BlockStored] for [tier.Stored], a [*BlockRemoved] for [tier.Removed],
// with the tier's medium ("GPU", "CPU" or "STORAGE", as vLLM's offloading
// names them), nil for any other kind. A tier's stores are not a chain
// under a parent (a host tier stores the GPU's victims, in eviction
// order), so ParentBlockHash is nil, as vLLM's offloading sends it.
// blockSize is the tokens per block. O(len(e.Hashes)).
func FromTier(e tier.Event, blockSize int64) Event {
	medium := string(e.Medium)
	switch e.Kind {
	case tier.Stored:
		return &BlockStored{BlockHashes: IntHashes(e.Hashes), TokenIDs: []int64{}, BlockSize: blockSize, Medium: &medium}
	case tier.Removed:
		return &BlockRemoved{BlockHashes: IntHashes(e.Hashes), Medium: &medium}
	}
	return nil
}
