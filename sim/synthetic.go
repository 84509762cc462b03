package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// SyntheticBlockTokens is the block size of the synthetic workloads.
const SyntheticBlockTokens = 32

// generator builds one synthetic workload of about n requests.
type generator struct {
	about string
	group string // what Request.Group means
	gen   func(g *synth, n int)
	block int // tokens per block; 0 means SyntheticBlockTokens
}

// generators are the synthetic workloads by name.
var generators = map[string]generator{
	"chat": {"multi-turn chat sessions over a few shared system prompts", "session",
		func(g *synth, n int) { g.chat(n, 1, 0) }, 0},
	"documents": {"batch jobs asking several questions about each of a set of long documents", "session",
		func(g *synth, n int) { g.documents(n) }, 0},
	"tenants": {"chat from three tenants of low, normal and high priority, the low one busiest", "tenant",
		func(g *synth, n int) { g.chat(n, 3, 0) }, 0},
	"scan": {"chat with a burst of one-shot long prompts in the middle that pollutes LRU", "session",
		func(g *synth, n int) { g.chat(n, 1, n/4) }, 0},
	"multiturn": {"long conversations whose context grows to tens of thousands of tokens, returning after pauses", "session",
		func(g *synth, n int) { g.multiturn(n) }, 0},
	"agentic": {"about 50 concurrent agent sessions growing to 35-90K tokens, pausing for tool calls, amid bursts of one-shot requests", "session",
		func(g *synth, n int) { g.agentic(n) }, AgenticBlockTokens},
}

// WorkloadNames returns the names [Synthetic] accepts, sorted.
func WorkloadNames() []string {
	names := make([]string, 0, len(generators))
	for name := range generators {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// DescribeWorkload returns a one-line description of a synthetic workload,
// or "" for an unknown name.
func DescribeWorkload(name string) string { return generators[name].about }

// Synthetic returns the named synthetic workload of about n requests (at
// least 1), the same for the same name, seed and n:
//
//   - "chat": sessions of 2-8 turns over 4 shared system prompts; each
//     turn's prompt is the previous prompt, its answer and a new message.
//   - "documents": 40-block documents, each asked 2-6 questions in a burst.
//   - "tenants": chat from tenants 0, 1, 2 with priorities low, normal and
//     high; Group is the tenant, and tenant 0 sends half the sessions.
//   - "scan": chat with n/4 one-shot 24-block prompts arriving together
//     halfway through.
//   - "multiturn": long conversations (an agent or coding assistant): a
//     shared system prompt and a 100-500 block context, then 6-20 turns,
//     each adding the previous answer, a 1-8 block message and, one turn in
//     three, a 20-120 block tool result, so the context grows to 20-40
//     thousand tokens; between turns the user pauses 5-60 s, and one time
//     in four 1-10 minutes, while other sessions fill the pool. A new
//     session starts about every 15 s.
//   - "agentic": agent sessions (a coding or research agent calling tools)
//     and the one-shot traffic beside them, in [AgenticBlockTokens]-token
//     blocks, described below.
//
// Blocks are [SyntheticBlockTokens] tokens except in agentic; arrivals in
// chat, tenants and scan are a Poisson process of about 4 requests per
// second. An unknown name returns an error listing the known ones.
//
// The agentic workload keeps [AgenticSessions] sessions running: when one
// ends, another starts after a pause of about 30 s. A session opens with
// one of three shared system prompts (tool definitions, 6-12K tokens) and
// a 0.3-3K token task, and aims for a final context of 35-90K tokens. Each
// turn sends the whole context, is answered by a 40-400 token tool call,
// and the tool's result (log-normal, median 1K tokens, 40 to 16K) joins
// the context; the next turn arrives when the call would have decoded at
// [DefaultTokenTime] per token plus the tool's run time: 1-15 s six times
// in ten, 15-90 s three in ten, 1.5-5 minutes one in ten. The turn whose
// growth would pass the session's aim is its last, answered with 300-1500
// tokens. A block's hash covers its content, so the last, partial block of
// a prompt gets a fresh hash every turn, as in a paged pool that hashes
// only full blocks. Every 3 minutes on average a burst of 20-100 one-shot
// requests (1-8K tokens behind a 1-3 block instruction shared within the
// burst, 16-256 token answers) arrives within 10 s, each in a group of its
// own, pressing on the idle sessions' cache. All requests have normal
// priority. Its requests carry the hints its front end knows
// ([RequestHints]): a turn that calls a tool answering in seconds is leased
// for its decode and that tool's expected run time, 8 s; the last turn of a
// session and every one-shot request are final. The other workloads carry
// none: a chat front end cannot know that a turn is the last.
func Synthetic(name string, seed uint64, n int) (*Workload, error) {
	gen, ok := generators[name]
	if !ok {
		return nil, fmt.Errorf("sim: unknown workload %q (known: %s)", name, strings.Join(WorkloadNames(), ", "))
	}
	if n < 1 {
		return nil, fmt.Errorf("sim: workload %q needs at least 1 request, got %d", name, n)
	}
	g := &synth{rng: rand.New(rand.NewPCG(seed, 0x5eed)), next: 1}
	gen.gen(g, n)
	reqs := g.reqs
	slices.SortStableFunc(reqs, func(a, b Request) int {
		switch {
		case a.Timestamp < b.Timestamp:
			return -1
		case a.Timestamp > b.Timestamp:
			return 1
		}
		return 0
	})
	block := gen.block
	if block == 0 {
		block = SyntheticBlockTokens
	}
	return &Workload{Name: name, BlockTokens: block, GroupKind: gen.group, Requests: reqs}, nil
}

// synth is a generator's state: its random source, the next fresh block
// hash and the requests so far.
type synth struct {
	rng  *rand.Rand
	next uint64
	reqs []Request
}

// fresh returns k new block hashes.
func (g *synth) fresh(k int) []uint64 {
	out := make([]uint64, k)
	for i := range out {
		out[i] = g.next
		g.next++
	}
	return out
}

// gapMs is an exponential inter-arrival time with the given mean.
func (g *synth) gapMs(mean float64) int64 {
	return int64(g.rng.ExpFloat64() * mean)
}

func (g *synth) add(at int64, blocks []uint64, output int, group uint64, prio int8) {
	input := len(blocks)*SyntheticBlockTokens - g.rng.IntN(SyntheticBlockTokens)
	g.reqs = append(g.reqs, Request{
		Timestamp: at, InputTokens: max(input, 1), OutputTokens: output,
		HashIDs: blocks, Group: group, Priority: prio,
	})
}

// chat generates sessions until about n requests, spread over tenants
// (tenant t has priority t; tenant 0 sends half the sessions), plus a burst
// of scan one-shot prompts halfway through.
func (g *synth) chat(n, tenants, scan int) {
	systems := make([][]uint64, 4)
	for i := range systems {
		systems[i] = g.fresh(8 + g.rng.IntN(16))
	}
	var start int64
	session := uint64(0)
	for made := 0; made < n-scan; session++ {
		start += g.gapMs(1000) // a new session about every second
		tenant := 0
		if tenants > 1 && g.rng.IntN(2) == 1 {
			tenant = 1 + g.rng.IntN(tenants-1)
		}
		group := session
		if tenants > 1 {
			group = uint64(tenant)
		}
		prompt := slices.Clone(systems[g.rng.IntN(len(systems))])
		at := start
		for turns := 2 + g.rng.IntN(7); turns > 0 && made < n-scan; turns-- {
			prompt = append(prompt, g.fresh(1+g.rng.IntN(4))...) // the user's message
			answer := 32 + g.rng.IntN(256)
			g.add(at, slices.Clone(prompt), answer, group, int8(tenant))
			made++
			prompt = append(prompt, g.fresh((answer+SyntheticBlockTokens-1)/SyntheticBlockTokens)...)
			at += 5000 + g.gapMs(20000) // the user reads and types
		}
	}
	burst := start / 2
	for i := range scan {
		g.add(burst+int64(i)*10, g.fresh(24), 16, session+uint64(i), 0)
	}
}

// documents generates bursts of questions over long documents.
func (g *synth) documents(n int) {
	var at int64
	for doc := uint64(0); len(g.reqs) < n; doc++ {
		at += g.gapMs(2000)
		body := g.fresh(40)
		for q := 2 + g.rng.IntN(5); q > 0 && len(g.reqs) < n; q-- {
			prompt := append(slices.Clone(body), g.fresh(1+g.rng.IntN(2))...)
			g.add(at+g.gapMs(500), prompt, 64+g.rng.IntN(128), doc, 1)
		}
	}
}

// multiturn generates long conversations that return after pauses, about n
// requests. Each turn's prompt is the session's whole history and the new
// blocks, so its prefix grows turn by turn.
func (g *synth) multiturn(n int) {
	systems := make([][]uint64, 4)
	for i := range systems {
		systems[i] = g.fresh(16 + g.rng.IntN(32))
	}
	var start int64
	for session := uint64(0); len(g.reqs) < n; session++ {
		start += g.gapMs(15000)
		prompt := slices.Clone(systems[g.rng.IntN(len(systems))])
		prompt = append(prompt, g.fresh(100+g.rng.IntN(400))...) // the document or codebase
		at := start
		for turns := 6 + g.rng.IntN(15); turns > 0 && len(g.reqs) < n; turns-- {
			prompt = append(prompt, g.fresh(1+g.rng.IntN(8))...) // the user's message
			answer := 64 + g.rng.IntN(448)
			g.add(at, slices.Clone(prompt), answer, session, 1)
			prompt = append(prompt, g.fresh((answer+SyntheticBlockTokens-1)/SyntheticBlockTokens)...)
			if g.rng.IntN(3) == 0 {
				prompt = append(prompt, g.fresh(20+g.rng.IntN(100))...) // a tool's output
			}
			if g.rng.IntN(4) == 0 {
				at += 60_000 + g.rng.Int64N(540_000) // away for minutes
			} else {
				at += 5000 + g.rng.Int64N(55_000) // reads and types
			}
		}
	}
}
