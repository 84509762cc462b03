package tier

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// This file is the one cost model in time: bytes per block from a model's
// shape, each link's bandwidth and latency, and prefill seconds from the
// model's FLOPs and the GPU's. The figures of the presets and their sources
// are listed in docs/tiers.md ("Cost model").

// Model is what the cost model needs of a model: the shape of its KV cache
// and the work of its prefill. The presets ([LookupModel]) take each field
// from the model's config.json, named here in parentheses.
type Model struct {
	// Name is the preset's name, or any label.
	Name string
	// Layers is the number of transformer layers (num_hidden_layers).
	Layers int
	// Heads is the number of query heads (num_attention_heads).
	Heads int
	// KVHeads is the number of key and value heads each layer caches per
	// token (num_key_value_heads); 0 for a model with latent attention.
	KVHeads int
	// HeadDim is the width of a query head and of a key head (head_dim;
	// qk_nope_head_dim + qk_rope_head_dim under latent attention).
	HeadDim int
	// ValueDim is the width of a value head (head_dim; v_head_dim under
	// latent attention).
	ValueDim int
	// Latent is, under multi-head latent attention (MLA, DeepSeek-V2 and
	// V3), the width of the one vector each layer caches per token in place
	// of keys and values (kv_lora_rank + qk_rope_head_dim); 0 otherwise.
	Latent int
	// DtypeBytes is the size of one cached element: 2 for bf16, 1 for fp8.
	DtypeBytes int
	// Params is the number of parameters one token passes through: all of
	// them for a dense model, the active ones for a mixture of experts.
	Params int64
}

// maxBytesPerToken bounds a model's KV bytes per token, far above any real
// model, so that bytes per block cannot overflow an int64.
const maxBytesPerToken = 1 << 32

// Validate reports the first field of m that cannot describe a model: a
// count below 1, both or neither of KVHeads and Latent, or a KV cache of
// more than 4 GiB per token.
func (m Model) Validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"Layers", int64(m.Layers)}, {"Heads", int64(m.Heads)},
		{"HeadDim", int64(m.HeadDim)}, {"ValueDim", int64(m.ValueDim)},
		{"DtypeBytes", int64(m.DtypeBytes)}, {"Params", m.Params},
	} {
		if f.v < 1 {
			return fmt.Errorf("tier: model %q: %s is %d, want at least 1", m.Name, f.name, f.v)
		}
	}
	if m.KVHeads < 0 || m.Latent < 0 {
		return fmt.Errorf("tier: model %q: KVHeads %d and Latent %d cannot be negative", m.Name, m.KVHeads, m.Latent)
	}
	if (m.KVHeads > 0) == (m.Latent > 0) {
		return fmt.Errorf("tier: model %q: give KVHeads (keys and values cached) or Latent (latent attention), one of the two", m.Name)
	}
	// In floating point, so that a product too large for an int64 is
	// caught rather than wrapped.
	width := float64(m.KVHeads) * (float64(m.HeadDim) + float64(m.ValueDim))
	if m.Latent > 0 {
		width = float64(m.Latent)
	}
	if float64(m.Layers)*width*float64(m.DtypeBytes) > maxBytesPerToken {
		return fmt.Errorf("tier: model %q: a KV cache of more than %d bytes per token", m.Name, maxBytesPerToken)
	}
	return nil
}

// BytesPerToken returns the bytes of KV cache one token takes across all
// layers: layers x KV heads x (key width + value width) x dtype bytes, which
// is the familiar 2 x layers x KV heads x head dim x dtype bytes when keys
// and values are as wide; under latent attention, layers x latent width x
// dtype bytes (one vector, no factor 2). O(1).
func (m Model) BytesPerToken() int64 {
	if m.Latent > 0 {
		return int64(m.Layers) * int64(m.Latent) * int64(m.DtypeBytes)
	}
	return int64(m.Layers) * int64(m.KVHeads) * int64(m.HeadDim+m.ValueDim) * int64(m.DtypeBytes)
}

// BytesPerBlock returns the bytes of a block of blockTokens tokens, 0 for
// fewer than 1. O(1).
func (m Model) BytesPerBlock(blockTokens int) int64 {
	if blockTokens < 1 {
		return 0
	}
	return int64(blockTokens) * m.BytesPerToken()
}

// PrefillFLOPs returns the floating-point operations that prefill tokens
// [cached, total) of a prompt whose first cached tokens are in cache: per
// token, 2 x Params for the matrix products with the weights, plus for
// attention 2 x Layers x Heads x (HeadDim + ValueDim) per key it attends to
// (QK^T and AV), a token at position p attending to the p+1 keys up to its
// own. That is PaLM's forward count (2N + 4LHQT per token, its appendix B)
// with the causal mask counted: the attention term grows with the position.
// It returns 0 when total <= cached; a negative cached counts as 0. O(1).
func (m Model) PrefillFLOPs(cached, total int) float64 {
	cached = max(cached, 0)
	if total <= cached {
		return 0
	}
	n := float64(total - cached)
	// The keys over tokens cached..total-1: the sum of p+1 for p in
	// [cached, total), that is n x (cached + total + 1) / 2.
	keys := n * (float64(cached) + float64(total) + 1) / 2
	return 2*float64(m.Params)*n + m.attentionFLOPsPerKey()*keys
}

// DecodeFLOPs returns the floating-point operations of one decode step of
// seqs sequences holding context tokens in all: each computes one token
// at its position, as [Model.PrefillFLOPs] counts it, so that the step
// costs 2 x Params per sequence plus the attention over context + seqs
// keys. It returns 0 for no sequences. O(1).
func (m Model) DecodeFLOPs(seqs int, context int64) float64 {
	if seqs < 1 {
		return 0
	}
	return 2*float64(m.Params)*float64(seqs) + m.attentionFLOPsPerKey()*(float64(max(context, 0))+float64(seqs))
}

// attentionFLOPsPerKey is the FLOPs one query token spends on one key
// across all layers and heads: a multiply and an add per element of QK^T
// and of AV.
func (m Model) attentionFLOPsPerKey() float64 {
	return 2 * float64(m.Layers) * float64(m.Heads) * (float64(m.HeadDim) + float64(m.ValueDim))
}

// models are the presets, each shape from its model's config.json (the
// sources are in docs/tiers.md). The parameter counts of the dense models
// are the exact totals their config.json gives (embeddings, layers and an
// untied output head); DeepSeek-V3's is the 37B its model card gives as
// activated per token. The KV cache is taken in bf16, as vLLM keeps it by
// default.
var models = []Model{
	{Name: "llama-3-8b", Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128, ValueDim: 128, DtypeBytes: 2, Params: 8_030_261_248},
	{Name: "llama-3-70b", Layers: 80, Heads: 64, KVHeads: 8, HeadDim: 128, ValueDim: 128, DtypeBytes: 2, Params: 70_553_706_496},
	{Name: "qwen2.5-7b", Layers: 28, Heads: 28, KVHeads: 4, HeadDim: 128, ValueDim: 128, DtypeBytes: 2, Params: 7_615_616_512},
	{Name: "deepseek-v3", Layers: 61, Heads: 128, Latent: 512 + 64, HeadDim: 128 + 64, ValueDim: 128, DtypeBytes: 2, Params: 37_000_000_000},
}

// LookupModel returns the preset named name, in any case, or an error that
// lists the presets there are.
func LookupModel(name string) (Model, error) {
	return lookupPreset("model", models, name, func(m Model) string { return m.Name })
}

// ModelNames returns the names of the model presets, for help text.
func ModelNames() []string { return presetNames(models, func(m Model) string { return m.Name }) }

// lookupPreset returns the preset of presets that nameOf names name, in
// any case, or an error that names what was looked up and lists them.
func lookupPreset[T any](what string, presets []T, name string, nameOf func(T) string) (T, error) {
	for _, p := range presets {
		if strings.EqualFold(name, nameOf(p)) {
			return p, nil
		}
	}
	var none T
	return none, fmt.Errorf("tier: unknown %s %q (want %s)", what, name, strings.Join(presetNames(presets, nameOf), ", "))
}

// presetNames returns the names of presets, in order.
func presetNames[T any](presets []T, nameOf func(T) string) []string {
	names := make([]string, len(presets))
	for i, p := range presets {
		names[i] = nameOf(p)
	}
	return names
}

// Link is a medium's link to the GPU: blocks loaded from the medium cross
// it at Bandwidth after a fixed Latency per transfer.
type Link struct {
	// Bandwidth is in bytes per second.
	Bandwidth float64
	// Latency is what one transfer costs whatever its size: the setup of a
	// copy, an I/O request, a round trip.
	Latency time.Duration
}

// Validate reports a link with no bandwidth (zero, negative, infinite or
// not a number) or a negative latency.
func (l Link) Validate() error {
	switch {
	case l.Bandwidth == 0:
		return errors.New("tier: a link with no bandwidth")
	case !(l.Bandwidth > 0) || math.IsInf(l.Bandwidth, 1):
		return fmt.Errorf("tier: a link's bandwidth is %v bytes/s, want a positive number", l.Bandwidth)
	case l.Latency < 0:
		return fmt.Errorf("tier: a link's latency is %v, want 0 or more", l.Latency)
	}
	return nil
}

// String returns l as [ParseLink] reads it after "MEDIUM=": its
// bandwidth, a comma and its latency, each with its unit; parsing it gives
// l back exactly.
func (l Link) String() string {
	return formatBandwidth(l.Bandwidth) + "," + formatLatency(l.Latency)
}

// linkPresets are the named links; the first named for a medium is that
// medium's default. The figures and their sources are in docs/tiers.md.
var linkPresets = []linkPreset{
	{"pcie5", CPU, Link{Bandwidth: 54e9, Latency: 10 * time.Microsecond}},
	{"pcie4", CPU, Link{Bandwidth: 25e9, Latency: 10 * time.Microsecond}},
	{"nvme", Storage, Link{Bandwidth: 7e9, Latency: 80 * time.Microsecond}},
	{"s3", Storage, Link{Bandwidth: 1e9, Latency: 30 * time.Millisecond}},
}

// LookupLink returns the link preset named name, in any case: "pcie5" (host
// memory over PCIe Gen5, the CPU's default), "pcie4", "nvme" (a local NVMe
// drive, the storage default) or "s3" (an object store).
func LookupLink(name string) (Link, error) {
	p, err := lookupPreset("link", linkPresets, name, linkPreset.nameOf)
	return p.link, err
}

// LinkNames returns the names of the link presets, for help text.
func LinkNames() []string { return presetNames(linkPresets, linkPreset.nameOf) }

// linkPreset is a named link, the default of its medium when first named
// for it.
type linkPreset struct {
	name   string
	medium Medium
	link   Link
}

func (p linkPreset) nameOf() string { return p.name }

// DefaultLink returns the link a cost model takes for m when given none:
// "pcie5" for the CPU, "nvme" for storage. It reports false for the GPU,
// whose blocks need no link, and for an unknown medium.
func DefaultLink(m Medium) (Link, bool) {
	for _, p := range linkPresets {
		if p.medium == m {
			return p.link, true
		}
	}
	return Link{}, false
}

// linkSyntax is what every error of ParseLink ends with.
const linkSyntax = "want MEDIUM=BANDWIDTH,LATENCY as cpu=54GB/s,10us, or MEDIUM=PRESET as storage=nvme"

// ParseLink reads a medium's link as the command's -link flag gives it:
// "MEDIUM=BANDWIDTH,LATENCY" or "MEDIUM=PRESET" ("cpu=pcie4", see
// [LookupLink]). The medium is cpu or storage, in any case; the
// bandwidth a positive number in GB/s, GiB/s, MB/s, MiB/s or B/s
// (bytes: a lowercase b, bits, is refused); the latency a number of ns,
// us, µs, ms or s, or 0. Both are required.
func ParseLink(s string) (Medium, Link, error) {
	fail := func(format string, args ...any) (Medium, Link, error) {
		return "", Link{}, fmt.Errorf("tier: link %q: %s (%s)", s, fmt.Sprintf(format, args...), linkSyntax)
	}
	name, spec, ok := strings.Cut(s, "=")
	if !ok {
		return fail("no medium")
	}
	m, err := ParseMedium(strings.TrimSpace(name))
	if err != nil {
		return fail("unknown medium %q", strings.TrimSpace(name))
	}
	if m == GPU {
		return fail("the GPU needs no link: its blocks are where prefill reads them")
	}
	bw, lat, ok := strings.Cut(strings.TrimSpace(spec), ",")
	bw, lat = strings.TrimSpace(bw), strings.TrimSpace(lat)
	if bw == "" {
		return fail("no bandwidth")
	}
	if !ok {
		if l, err := LookupLink(bw); err == nil {
			return m, l, nil
		}
		if _, err := parseBandwidth(bw); err == nil {
			return fail("no latency (write 0 for none)")
		}
		return fail("%q is neither a bandwidth and a latency nor a preset (%s)", bw, strings.Join(LinkNames(), ", "))
	}
	var l Link
	if l.Bandwidth, err = parseBandwidth(bw); err != nil {
		return fail("%v", err)
	}
	if lat == "" {
		return fail("no latency (write 0 for none)")
	}
	if l.Latency, err = parseLatency(lat); err != nil {
		return fail("%v", err)
	}
	return m, l, nil
}

// unit is a unit of bandwidth or latency and its size in bytes per second
// or nanoseconds.
type unit struct {
	name string
	size float64
}

var (
	bandwidthUnits = []unit{{"GB/s", 1e9}, {"GiB/s", 1 << 30}, {"MB/s", 1e6}, {"MiB/s", 1 << 20}, {"B/s", 1}}
	latencyUnits   = []unit{{"ns", 1}, {"us", 1e3}, {"µs", 1e3}, {"μs", 1e3}, {"ms", 1e6}, {"s", 1e9}}
)

// splitNumber splits s into its leading number and the unit after it.
func splitNumber(s string) (number, unitName string) {
	i := strings.IndexFunc(s, func(r rune) bool {
		return !strings.ContainsRune("0123456789.+-eE", r)
	})
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimSpace(s[i:])
}

// parseQuantity reads a positive (or, if zero is allowed, non-negative)
// number followed by one of units, and returns it times the unit's size.
func parseQuantity(what, s string, units []unit, zero bool) (float64, error) {
	number, name := splitNumber(s)
	v, err := strconv.ParseFloat(number, 64)
	if number == "" || err != nil {
		return 0, fmt.Errorf("%s %q does not start with a number", what, s)
	}
	switch {
	case v < 0:
		return 0, fmt.Errorf("%s %q is negative", what, s)
	case v == 0 && !zero:
		return 0, fmt.Errorf("%s %q is zero", what, s)
	}
	if v == 0 && name == "" {
		return 0, nil
	}
	names := make([]string, 0, len(units))
	for _, u := range units {
		if name == u.name {
			return v * u.size, nil
		}
		names = append(names, u.name)
	}
	list := strings.Join(names, ", ")
	switch {
	case name == "":
		return 0, fmt.Errorf("%s %q has no unit (want %s)", what, s, list)
	case strings.Contains(name, "b") && !strings.Contains(name, "B"):
		return 0, fmt.Errorf("%s %q: a lowercase b is bits; give bytes (%s)", what, s, list)
	}
	return 0, fmt.Errorf("%s %q: unknown unit %q (want %s)", what, s, name, list)
}

func parseBandwidth(s string) (float64, error) {
	bw, err := parseQuantity("bandwidth", s, bandwidthUnits, false)
	if err == nil && math.IsInf(bw, 1) {
		return 0, fmt.Errorf("bandwidth %q is too large", s)
	}
	return bw, err
}

func parseLatency(s string) (time.Duration, error) {
	ns, err := parseQuantity("latency", s, latencyUnits, true)
	if err != nil {
		return 0, err
	}
	if ns >= math.MaxInt64 {
		return 0, fmt.Errorf("latency %q is too large", s)
	}
	return time.Duration(math.Round(ns)), nil
}

// formatBandwidth writes bw in the first of GB/s and MB/s that reads back
// as exactly bw, else in B/s.
func formatBandwidth(bw float64) string {
	for _, u := range []unit{{"GB/s", 1e9}, {"MB/s", 1e6}} {
		s := strconv.FormatFloat(bw/u.size, 'g', -1, 64)
		if back, err := strconv.ParseFloat(s, 64); err == nil && back*u.size == bw {
			return s + u.name
		}
	}
	return strconv.FormatFloat(bw, 'g', -1, 64) + "B/s"
}

// formatLatency writes d in the largest unit that holds it whole.
func formatLatency(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d%time.Millisecond == 0:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	case d%time.Microsecond == 0:
		return strconv.FormatInt(int64(d/time.Microsecond), 10) + "us"
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}

// defaultMFU is the share of a GPU's peak a prefill is taken to reach (the
// source is in docs/tiers.md).
const defaultMFU = 0.5

// GPUSpec is what the cost model needs of the GPU a model instance
// runs on: its peak and its memory. The presets ([LookupGPU]) take their
// figures from the vendor's datasheets, listed in docs/simulator.md.
type GPUSpec struct {
	// Name is the preset's name, or any label.
	Name string
	// FLOPS is the peak dense FLOPs per second at bf16.
	FLOPS float64
	// MemoryBandwidth is the bandwidth of its high-bandwidth memory, in
	// bytes per second.
	MemoryBandwidth float64
	// MemoryBytes is the size of that memory.
	MemoryBytes int64
}

// gpus are the presets, the first the default.
var gpus = []GPUSpec{
	{Name: "h100", FLOPS: 989e12, MemoryBandwidth: 3.35e12, MemoryBytes: 80e9},
	{Name: "h200", FLOPS: 989e12, MemoryBandwidth: 4.8e12, MemoryBytes: 141e9},
	{Name: "a100", FLOPS: 312e12, MemoryBandwidth: 2.039e12, MemoryBytes: 80e9},
}

// LookupGPU returns the GPU preset named name, in any case: "h100" (H100
// SXM, the default), "h200" (H200 SXM) or "a100" (A100 SXM 80GB); or an
// error that lists them.
func LookupGPU(name string) (GPUSpec, error) {
	return lookupPreset("GPU", gpus, name, func(g GPUSpec) string { return g.Name })
}

// GPUNames returns the names of the GPU presets, for help text.
func GPUNames() []string { return presetNames(gpus, func(g GPUSpec) string { return g.Name }) }

// Compute returns g's rate: its peak at the default MFU, and its memory
// bandwidth.
func (g GPUSpec) Compute() Compute {
	return Compute{FLOPS: g.FLOPS, MFU: defaultMFU, MemoryBandwidth: g.MemoryBandwidth}
}

// Compute is the GPU's prefill rate: peak FLOPs per second times the model
// FLOPs utilization (MFU) a prefill reaches, or a measured rate in tokens
// per second, which overrides the FLOPs estimate (and with it the growth of
// attention with the position, which a measured rate holds at whatever
// prompt lengths it was measured on).
type Compute struct {
	// FLOPS is the peak dense FLOPs per second at the model's dtype, of
	// all the GPUs a model instance runs on.
	FLOPS float64
	// MFU is the share of FLOPS a prefill reaches, in (0, 1].
	MFU float64
	// TokensPerSecond, when above 0, is a measured prefill rate that
	// replaces FLOPS and MFU.
	TokensPerSecond float64
	// MemoryBandwidth is the bytes per second a step reads its weights and
	// KV cache at ([Cost.Step]); 0 leaves reads out of a step's time.
	MemoryBandwidth float64
}

// DefaultCompute returns one H100 SXM (989 TFLOPS dense bf16, 3.35 TB/s)
// at 50% MFU: the "h100" preset's [GPUSpec.Compute].
func DefaultCompute() Compute {
	return gpus[0].Compute()
}

// Validate reports a value that cannot be a rate (negative, infinite or not
// a number), an MFU above 1, or no rate at all: TokensPerSecond 0 and
// FLOPS or MFU 0.
func (c Compute) Validate() error {
	finite := func(v float64) bool { return v >= 0 && !math.IsInf(v, 1) }
	switch {
	case !finite(c.TokensPerSecond):
		return fmt.Errorf("tier: prefill rate of %v tokens/s, want 0 or more", c.TokensPerSecond)
	case !finite(c.FLOPS):
		return fmt.Errorf("tier: peak of %v FLOPS, want 0 or more", c.FLOPS)
	case !finite(c.MemoryBandwidth):
		return fmt.Errorf("tier: memory bandwidth of %v bytes/s, want 0 or more", c.MemoryBandwidth)
	case !(c.MFU >= 0 && c.MFU <= 1):
		return fmt.Errorf("tier: MFU %v, want a share in (0, 1]", c.MFU)
	case c.TokensPerSecond == 0 && c.FLOPS == 0:
		return errors.New("tier: no prefill rate: give peak FLOPS and MFU, or tokens per second")
	case c.TokensPerSecond == 0 && c.MFU == 0:
		return errors.New("tier: MFU 0, want a share in (0, 1]")
	}
	return nil
}

// Cost prices a KV cache's moves in time: the load of blocks from a lower
// tier, against the prefill that would recompute them. Every figure it
// gives is modelled from its model, links and compute, not measured. A
// Cost does not change once made and is safe for concurrent use; every
// method is O(1).
type Cost struct {
	model       Model
	blockTokens int
	compute     Compute
	links       []Link // by rank; the GPU's is unused
	blockBytes  int64
}

// NewCost returns the cost model of model in blocks of blockTokens tokens,
// prefilled at compute's rate, each medium below the GPU reached over its
// link in links or else over [DefaultLink]'s. It refuses a model, compute
// or link that does not validate, fewer than 1 token per block, a block of
// more than 2^62 bytes, and a link for the GPU or an unknown medium.
func NewCost(model Model, blockTokens int, compute Compute, links map[Medium]Link) (*Cost, error) {
	if err := model.Validate(); err != nil {
		return nil, err
	}
	if blockTokens < 1 {
		return nil, fmt.Errorf("tier: %d tokens per block, want at least 1", blockTokens)
	}
	if float64(blockTokens)*float64(model.BytesPerToken()) > 1<<62 {
		return nil, fmt.Errorf("tier: blocks of %d tokens of model %q take more than 2^62 bytes", blockTokens, model.Name)
	}
	if err := compute.Validate(); err != nil {
		return nil, err
	}
	c := &Cost{
		model:       model,
		blockTokens: blockTokens,
		compute:     compute,
		links:       make([]Link, len(mediums)),
		blockBytes:  model.BytesPerBlock(blockTokens),
	}
	for m := range links {
		if m.rank() < 0 {
			return nil, fmt.Errorf("tier: a link for unknown medium %q", m)
		}
	}
	for i, m := range mediums {
		l, given := links[m]
		if m == GPU {
			if given {
				return nil, errors.New("tier: a link for the GPU, whose blocks need none")
			}
			continue
		}
		if !given {
			l, _ = DefaultLink(m)
		}
		if err := l.Validate(); err != nil {
			return nil, fmt.Errorf("%w (medium %s)", err, m)
		}
		c.links[i] = l
	}
	return c, nil
}

// Model returns the model c prices.
func (c *Cost) Model() Model { return c.model }

// BlockTokens returns the tokens in a block.
func (c *Cost) BlockTokens() int { return c.blockTokens }

// BlockBytes returns the bytes of a block's KV cache.
func (c *Cost) BlockBytes() int64 { return c.blockBytes }

// Compute returns the prefill rate c takes.
func (c *Cost) Compute() Compute { return c.compute }

// Link returns m's link to the GPU, and false for the GPU and an unknown
// medium.
func (c *Cost) Link(m Medium) (Link, bool) {
	if r := m.rank(); r > 0 {
		return c.links[r], true
	}
	return Link{}, false
}

// Load returns the time to bring blocks blocks from m to the GPU in one
// transfer: the link's latency plus the blocks' bytes over its bandwidth.
// It is 0 for no blocks, and for the GPU (and an unknown medium), whose
// blocks are where prefill reads them.
func (c *Cost) Load(m Medium, blocks int) time.Duration {
	r := m.rank()
	if blocks < 1 || r <= 0 {
		return 0
	}
	l := c.links[r]
	return l.Latency + duration(float64(blocks)*float64(c.blockBytes)/l.Bandwidth)
}

// Prefill returns the time to prefill tokens [cached, total) of a prompt
// whose first cached tokens are in cache: [Model.PrefillFLOPs] over peak x
// MFU, or the tokens over a measured rate. It is 0 when total <= cached; a
// negative cached counts as 0.
func (c *Cost) Prefill(cached, total int) time.Duration {
	if tps := c.compute.TokensPerSecond; tps > 0 {
		cached = max(cached, 0)
		if total <= cached {
			return 0
		}
		return duration(float64(total-cached) / tps)
	}
	return duration(c.model.PrefillFLOPs(cached, total) / (c.compute.FLOPS * c.compute.MFU))
}

// Step is the work of one step of an engine, as [Cost.Step] prices it: the
// tokens it computes, their FLOPs, and the tokens of KV cache it reads.
type Step struct {
	// Tokens are the tokens the step computes: its prefill chunks' and one
	// per decoding sequence.
	Tokens int
	// FLOPs are their floating-point operations: [Model.PrefillFLOPs] of
	// each chunk plus [Model.DecodeFLOPs] of the decoding sequences.
	FLOPs float64
	// KVTokens are the tokens whose KV cache the step reads: every
	// running sequence's.
	KVTokens int64
}

// Step returns the time of one engine step that does s, as a roofline
// gives it: the longer of its compute, s.FLOPs over peak x MFU (or its
// tokens over a measured rate), and its memory reads, the model's weights
// (Params x DtypeBytes) and s.KVTokens of KV cache once, over the memory
// bandwidth (none when the bandwidth is 0). A decode step of few
// sequences is bound by the reads, a long prefill chunk by the compute.
// O(1).
func (c *Cost) Step(s Step) time.Duration {
	compute := s.FLOPs / (c.compute.FLOPS * c.compute.MFU)
	if tps := c.compute.TokensPerSecond; tps > 0 {
		compute = float64(s.Tokens) / tps
	}
	var memory float64
	if bw := c.compute.MemoryBandwidth; bw > 0 {
		bytes := float64(c.model.Params)*float64(c.model.DtypeBytes) + float64(max(s.KVTokens, 0))*float64(c.model.BytesPerToken())
		memory = bytes / bw
	}
	return duration(max(compute, memory))
}

// Pays reports whether loading blocks blocks from m beats recomputing their
// tokens, the cachedTokens before them being at hand either way: whether
// Load(m, blocks) < Prefill(cachedTokens, cachedTokens + blocks x block
// tokens). A load that does not pay is one a policy may skip, and one a
// replay counts when it is made anyway. Loading no blocks does not pay.
func (c *Cost) Pays(m Medium, blocks, cachedTokens int) bool {
	if blocks < 1 {
		return false
	}
	return c.Load(m, blocks) < c.Prefill(cachedTokens, cachedTokens+blocks*c.blockTokens)
}

// duration converts seconds to a Duration, rounded to the nanosecond and
// held at the largest Duration beyond it (292 years).
func duration(seconds float64) time.Duration {
	ns := seconds * 1e9
	switch {
	case !(ns > 0):
		return 0
	case ns >= math.MaxInt64:
		return math.MaxInt64
	}
	return time.Duration(math.Round(ns))
}
