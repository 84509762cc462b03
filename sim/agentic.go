package sim

import (
	"math"
	"slices"

	"github.com/sagellm/kvevict"
)

// AgenticBlockTokens is the block size of the "agentic" workload: the
// Mooncake traces' block, large enough that a pool of a few hundred to a
// few thousand blocks holds from a few of its sessions' contexts to most
// of them.
const AgenticBlockTokens = 512

// AgenticSessions is how many agent sessions the "agentic" workload keeps
// running at once.
const AgenticSessions = 50

// The agentic workload's shape; [Synthetic] documents it as a whole.
const (
	agentSystems       = 3         // distinct system prompts (agent kinds)
	agentRestartMs     = 30_000    // mean pause before a slot starts its next session
	agentBurstEveryMs  = 180_000   // mean time between bursts of one-shot requests
	agentBurstSpreadMs = 10_000    // a burst's requests arrive within this
	agentTokenMs       = int64(20) // decode time per token the turns are spaced by: DefaultTokenTime
	agentToolMedian    = 1000.0    // median tool result, tokens
	agentToolSigma     = 1.0       // log-normal spread of tool results
	agentNormal        = int8(kvevict.PriorityNormal)
)

// agentTool is a tool an agent calls: how often, out of ten calls, and the
// range its run time is drawn from, uniformly.
type agentTool struct {
	odds          int
	minMs, spanMs int64
	// leased says a front end leases the turn that calls it: the tools
	// that answer in seconds. Continuum pins a turn's KV for its tool's
	// predicted duration only where the wait is short enough to pay for
	// the memory held; a context held through minutes of a tool's run
	// keeps out the turns of every other session.
	leased bool
}

// agentTools are the tools of the agentic workload: seconds usually,
// minutes sometimes.
var agentTools = [...]agentTool{
	{odds: 6, minMs: 1000, spanMs: 14_000, leased: true},
	{odds: 3, minMs: 15_000, spanMs: 75_000},
	{odds: 1, minMs: 90_000, spanMs: 210_000},
}

// expectedMs is the tool's mean run time: what a front end that knows
// which tool a turn called expects it to take, never the wait drawn
// (Continuum's rule).
func (t *agentTool) expectedMs() int64 { return t.minMs + t.spanMs/2 }

// agentSession is one running agent session: its context as blocks and
// tokens, and when its next turn arrives.
type agentSession struct {
	group  uint64
	full   []uint64 // hashes of the context's full blocks, head first
	tokens int      // context length
	aim    int      // the session ends with the turn that would pass this
	next   int64    // arrival of its next turn, ms
}

// agentic generates about n requests of agent sessions and one-shot bursts
// in time order of generation (Synthetic sorts them).
func (g *synth) agentic(n int) {
	const bt = AgenticBlockTokens
	systems := make([]int, agentSystems)        // tokens
	sysBlocks := make([][]uint64, agentSystems) // their full blocks' hashes
	for i := range systems {
		systems[i] = 6000 + g.rng.IntN(6001)
		sysBlocks[i] = g.fresh(systems[i] / bt)
	}
	var group uint64 // sessions and one-shots alike, numbered in order of creation
	start := func(s *agentSession, at int64) {
		k := g.rng.IntN(agentSystems)
		s.group = group
		group++
		s.full = append(s.full[:0], sysBlocks[k]...)
		s.tokens = systems[k]
		s.aim = 35_000 + g.rng.IntN(55_001)
		s.next = at
		s.grow(g, 300+g.rng.IntN(2701)) // the task
	}
	sessions := make([]agentSession, AgenticSessions)
	for i := range sessions {
		// The workload opens on a server already in its steady state: the
		// first sessions are somewhere between their task and their aim,
		// and their next turns come within a minute.
		s := &sessions[i]
		start(s, g.rng.Int64N(60_000))
		s.grow(g, g.rng.IntN(max(s.aim-s.tokens, 1)))
	}
	burst := g.gapMs(agentBurstEveryMs)
	for len(g.reqs) < n {
		s := &sessions[0]
		for i := range sessions {
			if sessions[i].next < s.next {
				s = &sessions[i]
			}
		}
		if burst < s.next {
			g.agentBurst(burst, n, &group)
			burst += g.gapMs(agentBurstEveryMs)
			continue
		}
		at := s.next
		call := 40 + g.rng.IntN(361)
		tool := int(math.Exp(math.Log(agentToolMedian) + agentToolSigma*g.rng.NormFloat64()))
		tool = min(max(tool, 40), 16_000)
		last := s.tokens+call+tool > s.aim
		if last {
			call = 300 + g.rng.IntN(1201) // the final answer
		}
		g.reqs = append(g.reqs, Request{
			Timestamp: at, InputTokens: s.tokens, OutputTokens: call,
			HashIDs: s.prompt(g), Group: s.group, Priority: agentNormal,
		})
		req := &g.reqs[len(g.reqs)-1]
		decode := int64(call) * agentTokenMs
		if last {
			req.Hints = RequestHints{Final: true} // the final answer ends the session
			start(s, at+decode+g.gapMs(agentRestartMs))
			continue
		}
		s.grow(g, call+tool)
		wait, t := g.toolMs()
		s.next = at + decode + wait
		// What the agent's front end knows once the turn calls a tool: a
		// tool that answers in seconds leases the turn for its decode and
		// the tool's expected run time.
		if t.leased {
			req.Hints = RequestHints{TTLMs: decode + t.expectedMs()}
		}
	}
}

// toolMs draws the tool a turn calls and how long it runs.
func (g *synth) toolMs() (int64, *agentTool) {
	r := g.rng.IntN(10)
	t := &agentTools[0]
	for i := range agentTools {
		if t = &agentTools[i]; r < t.odds {
			break
		}
		r -= t.odds
	}
	return t.minMs + g.rng.Int64N(t.spanMs), t
}

// agentBurst adds a burst of one-shot requests at time at, up to n
// requests in all, each in a fresh group.
func (g *synth) agentBurst(at int64, n int, group *uint64) {
	const bt = AgenticBlockTokens
	instruction := g.fresh(1 + g.rng.IntN(3))
	for k := 20 + g.rng.IntN(81); k > 0 && len(g.reqs) < n; k-- {
		tokens := len(instruction)*bt + 1000 + g.rng.IntN(7001)
		prompt := append(slices.Clone(instruction), g.fresh((tokens+bt-1)/bt-len(instruction))...)
		g.reqs = append(g.reqs, Request{
			Timestamp: at + g.rng.Int64N(agentBurstSpreadMs), InputTokens: tokens,
			OutputTokens: 16 + g.rng.IntN(241), HashIDs: prompt, Group: *group, Priority: agentNormal,
			// A one-shot request is final: the batch it came in sends no
			// follow-up, which its front end knows.
			Hints: RequestHints{Final: true},
		})
		*group++
	}
}

// grow appends k tokens to the session's context: the blocks they fill get
// fresh hashes.
func (s *agentSession) grow(g *synth, k int) {
	s.tokens += k
	if full := s.tokens / AgenticBlockTokens; full > len(s.full) {
		s.full = append(s.full, g.fresh(full-len(s.full))...)
	}
}

// prompt returns the hashes of the session's context: its full blocks and,
// if the last one is partial, a fresh hash for it (its content differs
// from any earlier turn's partial block).
func (s *agentSession) prompt(g *synth) []uint64 {
	p := slices.Clone(s.full)
	if s.tokens%AgenticBlockTokens != 0 {
		p = append(p, g.fresh(1)...)
	}
	return p
}
