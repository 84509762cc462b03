package main

// The -tier flag of compare, cluster and publish: a tier below the GPU.

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/tier"
)

// tierSpec is one -tier flag: a tier below the GPU. Its capacity is blocks,
// or times the GPU's capacity when scaled (-tier cpu:4x:lru), so that one
// flag serves every -capacity.
type tierSpec struct {
	medium   tier.Medium
	blocks   int
	times    int // > 0: the capacity is times x the GPU's
	strategy kvevict.Strategy
}

// capacity is the tier's blocks beside a GPU of gpu blocks.
func (s tierSpec) capacity(gpu int) int {
	if s.times > 0 {
		return s.times * gpu
	}
	return s.blocks
}

// String is the flag as parseTier reads it.
func (s tierSpec) String() string {
	size := strconv.Itoa(s.blocks)
	if s.times > 0 {
		size = strconv.Itoa(s.times) + "x"
	}
	return strings.ToLower(string(s.medium)) + ":" + size + ":" + string(s.strategy)
}

// A tier keeps its blocks in an Index, which holds at most
// math.MaxInt32 of them; maxTierTimes keeps a product with the GPU's
// capacity far from overflow, and checkTiers bounds the product itself.
const (
	maxTierBlocks = math.MaxInt32
	maxTierTimes  = 1 << 16
)

// tierList is the repeatable -tier flag.
type tierList []tierSpec

func (l *tierList) String() string {
	parts := make([]string, len(*l))
	for i, s := range *l {
		parts[i] = s.String()
	}
	return strings.Join(parts, " ")
}

func (l *tierList) Set(v string) error {
	s, err := parseTier(v)
	if err != nil {
		return err
	}
	*l = append(*l, s)
	return nil
}

// parseTier reads MEDIUM:BLOCKS:STRATEGY, BLOCKS a count or Nx.
func parseTier(v string) (tierSpec, error) {
	parts := strings.Split(v, ":")
	if len(parts) != 3 {
		return tierSpec{}, fmt.Errorf("want MEDIUM:BLOCKS:STRATEGY, such as cpu:10000:lru or cpu:4x:lru, got %q", v)
	}
	m, err := tier.ParseMedium(strings.TrimSpace(parts[0]))
	if err != nil {
		return tierSpec{}, err
	}
	if m == tier.GPU {
		return tierSpec{}, fmt.Errorf("-tier names the tiers below the GPU, whose size is -capacity and whose strategies are -strategies")
	}
	s := tierSpec{medium: m}
	size := strings.TrimSpace(parts[1])
	if n, ok := strings.CutSuffix(size, "x"); ok {
		s.times, err = strconv.Atoi(n)
		if err != nil || s.times < 1 || s.times > maxTierTimes {
			return tierSpec{}, fmt.Errorf("tier %q: a size in times the GPU's must be a whole number from 1 to %d, such as 4x", v, maxTierTimes)
		}
	} else if s.blocks, err = strconv.Atoi(size); err != nil || s.blocks < 1 || s.blocks > maxTierBlocks {
		return tierSpec{}, fmt.Errorf("tier %q: the size must be 1 to %d blocks (or Nx the GPU's)", v, maxTierBlocks)
	}
	s.strategy, err = kvevict.ParseStrategy(strings.TrimSpace(parts[2]))
	if err != nil {
		return tierSpec{}, fmt.Errorf("tier %q: %w", v, err)
	}
	if _, err := kvevict.NewIndex(s.strategy); err != nil {
		return tierSpec{}, fmt.Errorf("tier %q: a tier below the GPU keeps its blocks in an Index: %w", v, err)
	}
	return s, nil
}

// checkTierOrder refuses tiers listed out of the hierarchy's order.
func checkTierOrder(l tierList) error {
	for i := 1; i < len(l); i++ {
		if l[i].medium == tier.CPU && l[i-1].medium == tier.Storage {
			return fmt.Errorf("-tier %s comes after -tier %s: list the tiers from the GPU down", l[i], l[i-1])
		}
	}
	return nil
}
