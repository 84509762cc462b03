package tier

import (
	"fmt"
	"strings"
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
	for _, m := range models {
		if strings.EqualFold(name, m.Name) {
			return m, nil
		}
	}
	return Model{}, fmt.Errorf("tier: unknown model %q (want %s)", name, strings.Join(ModelNames(), ", "))
}

// ModelNames returns the names of the model presets, for help text.
func ModelNames() []string {
	names := make([]string, len(models))
	for i, m := range models {
		names[i] = m.Name
	}
	return names
}
