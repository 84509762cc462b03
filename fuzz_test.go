package kvevict_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/sagellm/kvevict"
)

// candidateBytes is how many fuzz bytes make one candidate.
const candidateBytes = 7

// decodeCandidates turns fuzz bytes into candidates. IDs come from one byte,
// so duplicates happen; counts are signed, so invalid values happen.
func decodeCandidates(data []byte) []kvevict.Candidate {
	var cands []kvevict.Candidate
	for len(data) >= candidateBytes && len(cands) < 256 {
		b := data[:candidateBytes]
		data = data[candidateBytes:]
		flags := b[5]
		c := kvevict.Candidate{
			ID:           uint64(b[0] % 64),
			Blocks:       blocks(len(cands)*8, int(b[1]%8)),
			LastAccess:   int64(int8(b[2])),
			CreatedAt:    int64(b[3] >> 4),
			AccessCount:  int(int8(b[4])) / 16,
			Pinned:       flags&1 != 0,
			AllowPartial: flags&2 != 0,
			RefCount:     int(flags>>2&3) - 1, // -1, 0, 1 or 2
			Priority:     kvevict.Priority(flags >> 4 & 3),
			MaxLen:       int(b[6] >> 4),
			SeqLen:       int(b[6] & 15),
		}
		if flags&64 != 0 {
			c.EstimatedLifetime = time.Duration(int8(b[3])) * time.Millisecond
		}
		cands = append(cands, c)
	}
	return cands
}

func FuzzSelectVictims(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 4, 6, 2, 3, 1, 0, 1, 4, 0}, 3, uint8(0))
	f.Add([]byte{1, 7, 3, 4, 5, 6, 6, 2, 3, 1, 0, 1, 5, 0, 3, 1, 9, 9, 9, 64, 200}, 5, uint8(7))
	f.Add([]byte{1, 1, 1, 1, 1, 4, 0, 1, 1, 1, 1, 1, 4, 0}, 1, uint8(2)) // duplicate IDs
	f.Add([]byte{9, 3, 0, 0, 240, 0, 0}, 2, uint8(4))                    // negative count, refcount
	f.Add([]byte{}, -1, uint8(8))
	strategies := kvevict.Strategies()
	f.Fuzz(func(t *testing.T, data []byte, required int, pick uint8) {
		s := strategies[int(pick)%len(strategies)]
		cands := decodeCandidates(data)
		opts := []kvevict.Option{kvevict.WithTickDuration(time.Millisecond)}
		if s == kvevict.FrequencyCost {
			opts = append(opts, kvevict.WithCostDecay(0.5))
		}
		p := mustNew(t, s, opts...)
		res, err := p.SelectVictims(cands, required)

		ids := map[uint64]bool{}
		invalid, available := false, 0
		for _, c := range cands {
			invalid = invalid || ids[c.ID] || c.RefCount < 0 || c.AccessCount < 0 || c.EstimatedLifetime < 0
			ids[c.ID] = true
			if !c.Pinned && c.RefCount == 0 {
				available += len(c.Blocks)
			}
		}
		switch {
		case required < 0:
			if !errors.Is(err, kvevict.ErrInvalidArgument) {
				t.Fatalf("required %d: err = %v", required, err)
			}
		case invalid:
			if !errors.Is(err, kvevict.ErrInvalidCandidate) {
				t.Fatalf("invalid candidates: err = %v", err)
			}
		case available < required:
			if !errors.Is(err, kvevict.ErrInsufficientBlocks) {
				t.Fatalf("%d available < %d required: err = %v", available, required, err)
			}
		default:
			if err != nil {
				t.Fatalf("valid input: %v", err)
			}
			checkResult(t, cands, required, res)
			if !s.Adaptive() {
				want, _ := referenceSelect(t, s, opts, cands, required)
				if !reflect.DeepEqual(res.Victims, want) && len(want)+len(res.Victims) > 0 {
					t.Fatalf("%s: got %+v, reference %+v", s, res.Victims, want)
				}
			}
		}
		if err != nil {
			if m := p.Metrics(); m.Selections != 0 || m.EvictedBlocks != 0 {
				t.Fatalf("failed selection counted: %+v", m)
			}
		}
	})
}
