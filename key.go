package kvevict

//go:generate go run ./internal/rank/keygen

import (
	"github.com/sagellm/kvevict/internal/options"
	"github.com/sagellm/kvevict/internal/rank"
)

// keyParams are a key strategy's parameters and the current call's tick,
// by which a Policy and an Index rank candidates. The keys themselves are
// package rank's, which package prefix's tree ranks its blocks by too;
// keyOf and fieldsOf (key_gen.go, which keygen writes) hand them a
// candidate's fields.
type keyParams struct {
	p       rank.Params
	kind    rank.Kind
	usesNow bool  // the key reads now
	now     int64 // the call's current tick: the largest LastAccess among its candidates
	auto    *auto // Auto's history, which its key reads; nil for the other strategies
}

func newKeyParams(kind rank.Kind, cfg *options.Config) keyParams {
	p := rank.NewParams(kind, &cfg.Config)
	return keyParams{p: p, kind: kind, usesNow: p.UsesNow() || kind == rank.KindAuto}
}

// begin starts a selection over cands: the tick, if the key reads it, and
// Auto's horizon.
func (kp *keyParams) begin(cands []Candidate) {
	if kp.usesNow {
		kp.now = maxLastAccess(cands)
	}
	if kp.auto != nil {
		kp.auto.begin(kp.now, evictableBlocks(cands))
	}
}

// otherKey is keyOf through rank's one dispatch over the strategies, or
// Auto's history.
func (kp *keyParams) otherKey(c *Candidate) rank.Key {
	if kp.auto != nil {
		return kp.auto.keyOfSeen(c)
	}
	f := fieldsOf(c)
	return kp.p.Key(&f, kp.now)
}

// evictableBlocks returns the blocks of the evictable candidates of cands,
// the pool whose turnover Auto measures. O(n).
func evictableBlocks(cands []Candidate) int {
	n := 0
	for i := range cands {
		if cands[i].evictable() {
			n += len(cands[i].Blocks)
		}
	}
	return n
}
