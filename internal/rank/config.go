package rank

import "time"

// Config is what parameterizes the mechanisms: the key strategies' keys
// ([NewParams]) and the size of an adaptive strategy's history and of its
// memory of evicted candidates. kvevict's options resolve into it, for its
// own constructors and for package prefix's tree; which option sets which
// field, its default and its valid values are kvevict's.
type Config struct {
	TickDuration    time.Duration // one tick of the candidates' clock; > 0
	LFUHalfLife     time.Duration // 0: no decay
	SLRUThreshold   int           // accesses that make a candidate protected
	CostAlpha       float64       // FrequencyCost's exponent on the block count
	CostDecay       float64       // FrequencyCost's decay per second of idle time
	LifetimeHorizon time.Duration // Predictive's lifetime when none is known
	Capacity        int           // the candidates an adaptive strategy's history holds
	GhostCap        int           // the evicted candidates an adaptive strategy remembers
	Below           int           // the blocks of an exclusive tier below the pool, which Auto's miniature caches simulate; 0: none
}
