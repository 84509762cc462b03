package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/internal/rank"
)

// RequestHints is what a front end knows of a request's future and passes
// down with it: the trace fields final, ttl_ms, retention_priority and
// retention_ms ([TraceReader]), or a [HintSource]. The zero value means
// none. [Serve] puts them on the candidate of the request's sequence once it
// releases its blocks (see [kvevict.Hints]); its clock is the replay's, so
// a lease of TTLMs runs from the request's arrival as the replay has it,
// which in a closed loop may be later than its Timestamp.
type RequestHints struct {
	// Final says no later request continues this one (see [Continued]).
	Final bool
	// TTLMs is a lease on the request's blocks until TTLMs milliseconds
	// after its arrival; 0 means none. A later request that reuses the
	// blocks and carries its own TTLMs renews the lease; one without does
	// not.
	TTLMs int64
	// Hard makes the lease hard (kvevict.Hints.HardLease).
	Hard bool
	// Retention is a retention priority from 0 to kvevict.MaxRetention that
	// holds for RetentionMs milliseconds after the arrival; both or
	// neither.
	Retention   uint8
	RetentionMs int64
}

// MaxHintMs is the longest ttl_ms and retention_ms a trace may give: 30
// days.
const MaxHintMs = 30 * 24 * 3600 * 1000

// check reports hints no request may carry.
func (h *RequestHints) check() error {
	switch {
	case h.TTLMs < 0 || h.TTLMs > MaxHintMs:
		return fmt.Errorf(`"ttl_ms" must be 0 to %d, got %d`, MaxHintMs, h.TTLMs)
	case h.RetentionMs < 0 || h.RetentionMs > MaxHintMs:
		return fmt.Errorf(`"retention_ms" must be 0 to %d, got %d`, MaxHintMs, h.RetentionMs)
	case h.Retention > kvevict.MaxRetention:
		return fmt.Errorf(`"retention_priority" must be 0 to %d, got %d`, kvevict.MaxRetention, h.Retention)
	case h.Hard && h.TTLMs == 0:
		return fmt.Errorf("a hard lease needs a ttl")
	}
	return nil
}

// candidateHints returns h as the hints of a candidate whose request
// arrived at pool tick arrival (microseconds).
func (h *RequestHints) candidateHints(arrival int64) kvevict.Hints {
	var k kvevict.Hints
	k.Released = h.Final
	if h.TTLMs > 0 {
		k.LeaseUntil, k.HardLease = arrival+h.TTLMs*1000, h.Hard
	}
	if h.RetentionMs > 0 {
		k.Retention, k.RetainUntil = h.Retention, arrival+h.RetentionMs*1000
	}
	return k
}

// hintClockShift scales a tick clock on the hints' clock, for the
// structures whose ticks count blocks touched or requests (a replay's
// cache, a cluster's trees): 2^12 ticks a microsecond, room for the
// touches of the requests of one microsecond. MaxTimestamp's microseconds
// plus MaxHintMs's, scaled, stay below 2^63.
const hintClockShift = 12

// tickHints is candidateHints for a request that arrived at microsecond
// arrival, its ends on a tick clock (hintClockShift).
func (h *RequestHints) tickHints(arrival int64) kvevict.Hints {
	k := h.candidateHints(arrival)
	if k.LeaseUntil != 0 {
		k.LeaseUntil <<= hintClockShift
	}
	if k.RetainUntil != 0 {
		k.RetainUntil <<= hintClockShift
	}
	return k
}

// tickAt returns r's arrival, its Timestamp in microseconds, on a tick
// clock (hintClockShift), and its hints on that clock: what a replay's
// cache and its tiers take.
func (r *Request) tickAt() (tick int64, hints kvevict.Hints) {
	at := r.Timestamp * 1000
	return at << hintClockShift, r.Hints.tickHints(at)
}

// hinted reports whether a request of w carries hints.
func (w *Workload) hinted() bool {
	for i := range w.Requests {
		if w.Requests[i].Hints != (RequestHints{}) {
			return true
		}
	}
	return false
}

// Continued returns, for each request of w, whether a later request
// continues it: one that arrives later (later in w's order) and whose
// hash_ids begin with this request's hash_ids less its last one, or with
// its one hash when it has one. This is the contract of a trace's
// "final" (a final request is one no later request continues) and of the
// hindsight hint source. O(total hashes).
func Continued(w *Workload) []bool {
	out := make([]bool, len(w.Requests))
	later := make(map[[2]uint64]bool) // (prefix hash, length) of the later requests' prefixes
	for i := len(w.Requests) - 1; i >= 0; i-- {
		hs := w.Requests[i].HashIDs
		if len(hs) == 0 {
			continue
		}
		n := max(len(hs)-1, 1)
		h := uint64(0)
		for j, x := range hs {
			h = rank.Mix64(h ^ rank.Mix64(x+uint64(j)))
			if j+1 == n {
				out[i] = later[[2]uint64{h, uint64(n)}]
			}
		}
		h = 0
		for j, x := range hs {
			h = rank.Mix64(h ^ rank.Mix64(x+uint64(j)))
			later[[2]uint64{h, uint64(j + 1)}] = true
		}
	}
	return out
}

// A HintSource is where compare's and cluster's -hints take a row's
// hints from; see [ParseHintSources].
type HintSource struct {
	// Kind is "none", "trace", "hindsight" or "ttl".
	Kind string
	// Precision, Recall and Seed: hindsight's labels flipped at random to
	// that precision and recall of the final labels.
	Precision, Recall float64
	Seed              uint64
	// TTL and Hard: ttl's lease on every request.
	TTL  time.Duration
	Hard bool
}

// String returns the source as ParseHintSources normalises it.
func (s HintSource) String() string {
	switch s.Kind {
	case "hindsight":
		if s.Precision == 1 && s.Recall == 1 && s.Seed == 1 {
			return "hindsight"
		}
		return fmt.Sprintf("hindsight:precision=%s:recall=%s:seed=%d", fmtFloat(s.Precision), fmtFloat(s.Recall), s.Seed)
	case "ttl":
		if s.Hard {
			return "ttl=" + s.TTL.String() + ":hard"
		}
		return "ttl=" + s.TTL.String()
	}
	return s.Kind
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// ParseHintSources reads a comma-separated list of hint sources, without
// spaces, each once: none; trace (the hints the requests carry);
// hindsight, with optional :precision=P:recall=R:seed=S (P and R in (0, 1],
// default 1, seed default 1); ttl=DUR with optional :hard (DUR a Go
// duration, at most 30 days). An error names what it refused.
func ParseHintSources(list string) ([]HintSource, error) {
	var out []HintSource
	seen := map[string]bool{}
	for _, item := range strings.Split(list, ",") {
		s, err := parseHintSource(item)
		if err != nil {
			return nil, err
		}
		if seen[s.String()] {
			return nil, fmt.Errorf("hint source %s given twice", s)
		}
		seen[s.String()] = true
		out = append(out, s)
	}
	return out, nil
}

func parseHintSource(item string) (HintSource, error) {
	parts := strings.Split(item, ":")
	head := parts[0]
	switch {
	case head == "none" || head == "trace":
		if len(parts) > 1 {
			return HintSource{}, fmt.Errorf("hint source %s takes no parameter, got %q", head, item)
		}
		return HintSource{Kind: head}, nil
	case head == "hindsight":
		s := HintSource{Kind: head, Precision: 1, Recall: 1, Seed: 1}
		for _, p := range parts[1:] {
			name, value, ok := strings.Cut(p, "=")
			if !ok {
				return HintSource{}, fmt.Errorf("hindsight: parameter %q is not name=value", p)
			}
			switch name {
			case "precision", "recall":
				f, err := strconv.ParseFloat(value, 64)
				if err != nil || !(f > 0 && f <= 1) {
					return HintSource{}, fmt.Errorf("hindsight: %s must be a number in (0, 1], got %q", name, value)
				}
				if name == "precision" {
					s.Precision = f
				} else {
					s.Recall = f
				}
			case "seed":
				n, err := strconv.ParseUint(value, 10, 64)
				if err != nil {
					return HintSource{}, fmt.Errorf("hindsight: seed must be a non-negative integer, got %q", value)
				}
				s.Seed = n
			default:
				return HintSource{}, fmt.Errorf("hindsight: unknown parameter %q (known: precision, recall, seed)", name)
			}
		}
		return s, nil
	case strings.HasPrefix(head, "ttl="):
		d, err := time.ParseDuration(strings.TrimPrefix(head, "ttl="))
		if err != nil || d <= 0 || d > MaxHintMs*time.Millisecond || d%time.Millisecond != 0 {
			return HintSource{}, fmt.Errorf("ttl: want a duration of whole milliseconds from 1ms to 720h, got %q", strings.TrimPrefix(head, "ttl="))
		}
		s := HintSource{Kind: "ttl", TTL: d}
		for _, p := range parts[1:] {
			if p != "hard" {
				return HintSource{}, fmt.Errorf("ttl: unknown parameter %q (known: hard)", p)
			}
			s.Hard = true
		}
		return s, nil
	}
	return HintSource{}, fmt.Errorf("unknown hint source %q (known: none, trace, hindsight[:precision=P:recall=R:seed=S], ttl=DUR[:hard])", item)
}

// Apply returns w with its requests' hints as source s gives them: none
// clears them, trace keeps them, hindsight sets Final alone from
// [Continued] (flipped to its precision and recall), ttl sets a lease
// alone. w is not changed; the hashes are shared. It returns an error for
// a precision that the workload's labels cannot reach at that recall (too
// few requests are continued to make that many false finals).
func (s HintSource) Apply(w *Workload) (*Workload, error) {
	out := *w
	out.Requests = make([]Request, len(w.Requests))
	copy(out.Requests, w.Requests)
	switch s.Kind {
	case "trace":
		return &out, nil
	case "hindsight":
		final, err := hindsight(Continued(w), s.Precision, s.Recall, s.Seed)
		if err != nil {
			return nil, fmt.Errorf("%s on %s: %w", s, w.Name, err)
		}
		for i := range out.Requests {
			out.Requests[i].Hints = RequestHints{Final: final[i]}
		}
	case "ttl":
		for i := range out.Requests {
			out.Requests[i].Hints = RequestHints{TTLMs: s.TTL.Milliseconds(), Hard: s.Hard}
		}
	default:
		for i := range out.Requests {
			out.Requests[i].Hints = RequestHints{}
		}
	}
	return &out, nil
}

// hindsight returns final labels (not continued) at precision and recall:
// round(recall x finals) of the true finals, chosen at random with seed,
// and as many of the others as make that precision, or an error if there
// are not that many.
func hindsight(continued []bool, precision, recall float64, seed uint64) ([]bool, error) {
	var finals, others []int
	for i, c := range continued {
		if c {
			others = append(others, i)
		} else {
			finals = append(finals, i)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x68696e7473))
	rng.Shuffle(len(finals), func(i, j int) { finals[i], finals[j] = finals[j], finals[i] })
	rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	tp := int(math.Round(recall * float64(len(finals))))
	fp := int(math.Round(float64(tp) * (1 - precision) / precision))
	if fp > len(others) {
		return nil, fmt.Errorf("precision %s at recall %s needs %d requests labelled final wrongly, and only %d of %d are continued", fmtFloat(precision), fmtFloat(recall), fp, len(others), len(continued))
	}
	out := make([]bool, len(continued))
	for _, i := range finals[:tp] {
		out[i] = true
	}
	for _, i := range others[:fp] {
		out[i] = true
	}
	return out, nil
}
