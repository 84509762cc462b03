package rank

// Kind is a ranking mechanism: a key over a candidate's fields, or, for
// the adaptive ones, a history of its own. Each of kvevict's strategies
// ranks by one.
type Kind uint8

// The kinds, one per strategy.
const (
	KindLRU Kind = iota
	KindMRU
	KindFIFO
	KindFILO
	KindLFU
	KindSLRU
	KindQoS
	KindPredictive
	KindCost
	KindARC
	KindS3FIFO
	KindSIEVE
	KindAuto
)

// Adaptive reports whether k learns from a history of accesses it keeps,
// sized by a capacity (ARC, S3-FIFO, SIEVE, Auto), rather than ranking by
// a candidate's fields alone.
func (k Kind) Adaptive() bool { return k >= KindARC }

// Scored reports whether k ranks a candidate by a score of its own (a key,
// or Auto's score), which a structure of blocks can keep per block, rather
// than by where lists of sequences hold it (ARC, S3-FIFO, SIEVE).
func (k Kind) Scored() bool { return !k.Adaptive() || k == KindAuto }
