package kvevents

import (
	"reflect"
	"testing"

	"github.com/sagellm/kvevict/prefix"
)

// TestFromPrefix checks each case of FromPrefix's doc: a stored chain
// keeps its parent (or has none from the root), the caller's block size
// and medium, and empty (not None) token ids; a removal keeps its order;
// a kind it does not know gives nil, which a caller must skip.
func TestFromPrefix(t *testing.T) {
	gpu := MediumGPU
	for _, tc := range []struct {
		name   string
		e      prefix.Event
		medium *string
		want   Event
	}{
		{"stored under a parent", prefix.Event{Kind: prefix.Stored, Hashes: []uint64{3, 4}, Parent: 2, HasParent: true}, &gpu,
			&BlockStored{BlockHashes: IntHashes([]uint64{3, 4}), ParentBlockHash: ptr(IntHash(2)), TokenIDs: []int64{}, BlockSize: 16, Medium: &gpu}},
		{"stored from the root", prefix.Event{Kind: prefix.Stored, Hashes: []uint64{1 << 63}}, nil,
			&BlockStored{BlockHashes: IntHashes([]uint64{1 << 63}), TokenIDs: []int64{}, BlockSize: 16}},
		{"removed", prefix.Event{Kind: prefix.Removed, Hashes: []uint64{5, 1}, Parent: 9, HasParent: true}, &gpu,
			&BlockRemoved{BlockHashes: IntHashes([]uint64{5, 1}), Medium: &gpu}},
		{"unknown kind", prefix.Event{Hashes: []uint64{1}}, &gpu, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := FromPrefix(tc.e, 16, tc.medium)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
			if s, ok := got.(*BlockStored); ok && s.TokenIDs == nil {
				t.Error("TokenIDs nil, want empty: vLLM's token_ids is a list, never None")
			}
		})
	}
}
