package kvevict

import "github.com/sagellm/kvevict/internal/rank"

// keyParams are a key strategy's parameters and the current call's tick,
// by which a Policy and an Index rank candidates. The keys themselves are
// package rank's, which package prefix's tree ranks its blocks by too; the
// functions below hand them a candidate's fields.
type keyParams struct {
	p       rank.Params
	kind    rank.Kind
	usesNow bool  // the key reads now
	now     int64 // the call's current tick: the largest LastAccess among its candidates
}

func newKeyParams(kind rank.Kind, cfg *rank.Config) keyParams {
	p := rank.NewParams(kind, cfg)
	return keyParams{p: p, kind: kind, usesNow: p.UsesNow()}
}

// keyOf returns the strategy's key for an evictable candidate: a pure
// function of the candidate and the parameters. O(1).
func (kp *keyParams) keyOf(c *Candidate) rank.Key {
	if kp.kind == rank.KindLRU {
		return rank.LRUKey(c.LastAccess) // inlined: the most used strategy pays no call
	}
	return kp.otherKey(c)
}

// otherKey is keyOf through rank's one dispatch over the strategies.
func (kp *keyParams) otherKey(c *Candidate) rank.Key {
	f := fieldsOf(c)
	return kp.p.Key(&f, kp.now)
}

// fieldsOf returns what a key reads of c.
func fieldsOf(c *Candidate) rank.Fields {
	return rank.Fields{
		LastAccess:        c.LastAccess,
		CreatedAt:         c.CreatedAt,
		AccessCount:       c.AccessCount,
		Priority:          int8(c.Priority),
		Blocks:            len(c.Blocks),
		EstimatedLifetime: c.EstimatedLifetime,
		SeqLen:            c.SeqLen,
		MaxLen:            c.MaxLen,
	}
}
