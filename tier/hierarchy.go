package tier

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sagellm/kvevict"
	"github.com/sagellm/kvevict/internal/idmap"
	"github.com/sagellm/kvevict/internal/sizing"
)

// Write says when a tier below the GPU receives a block.
type Write uint8

// The write policies.
const (
	// WriteThrough stores every block a request used in every tier below
	// the GPU after the request, as vLLM's offloading connector and
	// Dynamo's KVBM do; a lower tier's victims are dropped.
	WriteThrough Write = iota + 1
	// WriteSelective is WriteThrough for the blocks requested at least
	// Config.Threshold times (vLLM's store_threshold, SGLang's
	// write_through_selective, KVBM's second sighting).
	WriteSelective
	// WriteBack stores a block in the tier below when the tier above
	// evicts it (a demotion, SGLang's write_back); the last tier's victims
	// are dropped.
	WriteBack
	// WriteVLLM is vLLM's OffloadingConnector as vLLM's main held it in
	// mid-May 2026, before PR #51787: one host tier, run by vLLM's
	// CPUOffloadingManager with its own lru or arc policy (Level.Strategy
	// kvevict.LRU or kvevict.ARC names which), called in its scheduler's
	// order. For each request: the host touches all its keys; the run
	// after the GPU's is looked up and loaded; the GPU admits the request;
	// the host is offered the keys from the end of the loaded run (from
	// the first when nothing was loaded), protected from the eviction that
	// makes room for them, and, when it stores any, touches all the keys
	// again. A store that cannot find room fails whole: vLLM's ARC does
	// not fall back to T1 once T1 is under its target.
	WriteVLLM
)

// String returns the policy's name as ParseWrite reads it, without the
// threshold.
func (w Write) String() string {
	switch w {
	case WriteThrough:
		return "through"
	case WriteSelective:
		return "selective"
	case WriteBack:
		return "back"
	case WriteVLLM:
		return "vllm"
	}
	return "unknown"
}

// ParseWrite reads a write policy as the command's -write flag takes it:
// "through", "selective=N" (N >= 1 requests), "back" or "vllm". It returns
// the policy and, for selective, its threshold.
func ParseWrite(s string) (w Write, threshold int, err error) {
	name, arg, hasArg := strings.Cut(s, "=")
	switch {
	case name == "through" && !hasArg:
		return WriteThrough, 0, nil
	case name == "back" && !hasArg:
		return WriteBack, 0, nil
	case name == "vllm" && !hasArg:
		return WriteVLLM, 0, nil
	case name == "selective" && hasArg:
		n, err := strconv.Atoi(arg)
		if err != nil || n < 1 {
			return 0, 0, fmt.Errorf("tier: write policy %q: the threshold must be a whole number of requests >= 1", s)
		}
		return WriteSelective, n, nil
	}
	return 0, 0, fmt.Errorf("tier: unknown write policy %q (want through, selective=N, back or vllm)", s)
}

// Level configures one tier of a [Hierarchy].
type Level struct {
	Medium Medium
	// Capacity is the tier's size in blocks, at least 1.
	Capacity int
	// Strategy and Options choose the tier's victims, as [NewCache] takes
	// them. Strategy is named in any spelling [kvevict.ParseStrategy]
	// accepts, and [Hierarchy.Stats] names it as ParseStrategy returns it.
	Strategy kvevict.Strategy
	Options  []kvevict.Option
}

// Config configures a [Hierarchy].
type Config struct {
	// Levels are the tiers, top first: one GPU tier, then host memory
	// (CPU) and storage tiers in that order.
	Levels []Level
	// Write is when a lower tier receives a block; WriteThrough if zero.
	Write Write
	// Threshold is how many requests must reference a block before
	// WriteSelective stores it; unused by the other policies.
	Threshold int
	// Exclusive keeps each block on one tier at a time: a load moves it
	// up and leaves no copy below (a victim cache). It needs WriteBack:
	// the other policies copy blocks down on purpose. Inclusive, the
	// default, leaves a loaded block's copy where it was.
	Exclusive bool
	// Events, if set, receives an [Event] for every batch of blocks that
	// enter or leave a tier, in the order of the changes, as an engine
	// makes them: on each tier the victims leave before the blocks that
	// need their room enter, and a block demoted under WriteBack is stored
	// below before it leaves the tier above (copied, then freed).
	Events func(Event)
	// ExternalGPU says the GPU's pool is the caller's own (a prefix tree,
	// an engine's allocator), not the hierarchy's; Levels[0] gives its
	// capacity, for Stats and for what an exclusive hierarchy keeps. The
	// caller finds the request's run on its pool and passes it to
	// [Hierarchy.LookupBelow], admits the blocks to its pool in place of
	// [Hierarchy.Admit], and passes the pool's victims to
	// [Hierarchy.Demote]. The GPU's events are its pool's to emit. Not with
	// WriteVLLM, which replays vLLM's own GPU.
	ExternalGPU bool
}

// selectiveTracked is how many blocks WriteSelective counts requests for,
// the least recent forgotten first: vLLM's store_threshold tracker keeps
// 64,000 keys.
const selectiveTracked = 64_000

// ErrConfig is matched (errors.Is) by every error of [New] about its
// configuration.
var ErrConfig = errors.New("tier: invalid configuration")

// validate checks c and names each tier's strategy as
// [kvevict.ParseStrategy] returns it, the one spelling that New and the
// tiers compare with: c.Levels must be New's own copy.
func (c *Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	if len(c.Levels) == 0 {
		return bad("no tiers")
	}
	prev := -1
	for i, l := range c.Levels {
		r := l.Medium.rank()
		switch {
		case r < 0:
			return bad("tier %d: unknown medium %q", i, l.Medium)
		case i == 0 && l.Medium != GPU:
			return bad("the first tier is %s; the hierarchy starts at the GPU", l.Medium)
		case i > 0 && l.Medium == GPU:
			return bad("tier %d is a second GPU tier", i)
		case r < prev:
			return bad("tier %d (%s) is above tier %d (%s): list the tiers from the GPU down", i, l.Medium, i-1, c.Levels[i-1].Medium)
		case l.Capacity < 1:
			return bad("tier %d (%s): capacity must be at least 1 block, got %d", i, l.Medium, l.Capacity)
		}
		s, err := kvevict.ParseStrategy(string(l.Strategy))
		if err != nil {
			return bad("tier %d (%s): %v", i, l.Medium, err)
		}
		c.Levels[i].Strategy = s
		prev = r
	}
	switch c.Write {
	case 0, WriteThrough, WriteBack, WriteVLLM:
		if c.Threshold != 0 {
			return bad("a threshold of %d requests applies to selective writes only", c.Threshold)
		}
	case WriteSelective:
		if c.Threshold < 1 {
			return bad("selective writes need a threshold of at least 1 request, got %d", c.Threshold)
		}
	default:
		return bad("unknown write policy %d", c.Write)
	}
	if c.Write == WriteVLLM {
		if len(c.Levels) != 2 || c.Levels[1].Medium != CPU {
			return bad("vLLM's offloading has one tier below the GPU, on the host (CPU)")
		}
		if s := c.Levels[1].Strategy; s != kvevict.LRU && s != kvevict.ARC {
			return bad("vLLM's host tier runs its own lru or arc policy, not %s", s)
		}
	}
	if c.ExternalGPU && c.Write == WriteVLLM {
		return bad("vLLM's offloading runs vLLM's own GPU pool, not the caller's")
	}
	if c.Exclusive && c.Write != WriteBack {
		return bad("exclusive tiers need write-back: %s writes copy blocks down on purpose", c.write())
	}
	return nil
}

func (c *Config) write() Write {
	if c.Write == 0 {
		return WriteThrough
	}
	return c.Write
}

// Stats counts what happened on one tier, in blocks.
type Stats struct {
	Medium   Medium
	Capacity int
	Strategy kvevict.Strategy
	// Hits are blocks a request found on this tier, continuing the run
	// found above it: on the GPU its prefix hits, below the blocks loaded
	// from it.
	Hits int64
	// Stored are blocks that entered the tier: on the GPU the blocks a
	// request loaded or computed, below the blocks written to it.
	Stored int64
	// Evicted are blocks the tier's strategy chose as victims.
	Evicted int64
	// Failed are blocks offered to the tier that it did not store: a
	// store larger than the tier.
	Failed int64
}

// Match is where a request's blocks are: a run on each tier, each run
// continuing the one above it, then the misses.
type Match struct {
	// Runs[i] is how many blocks tier i holds after the runs above it.
	Runs []int
	// Misses are the request's blocks after the runs, to be computed.
	Misses int
}

// Hits returns the blocks found on any tier.
func (m *Match) Hits() int {
	n := 0
	for _, r := range m.Runs {
		n += r
	}
	return n
}

// Hierarchy is a KV cache across tiers: the GPU's blocks, then host memory
// and storage, each tier a [Cache] of its capacity and strategy, keyed by
// block hash. An engine serves a request with [Hierarchy.Lookup], then
// [Hierarchy.Load] of the runs found below the GPU, [Hierarchy.Admit] of
// the request's blocks on the GPU (evicting under pressure, demoting under
// WriteBack) and [Hierarchy.Offer] of its blocks to the tiers below;
// [Hierarchy.Request] does all four. Every transfer completes within the
// call that starts it. Not safe for concurrent use.
type Hierarchy struct {
	levels    []*Cache
	stats     []Stats
	write     Write
	threshold int
	exclusive bool
	external  bool // ExternalGPU: levels[0] is nil
	events    func(Event)
	seen      *Cache   // WriteSelective's request counts, bounded
	vllm      *vllmCPU // WriteVLLM's host tier, in place of levels[1]

	match   Match
	offered []uint64 // scratch: the blocks Offer stores
	kept    []uint64 // scratch: the blocks Admit will keep on the GPU
	seenIDs idmap.Map[struct{}]
	evicted [][]uint64 // per tier, its victims since the latest Request began
	// selection is the time the GPU's strategy took to choose victims
	// since the latest Request began, if it did (selected).
	selection time.Duration
	selected  bool
	// With hints (RequestHints, or a Tree's hinted access): the tick of
	// the request under way and its hints; hinted says every tier's ticks
	// run on the hints' clock.
	hinted bool
	now    int64
	hints  kvevict.Hints
}

// New returns an empty hierarchy, or an error matching [ErrConfig] (or
// from the strategies' options) for a configuration it cannot serve.
func New(cfg Config) (*Hierarchy, error) {
	cfg.Levels = slices.Clone(cfg.Levels)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	h := &Hierarchy{
		write: cfg.write(), threshold: cfg.Threshold, exclusive: cfg.Exclusive, external: cfg.ExternalGPU, events: cfg.Events,
		match: Match{Runs: make([]int, len(cfg.Levels))}, evicted: make([][]uint64, len(cfg.Levels)),
	}
	for i, l := range cfg.Levels {
		h.stats = append(h.stats, Stats{Medium: l.Medium, Capacity: l.Capacity, Strategy: l.Strategy})
		if i == 0 && h.external {
			h.levels = append(h.levels, nil)
			continue
		}
		if i == 1 && h.write == WriteVLLM {
			h.vllm = newVLLMCPU(l.Capacity, l.Strategy == kvevict.ARC)
			h.levels = append(h.levels, nil)
			continue
		}
		// One block per candidate: the history serves the tier, plus room
		// for the blocks of one call, at most the tier's, which precede
		// the selection that makes room for them. Auto's capacity is the
		// pool its miniature caches model, the tier alone: its history
		// admits a block only once the tier holds it, so it needs no room
		// beyond. Below an exclusive tier Auto's victims are demoted, not
		// lost: its miniature caches model the tiers below too, as one.
		pool := sizing.Pool{Blocks: l.Capacity, Room: l.Capacity}
		if l.Strategy == kvevict.Auto {
			pool.Room = 0
		}
		opts := append(pool.Options(l.Strategy), kvevict.WithEvictionHistory(0))
		if below := cfg.capacityBelow(i); l.Strategy == kvevict.Auto && cfg.Exclusive && below > 0 {
			opts = append(opts, kvevict.WithTierBelow(below))
		}
		opts = append(opts, l.Options...)
		c, err := NewCache(l.Strategy, l.Capacity, opts...)
		if err != nil {
			return nil, fmt.Errorf("tier %d (%s): %w", i, l.Medium, err)
		}
		h.levels = append(h.levels, c)
	}
	if h.write == WriteSelective {
		seen, err := NewCache(kvevict.LRU, selectiveTracked, kvevict.WithTiming(false), kvevict.WithEvictionHistory(0))
		if err != nil {
			return nil, err
		}
		h.seen = seen
	}
	return h, nil
}

// capacityBelow returns the blocks of the tiers below tier i.
func (c *Config) capacityBelow(i int) int {
	n := 0
	for _, l := range c.Levels[i+1:] {
		n += l.Capacity
	}
	return n
}

// Stats returns each tier's counts, top first.
func (h *Hierarchy) Stats() []Stats { return append([]Stats(nil), h.stats...) }

// Contains reports whether tier i holds block id; false for a GPU that
// is the caller's (ExternalGPU). O(1).
func (h *Hierarchy) Contains(i int, id uint64) bool {
	if i == 0 && h.external {
		return false
	}
	if h.levels[i] == nil {
		return h.vllm.contains(id)
	}
	return h.levels[i].Contains(id)
}

// Len returns how many blocks tier i holds; 0 for a GPU that is the
// caller's (ExternalGPU).
func (h *Hierarchy) Len(i int) int {
	if i == 0 && h.external {
		return 0
	}
	if h.levels[i] == nil {
		return h.vllm.cached
	}
	return h.levels[i].Len()
}

// Lookup returns where a request's blocks are: the run of its leading
// blocks on the GPU, the run after it on the next tier, and so on; the
// blocks after the last run are misses. The Match is valid until the next
// call. It changes no tier; it begins a request, whose victims
// [Hierarchy.Victims] lists from here. Under ExternalGPU it finds no GPU
// run: use [Hierarchy.LookupBelow]. O(len(hashes)).
func (h *Hierarchy) Lookup(hashes []uint64) *Match {
	gpu := 0
	for !h.external && gpu < len(hashes) && h.levels[0].Contains(hashes[gpu]) {
		gpu++
	}
	return h.LookupBelow(hashes, gpu)
}

// LookupBelow is [Hierarchy.Lookup] for a request whose first gpu blocks
// the GPU holds, as its caller found them (ExternalGPU): the runs after
// them on each lower tier, then the misses. gpu is held within [0,
// len(hashes)].
func (h *Hierarchy) LookupBelow(hashes []uint64, gpu int) *Match {
	for i := range h.evicted {
		h.evicted[i] = h.evicted[i][:0]
	}
	h.selection, h.selected = 0, false
	m := &h.match
	at := min(max(gpu, 0), len(hashes))
	m.Runs[0] = at
	for i := 1; i < len(h.levels); i++ {
		n := 0
		for at+n < len(hashes) && h.Contains(i, hashes[at+n]) {
			n++
		}
		m.Runs[i] = n
		at += n
	}
	m.Misses = len(hashes) - at
	return m
}

// Load brings the runs m found below the GPU up: each run, the GPU's
// too, counts as hits of its tier, which keeps its copies unless the hierarchy is exclusive,
// touched as a request of them (under WriteThrough by Offer, which stores
// every block of the request anyway: one access per request and tier).
// Under WriteBack each tier below is also told of the request's other
// blocks (UpdateAccess, storing nothing), all of them when the hierarchy
// is exclusive, as vLLM's scheduler tells its CPU manager of every
// request's keys: such a tier receives a block only when the tier above
// lets it go, so a strategy that learns from requests (ARC, S3-FIFO,
// SIEVE, Auto) would otherwise count how often the GPU let a block go,
// not how often it was asked for. A demotion is then no request: Auto,
// which counts requests, is not told of the blocks it takes, while a list
// strategy's history, which takes a block in on an access, is. An
// exclusive hierarchy drops
// every other copy below the GPU of the request's blocks that Admit will
// keep (all of them, unless the request is larger than the GPU). m must
// be Lookup's (or LookupBelow's) for the same hashes.
func (h *Hierarchy) Load(hashes []uint64, m *Match) error {
	h.stats[0].Hits += int64(m.Runs[0])
	if h.vllm != nil {
		// vLLM touches the request's keys before it looks them up; its
		// lookup changes nothing, so after is the same.
		h.vllm.touch(hashes)
		h.stats[1].Hits += int64(m.Runs[1])
		return nil
	}
	at := m.Runs[0]
	for i := 1; i < len(h.levels); i++ {
		run := hashes[at : at+m.Runs[i]]
		before, after := hashes[:at], hashes[at+len(run):]
		at += m.Runs[i]
		h.stats[i].Hits += int64(len(run))
		switch {
		case h.write == WriteThrough:
			continue // Offer touches every block of the request, once
		case h.exclusive: // the tier gives up its run: told of every block
			h.levels[i].note(hashes)
			continue
		}
		back := h.write == WriteBack // the tier sees the run: told of the rest
		if back {
			h.levels[i].note(before)
		}
		if len(run) > 0 {
			if _, err := h.request(i, run, kvevict.PriorityLow); err != nil {
				return fmt.Errorf("tier %d (%s): load: %w", i, h.stats[i].Medium, err)
			}
		}
		if back {
			h.levels[i].note(after)
		}
	}
	if h.exclusive {
		// The blocks Admit will keep: the first the GPU holds, distinct.
		h.kept = idmap.Distinct(hashes, h.stats[0].Capacity, h.kept, &h.seenIDs)
		for i := 1; i < len(h.levels); i++ {
			h.drop(i, h.kept)
		}
	}
	return nil
}

// drop removes hashes from tier i where it holds them, with a Removed
// event; not evictions.
func (h *Hierarchy) drop(i int, hashes []uint64) {
	gone := h.offered[:0]
	for _, id := range hashes {
		if h.levels[i].Remove(id) {
			gone = append(gone, id)
		}
	}
	h.offered = gone
	h.emit(Removed, i, gone)
}

// Admit makes the request's blocks resident on the GPU with priority
// prio, as [Cache.Request] does: the GPU's strategy evicts what they need,
// the request's own blocks never, and under WriteBack its victims are
// demoted to the next tier, whose victims go to the one after. A request
// of more blocks than the GPU holds keeps its first ones. Under
// ExternalGPU the caller admits them to its own pool: Admit refuses.
func (h *Hierarchy) Admit(hashes []uint64, prio kvevict.Priority) error {
	if h.external {
		return errors.New("tier: the GPU's pool is the caller's (ExternalGPU): admit to it, and pass its victims to Demote")
	}
	return h.store(0, hashes, prio, nil, false)
}

// Demote takes the victims of the caller's GPU pool (ExternalGPU): counted
// as the GPU's evictions and, under WriteBack, stored in the next tier,
// whose victims go to the one after. Without ExternalGPU the hierarchy's
// own GPU demotes its victims, and Demote refuses.
func (h *Hierarchy) Demote(victims []uint64) error {
	if !h.external {
		return errors.New("tier: Demote takes the victims of a GPU pool the caller keeps (ExternalGPU)")
	}
	if len(victims) == 0 {
		return nil
	}
	h.stats[0].Evicted += int64(len(victims))
	h.evicted[0] = append(h.evicted[0], victims...)
	if h.write == WriteBack && len(h.levels) > 1 {
		return h.store(1, victims, kvevict.PriorityLow, nil, true)
	}
	return nil
}

// store makes ids resident on tier i, counts and reports what entered and
// left, and passes the victims down under WriteBack. demoted says the ids
// are the victims of the tier above rather than a request's blocks, each
// (if as many) their hints there.
func (h *Hierarchy) store(i int, ids []uint64, prio kvevict.Priority, each []kvevict.Hints, demoted bool) error {
	var out Outcome
	var err error
	if demoted {
		// A demotion is no request: the request was told when it came
		// (Load under WriteBack), so a block the tier holds already (an
		// inclusive tier may) counts no hit and no use there. It is
		// touched: the tier learns the block was in use above until now.
		// Auto counts requests, and its history takes a block in when
		// the tier holds it, so it is told nothing. A list strategy's
		// history takes a block in on an access, the step before the
		// selection that admits it, so a demotion is told to it as one.
		if h.stats[i].Strategy != kvevict.Auto {
			h.levels[i].note(ids)
		}
		c := h.levels[i]
		if h.hinted {
			c.clock(h.now)
			if len(each) == len(ids) { // distinct victims: ids[j] is the cache's jth
				c.each = each
			}
		}
		out, err = c.admit(ids, prio, false)
		c.each = nil
	} else {
		out, err = h.request(i, ids, prio)
	}
	if err != nil {
		return fmt.Errorf("tier %d (%s): %w", i, h.stats[i].Medium, err)
	}
	if i == 0 && out.Selected {
		h.selection, h.selected = out.Elapsed, true
	}
	st := &h.stats[i]
	st.Stored += int64(out.Loaded)
	st.Evicted += int64(len(out.Victims))
	if i > 0 {
		st.Failed += int64(out.Over)
	}
	from := len(h.evicted[i])
	for _, v := range out.Victims {
		h.evicted[i] = append(h.evicted[i], v.ID)
	}
	down := h.evicted[i][from:]
	// A demoted block is stored below before it leaves this tier, as an
	// engine copies a block down before it frees it: an index that follows
	// the events never loses it in between, which one that finds a lower
	// tier's block through its entry above (llm-d's) needs.
	if len(down) > 0 && h.write == WriteBack && i+1 < len(h.levels) {
		err = h.store(i+1, down, kvevict.PriorityLow, h.levels[i].victimHints, true)
	}
	// The victims leave before the blocks that need their room enter: a
	// mirror applying the events in order never holds more than the tier.
	h.emit(Removed, i, down)
	h.emit(Stored, i, out.Entered)
	return err
}

// Offer stores a request's blocks in the tiers below the GPU as the write
// policy says: under WriteThrough all of them in every tier, under
// WriteSelective those requested at least the threshold times (this
// request included), and under WriteBack none (they go down when evicted).
// Call it once per request, after Admit: WriteSelective counts the calls.
func (h *Hierarchy) Offer(hashes []uint64) error {
	offered := hashes
	switch h.write {
	case WriteBack:
		return nil
	case WriteVLLM:
		h.offerVLLM(hashes)
		return nil
	case WriteSelective:
		if _, err := h.seen.Request(hashes, kvevict.PriorityLow); err != nil {
			return err
		}
		offered = h.offered[:0]
		for _, id := range hashes {
			if h.seen.Uses(id) >= h.threshold {
				offered = append(offered, id)
			}
		}
		h.offered = offered
	}
	if len(offered) == 0 {
		return nil
	}
	for i := 1; i < len(h.levels); i++ {
		if err := h.store(i, offered, kvevict.PriorityLow, nil, false); err != nil {
			return err
		}
	}
	return nil
}

// Request serves one request's blocks: [Hierarchy.Lookup], then
// [Hierarchy.Load], [Hierarchy.Admit] and [Hierarchy.Offer]. It returns the
// Match that Lookup found, valid until the next call.
//
// hashes are the request's blocks head first, each named by its hash: any
// uint64, 0 included (a hash is a key here, never a parent). A hash that
// stands twice in a request is one block, held once on a tier, and the
// Match counts it at each place it stands, as [Cache.Request] counts a
// replay's hits: [5, 5, 5] on a GPU that holds 5 is a GPU run of 3 and
// holds one block. A caller whose positions are distinct blocks, as an
// engine's are, chains its hashes (each mixing its parent's) so that no
// two positions share one.
func (h *Hierarchy) Request(hashes []uint64, prio kvevict.Priority) (*Match, error) {
	if h.external {
		return nil, errors.New("tier: the GPU's pool is the caller's (ExternalGPU): call LookupBelow, Load, your pool, Demote and Offer")
	}
	m := h.Lookup(hashes)
	if err := h.Load(hashes, m); err != nil {
		return nil, err
	}
	if err := h.Admit(hashes, prio); err != nil {
		return nil, err
	}
	if err := h.Offer(hashes); err != nil {
		return nil, err
	}
	return m, nil
}

// RequestHints is [Hierarchy.Request] for a request whose blocks take
// hints h at tick now, as [Cache.RequestHints] takes them, on every tier:
// the blocks the request loads, stores and offers take h, and a block
// demoted takes the hints it had on the tier above down with it. Every
// tier's ticks run on the hints' clock from then on. It returns
// RequestHints' errors for bad hints or times, and refuses WriteVLLM,
// whose reproduction of vLLM's host tier takes no hints.
func (h *Hierarchy) RequestHints(hashes []uint64, prio kvevict.Priority, hints kvevict.Hints, now int64) (*Match, error) {
	if err := h.Hint(hashes, hints, now); err != nil {
		return nil, err
	}
	defer h.unhint()
	return h.Request(hashes, prio)
}

// Hint makes hints at tick now those of the request of hashes under way,
// on every tier, after checking them, as [Hierarchy.RequestHints] does
// for its calls: for a caller whose GPU is its own (ExternalGPU), before
// its LookupBelow, Load, Demote and Offer of the request. The hints stay
// until the next Hint (zero Hints: none), and every tier's ticks run on
// the hints' clock from the first. A block the caller demotes goes down
// without hints: the caller's pool keeps its own. It refuses WriteVLLM.
func (h *Hierarchy) Hint(hashes []uint64, hints kvevict.Hints, now int64) error {
	if h.write == WriteVLLM {
		return fmt.Errorf("tier: %w: vLLM's host tier (WriteVLLM) takes no hints", kvevict.ErrInvalidArgument)
	}
	if err := checkHinted(hashes, &hints, now); err != nil {
		return err
	}
	h.hinted, h.now, h.hints = true, now, hints
	return nil
}

// unhint ends the request under way's hints; the ticks stay on the
// hints' clock.
func (h *Hierarchy) unhint() { h.hints = kvevict.Hints{} }

// request asks tier i for ids as a request: with the request's hints and
// tick once the hierarchy is hinted.
func (h *Hierarchy) request(i int, ids []uint64, prio kvevict.Priority) (Outcome, error) {
	if !h.hinted {
		return h.levels[i].Request(ids, prio)
	}
	return h.levels[i].requestAt(ids, prio, h.hints, h.now)
}

// Victims returns the blocks tier i evicted since the latest
// [Hierarchy.Lookup] (which [Hierarchy.Request] begins with), in eviction
// order; valid until the next Lookup.
func (h *Hierarchy) Victims(i int) []uint64 { return h.evicted[i] }

// GPUSelection returns how long the GPU's strategy took to choose victims
// for the request begun by the latest [Hierarchy.Lookup], as
// [Outcome.Elapsed] gives it (0 under kvevict.WithTiming(false)), and
// whether it chose any: [Hierarchy.Admit] makes room on the GPU once per
// request at most. O(1).
func (h *Hierarchy) GPUSelection() (elapsed time.Duration, ok bool) { return h.selection, h.selected }

// MarkPartial marks block id on the GPU as the partial last block of the
// request that just used it, as [Cache.MarkPartial] does, and reports
// whether the GPU holds it.
func (h *Hierarchy) MarkPartial(id uint64) bool {
	return !h.external && h.levels[0].MarkPartial(id)
}

// emit sends an event of kind for ids on tier i, in a slice of its own, if
// anyone listens and ids is not empty.
func (h *Hierarchy) emit(kind EventKind, i int, ids []uint64) {
	if h.events == nil || len(ids) == 0 {
		return
	}
	h.events(Event{Kind: kind, Medium: h.stats[i].Medium, Hashes: append([]uint64(nil), ids...)})
}

// offerVLLM is WriteVLLM's store: the keys from the end of the run loaded
// by the latest Lookup's Match (from the first when nothing was loaded),
// then, if any was stored, a touch of all the request's keys before the
// store completes.
func (h *Hierarchy) offerVLLM(hashes []uint64) {
	start := 0
	if loaded := h.match.Runs[1]; loaded > 0 {
		start = h.match.Runs[0] + loaded
	}
	if start >= len(hashes) {
		return // vLLM's scheduler offers nothing
	}
	stored, evicted, ok := h.vllm.store(hashes[start:])
	st := &h.stats[1]
	if !ok {
		st.Failed += int64(len(h.vllm.toStore))
		return
	}
	if len(stored) == 0 {
		return
	}
	st.Stored += int64(len(stored))
	st.Evicted += int64(len(evicted))
	h.evicted[1] = append(h.evicted[1], evicted...)
	h.emit(Removed, 1, evicted)
	h.emit(Stored, 1, stored)
	h.vllm.touch(hashes)
	h.vllm.complete(stored)
}
