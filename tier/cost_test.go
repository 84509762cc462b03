package tier_test

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sagellm/kvevict/tier"
)

// The figures below are worked out by hand from the models' config.json and
// the sources listed in docs/tiers.md, not read from the code under test.

const kib = 1 << 10

func mustModel(t *testing.T, name string) tier.Model {
	t.Helper()
	m, err := tier.LookupModel(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBytesPerToken(t *testing.T) {
	for _, tc := range []struct {
		name string
		want int64
	}{
		// 2 (K and V) x 32 layers x 8 KV heads x 128 x 2 bytes (bf16).
		{"llama-3-8b", 128 * kib},
		// 2 x 80 x 8 x 128 x 2.
		{"llama-3-70b", 320 * kib},
		// 2 x 28 x 4 x 128 x 2.
		{"qwen2.5-7b", 56 * kib},
		// 61 layers x one latent of kv_lora_rank 512 + qk_rope_head_dim 64,
		// x 2 bytes: no factor 2, keys and values share the latent.
		{"deepseek-v3", 61 * 576 * 2},
	} {
		m := mustModel(t, tc.name)
		if got := m.BytesPerToken(); got != tc.want {
			t.Errorf("%s: BytesPerToken = %d, want %d", tc.name, got, tc.want)
		}
		if got := m.BytesPerBlock(16); got != 16*tc.want {
			t.Errorf("%s: BytesPerBlock(16) = %d, want %d", tc.name, got, 16*tc.want)
		}
		if got := m.BytesPerBlock(0); got != 0 {
			t.Errorf("%s: BytesPerBlock(0) = %d, want 0", tc.name, got)
		}
	}
}

func TestModelPresets(t *testing.T) {
	names := tier.ModelNames()
	if len(names) < 4 {
		t.Fatalf("ModelNames() = %v, want at least 4 presets", names)
	}
	for _, name := range names {
		m := mustModel(t, strings.ToUpper(name))
		if m.Name != name {
			t.Errorf("LookupModel(%q).Name = %q", strings.ToUpper(name), m.Name)
		}
		if err := m.Validate(); err != nil {
			t.Errorf("preset %s: %v", name, err)
		}
	}
	_, err := tier.LookupModel("llama-4")
	if err == nil || !strings.Contains(err.Error(), `"llama-4"`) || !strings.Contains(err.Error(), "llama-3-8b") {
		t.Errorf("LookupModel(llama-4) = %v, want an error naming it and the presets", err)
	}
}

func TestModelValidate(t *testing.T) {
	good := mustModel(t, "llama-3-8b")
	for _, tc := range []struct {
		name string
		edit func(*tier.Model)
		want string
	}{
		{"no layers", func(m *tier.Model) { m.Layers = 0 }, "Layers is 0"},
		{"no heads", func(m *tier.Model) { m.Heads = -1 }, "Heads is -1"},
		{"no dtype", func(m *tier.Model) { m.DtypeBytes = 0 }, "DtypeBytes"},
		{"no params", func(m *tier.Model) { m.Params = 0 }, "Params"},
		{"no value width", func(m *tier.Model) { m.ValueDim = 0 }, "ValueDim"},
		{"both caches", func(m *tier.Model) { m.Latent = 576 }, "one of the two"},
		{"no cache", func(m *tier.Model) { m.KVHeads = 0 }, "one of the two"},
		{"negative latent", func(m *tier.Model) { m.Latent = -1 }, "negative"},
		{"too large", func(m *tier.Model) { m.KVHeads = 1 << 30 }, "bytes per token"},
	} {
		m := good
		tc.edit(&m)
		if err := m.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

func TestPrefillFLOPs(t *testing.T) {
	m := mustModel(t, "llama-3-8b")
	// The token at position 32768 attends to 32769 keys: 2 x 8030261248
	// for the weights, plus 2 x 32 layers x 32 heads x (128 + 128) =
	// 524288 FLOPs per key.
	if got, want := m.PrefillFLOPs(32768, 32769), 2*8030261248.0+524288*32769.0; got != want {
		t.Errorf("PrefillFLOPs(32768, 32769) = %.0f, want %.0f", got, want)
	}
	// Three tokens at positions 0, 1, 2 attend to 1 + 2 + 3 keys.
	if got, want := m.PrefillFLOPs(0, 3), 3*2*8030261248.0+6*524288.0; got != want {
		t.Errorf("PrefillFLOPs(0, 3) = %.0f, want %.0f", got, want)
	}
	// A prefill in two pieces costs what it costs in one.
	for _, split := range []int{1, 511, 4096, 30000} {
		whole, a, b := m.PrefillFLOPs(0, 40000), m.PrefillFLOPs(0, split), m.PrefillFLOPs(split, 40000)
		if math.Abs(a+b-whole) > 1e-12*whole {
			t.Errorf("PrefillFLOPs(0, %d) + PrefillFLOPs(%d, 40000) = %g, want %g", split, split, a+b, whole)
		}
	}
	for _, tc := range [][2]int{{5, 5}, {6, 5}, {-10, -1}} {
		if got := m.PrefillFLOPs(tc[0], tc[1]); got != 0 {
			t.Errorf("PrefillFLOPs(%d, %d) = %g, want 0", tc[0], tc[1], got)
		}
	}
	if got, want := m.PrefillFLOPs(-5, 1), m.PrefillFLOPs(0, 1); got != want {
		t.Errorf("PrefillFLOPs(-5, 1) = %g, want PrefillFLOPs(0, 1) = %g", got, want)
	}
	// Under latent attention the prefill attends with 192-wide queries and
	// keys and 128-wide values (vLLM's compute-friendly path for prefill).
	ds := mustModel(t, "deepseek-v3")
	if got, want := ds.PrefillFLOPs(0, 1), 2*37e9+2*61*128*(192+128.0); got != want {
		t.Errorf("deepseek-v3 PrefillFLOPs(0, 1) = %.0f, want %.0f", got, want)
	}
}

func mustLink(t *testing.T, name string) tier.Link {
	t.Helper()
	l, err := tier.LookupLink(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLinkPresets(t *testing.T) {
	for _, tc := range []struct {
		name      string
		bandwidth float64
		latency   time.Duration
	}{
		{"pcie5", 54e9, 10 * time.Microsecond},
		{"pcie4", 25e9, 10 * time.Microsecond},
		{"nvme", 7e9, 80 * time.Microsecond},
		{"S3", 1e9, 30 * time.Millisecond},
	} {
		if l := mustLink(t, tc.name); l.Bandwidth != tc.bandwidth || l.Latency != tc.latency {
			t.Errorf("LookupLink(%s) = %+v, want %v bytes/s, %v", tc.name, l, tc.bandwidth, tc.latency)
		}
	}
	if _, err := tier.LookupLink("pcie6"); err == nil || !strings.Contains(err.Error(), "pcie5") {
		t.Errorf("LookupLink(pcie6) = %v, want an error naming the presets", err)
	}
	for m, want := range map[tier.Medium]string{tier.CPU: "pcie5", tier.Storage: "nvme"} {
		if l, ok := tier.DefaultLink(m); !ok || l != mustLink(t, want) {
			t.Errorf("DefaultLink(%s) = %+v, %v, want %s", m, l, ok, want)
		}
	}
	for _, m := range []tier.Medium{tier.GPU, "TAPE"} {
		if _, ok := tier.DefaultLink(m); ok {
			t.Errorf("DefaultLink(%s) reports a link", m)
		}
	}
}

func TestParseLink(t *testing.T) {
	for _, tc := range []struct {
		in     string
		medium tier.Medium
		link   tier.Link
	}{
		{"cpu=54GB/s,10us", tier.CPU, tier.Link{Bandwidth: 54e9, Latency: 10 * time.Microsecond}},
		{"STORAGE=7GB/s,80µs", tier.Storage, tier.Link{Bandwidth: 7e9, Latency: 80 * time.Microsecond}},
		{"storage=7GB/s,80μs", tier.Storage, tier.Link{Bandwidth: 7e9, Latency: 80 * time.Microsecond}},
		{"storage=1GiB/s,30ms", tier.Storage, tier.Link{Bandwidth: 1 << 30, Latency: 30 * time.Millisecond}},
		{"cpu=512MB/s,0", tier.CPU, tier.Link{Bandwidth: 512e6}},
		{"cpu=100MiB/s,1s", tier.CPU, tier.Link{Bandwidth: 100 << 20, Latency: time.Second}},
		{"cpu=1.5GB/s,1.5us", tier.CPU, tier.Link{Bandwidth: 1.5e9, Latency: 1500}},
		{"cpu=2e10B/s,250ns", tier.CPU, tier.Link{Bandwidth: 2e10, Latency: 250}},
		{" cpu = 54GB/s , 10us ", tier.CPU, tier.Link{Bandwidth: 54e9, Latency: 10 * time.Microsecond}},
		{"cpu=pcie4", tier.CPU, tier.Link{Bandwidth: 25e9, Latency: 10 * time.Microsecond}},
		{"storage=S3", tier.Storage, tier.Link{Bandwidth: 1e9, Latency: 30 * time.Millisecond}},
	} {
		m, l, err := tier.ParseLink(tc.in)
		if err != nil || m != tc.medium || l != tc.link {
			t.Errorf("ParseLink(%q) = %s, %+v, %v, want %s, %+v", tc.in, m, l, err, tc.medium, tc.link)
		}
	}
	// What String writes, ParseLink reads back exactly.
	links := []tier.Link{
		{Bandwidth: 1 << 30, Latency: 1500},
		{Bandwidth: 3e9 / 7, Latency: 3 * time.Second},
		{Bandwidth: 123456.789, Latency: 7 * time.Millisecond},
		{Bandwidth: 0.5, Latency: 1},
	}
	for _, name := range tier.LinkNames() {
		links = append(links, mustLink(t, name))
	}
	for _, l := range links {
		s := "storage=" + l.String()
		if m, back, err := tier.ParseLink(s); err != nil || m != tier.Storage || back != l {
			t.Errorf("ParseLink(%q) = %s, %+v, %v, want STORAGE, %+v", s, m, back, err, l)
		}
	}
	if got := mustLink(t, "pcie5").String(); got != "54GB/s,10us" {
		t.Errorf("pcie5 String() = %q, want 54GB/s,10us", got)
	}
}

func TestParseLinkErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "no medium"},
		{"cpu", "no medium"},
		{"54GB/s,10us", "no medium"},
		{"disk=7GB/s,80us", `unknown medium "disk"`},
		{"gpu=900GB/s,1us", "the GPU needs no link"},
		{"cpu=", "no bandwidth"},
		{"cpu=,10us", "no bandwidth"},
		{"cpu=54GB/s", "no latency"},
		{"cpu=54GB/s,", "no latency"},
		{"cpu=0GB/s,10us", "is zero"},
		{"cpu=-54GB/s,10us", "is negative"},
		{"cpu=54Gb/s,10us", "lowercase b is bits"},
		{"cpu=54gbps,10us", "lowercase b is bits"},
		{"cpu=54GBps,10us", `unknown unit "GBps"`},
		{"cpu=54,10us", "has no unit"},
		{"cpu=GB/s,10us", "does not start with a number"},
		{"cpu=NaNGB/s,10us", "does not start with a number"},
		{"cpu=1e999GB/s,10us", "does not start with a number"},
		{"cpu=54GB/s,10", "has no unit"},
		{"cpu=54GB/s,-10us", "is negative"},
		{"cpu=54GB/s,1h", `unknown unit "h"`},
		{"cpu=54GB/s,1e30s", "too large"},
		{"cpu=54GB/s,10us,1us", "unknown unit"},
		{"cpu=fast", "neither a bandwidth and a latency nor a preset"},
		{"cpu=pcie5,10us", "does not start with a number"},
	} {
		_, _, err := tier.ParseLink(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "MEDIUM=BANDWIDTH,LATENCY") {
			t.Errorf("ParseLink(%q) = %v, want an error with %q and the syntax", tc.in, err, tc.want)
		}
	}
}

// h100Rate is the default compute's FLOPs per second: 989 TFLOPS at 50%.
const h100Rate = 989e12 * 0.5

func mustCost(t *testing.T, m tier.Model, blockTokens int, c tier.Compute, links map[tier.Medium]tier.Link) *tier.Cost {
	t.Helper()
	cost, err := tier.NewCost(m, blockTokens, c, links)
	if err != nil {
		t.Fatal(err)
	}
	return cost
}

// near fails unless got is within 1 ns of want seconds: durations are
// rounded to the nanosecond.
func near(t *testing.T, what string, got time.Duration, wantSeconds float64) {
	t.Helper()
	if d := math.Abs(float64(got) - wantSeconds*1e9); d > 1 {
		t.Errorf("%s = %v, want %.3fns", what, got, wantSeconds*1e9)
	}
}

func TestPrefillTime(t *testing.T) {
	c := mustCost(t, mustModel(t, "llama-3-8b"), 16, tier.DefaultCompute(), nil)
	// About 32 us per token on an H100 at 50% MFU: 2 x 8.03e9 FLOPs over
	// 494.5 TFLOPS, and one key of attention (524288 FLOPs, about 1 ns).
	first := c.Prefill(0, 1)
	near(t, "Prefill(0, 1)", first, (2*8030261248+524288)/h100Rate)
	if first < 32*time.Microsecond || first > 33*time.Microsecond {
		t.Errorf("Prefill(0, 1) = %v, want about 32us", first)
	}
	// At 32k tokens, attention doubles the cost of a token.
	near(t, "Prefill(32768, 32769)", c.Prefill(32768, 32769), (2*8030261248+524288*32769.0)/h100Rate)
	if c.Prefill(7, 7) != 0 || c.Prefill(8, 7) != 0 {
		t.Errorf("Prefill of no tokens = %v, %v, want 0", c.Prefill(7, 7), c.Prefill(8, 7))
	}
	// A measured rate replaces the FLOPs: 100 tokens at 10,000 tokens/s take
	// 10 ms wherever they are.
	measured := mustCost(t, mustModel(t, "llama-3-8b"), 16, tier.Compute{TokensPerSecond: 10000}, nil)
	for _, cached := range []int{0, 5000, 100000} {
		if got := measured.Prefill(cached, cached+100); got != 10*time.Millisecond {
			t.Errorf("measured Prefill(%d, %d) = %v, want 10ms", cached, cached+100, got)
		}
	}
}

func TestLoad(t *testing.T) {
	m := mustModel(t, "llama-3-8b")
	// One 128 KiB token per block, links without latency: 2.4 us over PCIe
	// Gen5 at 54 GB/s, 18.7 us from a 7 GB/s NVMe drive.
	bare := mustCost(t, m, 1, tier.DefaultCompute(), map[tier.Medium]tier.Link{
		tier.CPU:     {Bandwidth: 54e9},
		tier.Storage: {Bandwidth: 7e9},
	})
	near(t, "Load(CPU, 1)", bare.Load(tier.CPU, 1), 128*kib/54e9)
	near(t, "Load(STORAGE, 1)", bare.Load(tier.Storage, 1), 128*kib/7e9)

	// The defaults on 512-token blocks of 64 MiB: latency once per load.
	c := mustCost(t, m, 512, tier.DefaultCompute(), nil)
	near(t, "Load(CPU, 1)", c.Load(tier.CPU, 1), 10e-6+64*kib*kib/54e9)
	near(t, "Load(STORAGE, 1)", c.Load(tier.Storage, 1), 80e-6+64*kib*kib/7e9)
	near(t, "Load(STORAGE, 3)", c.Load(tier.Storage, 3), 80e-6+3*64*kib*kib/7e9)
	for _, tc := range []struct {
		m      tier.Medium
		blocks int
	}{{tier.GPU, 10}, {tier.CPU, 0}, {tier.Storage, -1}, {tier.Medium("TAPE"), 1}} {
		if got := c.Load(tc.m, tc.blocks); got != 0 {
			t.Errorf("Load(%s, %d) = %v, want 0", tc.m, tc.blocks, got)
		}
	}
}

func TestPays(t *testing.T) {
	m := mustModel(t, "llama-3-8b")
	c := mustCost(t, m, 512, tier.DefaultCompute(), map[tier.Medium]tier.Link{tier.Storage: mustLink(t, "s3")})
	// A 512-token block recomputes in about 16.8 ms; from host memory it
	// loads in 1.25 ms, from an object store in 30 ms + 67 ms.
	if !c.Pays(tier.CPU, 1, 0) || c.Pays(tier.Storage, 1, 0) {
		t.Errorf("Pays(CPU) = %v, Pays(STORAGE over s3) = %v, want true, false", c.Pays(tier.CPU, 1, 0), c.Pays(tier.Storage, 1, 0))
	}
	if !c.Pays(tier.GPU, 1, 0) || c.Pays(tier.CPU, 0, 0) {
		t.Error("a block on the GPU always pays, and no blocks never do")
	}
	// From a local NVMe drive, 80 us + 18.7 us per token against 32.5 us
	// per token: a load pays from 80 / (32.48 - 18.72) = 5.8 tokens on.
	for tokens, want := range map[int]bool{5: false, 6: true} {
		nvme := mustCost(t, m, tokens, tier.DefaultCompute(), nil)
		if got := nvme.Pays(tier.Storage, 1, 0); got != want {
			t.Errorf("%d-token block from NVMe: Pays = %v, want %v", tokens, got, want)
		}
	}
	// Pays is exactly Load < Prefill, for every preset, medium and place.
	for _, name := range tier.ModelNames() {
		for _, bt := range []int{1, 16, 512} {
			c := mustCost(t, mustModel(t, name), bt, tier.DefaultCompute(), nil)
			for _, med := range []tier.Medium{tier.GPU, tier.CPU, tier.Storage} {
				for _, blocks := range []int{0, 1, 2, 64} {
					for _, cached := range []int{0, 1000, 32768} {
						want := blocks > 0 && c.Load(med, blocks) < c.Prefill(cached, cached+blocks*bt)
						if got := c.Pays(med, blocks, cached); got != want {
							t.Errorf("%s, %d-token blocks: Pays(%s, %d, %d) = %v, want %v", name, bt, med, blocks, cached, got, want)
						}
					}
				}
			}
		}
	}
}

// TestPaysBreakEven sets a link's latency on either side of the break-even
// (latency + bytes / bandwidth = recompute): one nanosecond below it a load
// pays, at it and above it a load does not.
func TestPaysBreakEven(t *testing.T) {
	m := mustModel(t, "llama-3-70b")
	const blockTokens, cached = 16, 1000
	bare := mustCost(t, m, blockTokens, tier.DefaultCompute(), map[tier.Medium]tier.Link{tier.CPU: {Bandwidth: 25e9}})
	recompute := bare.Prefill(cached, cached+blockTokens)
	breakEven := recompute - bare.Load(tier.CPU, 1)
	if breakEven <= 0 {
		t.Fatalf("recompute %v is no more than the transfer %v", recompute, bare.Load(tier.CPU, 1))
	}
	for _, tc := range []struct {
		latency time.Duration
		pays    bool
	}{{breakEven - 1, true}, {breakEven, false}, {breakEven + 1, false}} {
		c := mustCost(t, m, blockTokens, tier.DefaultCompute(), map[tier.Medium]tier.Link{
			tier.CPU: {Bandwidth: 25e9, Latency: tc.latency},
		})
		if got := c.Pays(tier.CPU, 1, cached); got != tc.pays {
			t.Errorf("latency %v (break-even %v): Pays = %v, want %v", tc.latency, breakEven, got, tc.pays)
		}
	}
}

func TestNewCostErrors(t *testing.T) {
	good := mustModel(t, "llama-3-8b")
	bad := good
	bad.Latent = 576
	compute := tier.DefaultCompute()
	withMFU := func(mfu float64) tier.Compute { c := compute; c.MFU = mfu; return c }
	for _, tc := range []struct {
		name        string
		model       tier.Model
		blockTokens int
		compute     tier.Compute
		links       map[tier.Medium]tier.Link
		want        string
	}{
		{"bad model", bad, 16, compute, nil, "one of the two"},
		{"no tokens per block", good, 0, compute, nil, "0 tokens per block"},
		{"negative tokens per block", good, -16, compute, nil, "-16 tokens per block"},
		{"huge blocks", good, 1 << 50, compute, nil, "2^62 bytes"},
		{"MFU 0", good, 16, withMFU(0), nil, "MFU 0"},
		{"MFU above 1", good, 16, withMFU(1.5), nil, "MFU 1.5"},
		{"negative MFU", good, 16, withMFU(-0.5), nil, "MFU -0.5"},
		{"MFU not a number", good, 16, withMFU(math.NaN()), nil, "MFU NaN"},
		{"no FLOPS", good, 16, tier.Compute{MFU: 0.5}, nil, "no prefill rate"},
		{"no compute", good, 16, tier.Compute{}, nil, "no prefill rate"},
		{"negative FLOPS", good, 16, tier.Compute{FLOPS: -1, MFU: 0.5}, nil, "FLOPS"},
		{"negative rate", good, 16, tier.Compute{TokensPerSecond: -1}, nil, "tokens/s"},
		{"infinite rate", good, 16, tier.Compute{TokensPerSecond: math.Inf(1)}, nil, "tokens/s"},
		{"link without bandwidth", good, 16, compute, map[tier.Medium]tier.Link{tier.CPU: {Latency: time.Microsecond}}, "no bandwidth (medium CPU)"},
		{"negative bandwidth", good, 16, compute, map[tier.Medium]tier.Link{tier.Storage: {Bandwidth: -1}}, "want a positive number (medium STORAGE)"},
		{"negative latency", good, 16, compute, map[tier.Medium]tier.Link{tier.CPU: {Bandwidth: 1e9, Latency: -1}}, "latency is -1ns"},
		{"GPU link", good, 16, compute, map[tier.Medium]tier.Link{tier.GPU: {Bandwidth: 1e12}}, "for the GPU"},
		{"unknown medium", good, 16, compute, map[tier.Medium]tier.Link{"TAPE": {Bandwidth: 1e8}}, `unknown medium "TAPE"`},
	} {
		c, err := tier.NewCost(tc.model, tc.blockTokens, tc.compute, tc.links)
		if err == nil || c != nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewCost = %v, %v, want an error with %q", tc.name, c, err, tc.want)
		}
	}
	// A measured rate needs no FLOPS nor MFU, and overrides them if given.
	for _, c := range []tier.Compute{{TokensPerSecond: 5000}, {FLOPS: 989e12, MFU: 0.5, TokensPerSecond: 5000}} {
		if _, err := tier.NewCost(good, 16, c, nil); err != nil {
			t.Errorf("NewCost with %+v: %v", c, err)
		}
	}
}

func TestCostLink(t *testing.T) {
	c := mustCost(t, mustModel(t, "qwen2.5-7b"), 16, tier.DefaultCompute(), map[tier.Medium]tier.Link{tier.CPU: mustLink(t, "pcie4")})
	if l, ok := c.Link(tier.CPU); !ok || l != mustLink(t, "pcie4") {
		t.Errorf("Link(CPU) = %+v, %v, want the pcie4 link given", l, ok)
	}
	if l, ok := c.Link(tier.Storage); !ok || l != mustLink(t, "nvme") {
		t.Errorf("Link(STORAGE) = %+v, %v, want the default nvme", l, ok)
	}
	if _, ok := c.Link(tier.GPU); ok {
		t.Error("Link(GPU) reports a link")
	}
}

// docsTable renders the table docs/tiers.md shows: per preset, at the
// defaults, a 512-token block's bytes, its load from each medium and its
// recompute, and the smallest block from which a load over each link
// preset pays.
func docsTable(t *testing.T) string {
	t.Helper()
	const blockTokens, far = 512, 32768
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", d.Seconds()*1e3) }
	var b strings.Builder
	b.WriteString("| model | KV per token | 512-token block | load from CPU | load from storage | recompute at 0 | recompute at 32k |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|\n")
	for _, name := range tier.ModelNames() {
		c := mustCost(t, mustModel(t, name), blockTokens, tier.DefaultCompute(), nil)
		fmt.Fprintf(&b, "| %s | %g KiB | %g MiB | %s | %s | %s | %s |\n", name,
			float64(c.Model().BytesPerToken())/kib, float64(c.BlockBytes())/kib/kib,
			ms(c.Load(tier.CPU, 1)), ms(c.Load(tier.Storage, 1)),
			ms(c.Prefill(0, blockTokens)), ms(c.Prefill(far, far+blockTokens)))
	}
	b.WriteString("\nSmallest block, in tokens, whose load pays, for a block at the start of a prompt / after 32k tokens (- : not up to 65,536):\n\n")
	b.WriteString("| model | " + strings.Join(tier.LinkNames(), " | ") + " |\n")
	b.WriteString("|---" + strings.Repeat("|---:", len(tier.LinkNames())) + "|\n")
	for _, name := range tier.ModelNames() {
		fmt.Fprintf(&b, "| %s |", name)
		for _, link := range tier.LinkNames() {
			links := map[tier.Medium]tier.Link{tier.Storage: mustLink(t, link)}
			fmt.Fprintf(&b, " %s / %s |", smallestPaying(t, name, links, 0), smallestPaying(t, name, links, far))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// smallestPaying returns the fewest tokens per block from which loading a
// block from storage after cached tokens pays, or "-" if none up to 65,536.
// Recompute minus load is convex in the block's tokens and negative at 0,
// so the blocks that pay are all those from some size on: a binary search
// finds it.
func smallestPaying(t *testing.T, name string, links map[tier.Medium]tier.Link, cached int) string {
	t.Helper()
	pays := func(tokens int) bool {
		return mustCost(t, mustModel(t, name), tokens, tier.DefaultCompute(), links).Pays(tier.Storage, 1, cached)
	}
	lo, hi := 1, 1<<16
	if !pays(hi) {
		return "-"
	}
	for lo < hi {
		if mid := (lo + hi) / 2; pays(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return fmt.Sprint(lo)
}

// TestDocsTable checks that docs/tiers.md shows the table the cost model
// gives today; run it with -v to print the table.
func TestDocsTable(t *testing.T) {
	table := docsTable(t)
	t.Log("\n" + table)
	docs, err := os.ReadFile("../docs/tiers.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(docs), table) {
		t.Errorf("docs/tiers.md does not show the cost model's table; it is now:\n%s", table)
	}
}

// TestStepRoofline checks a step's time against the roofline worked out by
// hand for llama-3-8b on the h100 preset (989 TFLOPS at 50% MFU, 3.35 TB/s).
func TestStepRoofline(t *testing.T) {
	gpu, err := tier.LookupGPU("H100")
	if err != nil {
		t.Fatal(err)
	}
	c := mustCost(t, mustModel(t, "llama-3-8b"), 16, gpu.Compute(), nil)
	m := c.Model()

	// A decode-only step of 64 sequences of 1,000 tokens each:
	//   reads:   weights 8,030,261,248 x 2 = 16,060,522,496 bytes
	//            KV 64,000 tokens x 131,072 bytes = 8,388,608,000 bytes
	//            24,449,130,496 bytes / 3.35e12 B/s = 7,298,247.9 ns
	//   compute: 2 x 8,030,261,248 x 64 = 1,027,873,439,744
	//            + 524,288 per key x (64,000 + 64) keys = 33,587,986,432
	//            1,061,461,426,176 FLOPs / 494.5e12 = 2,146,534.7 ns
	// Memory-bound: 7,298,248 ns.
	decode := tier.Step{Tokens: 64, FLOPs: m.DecodeFLOPs(64, 64000), KVTokens: 64000}
	if decode.FLOPs != 1061461426176 {
		t.Errorf("DecodeFLOPs(64, 64000) = %.0f, want 1061461426176", decode.FLOPs)
	}
	if got := c.Step(decode); got != 7298248*time.Nanosecond {
		t.Errorf("decode step = %v, want 7.298248ms", got)
	}

	// A prefill chunk of 8,192 tokens from the start of a prompt:
	//   compute: 2 x 8,030,261,248 x 8,192 = 131,567,800,287,232
	//            + 524,288 x (8,192 x 8,193 / 2) = 17,594,333,528,064
	//            149,162,133,815,296 FLOPs / 494.5e12 = 301,642,333.3 ns
	//   reads:   (16,060,522,496 + 8,192 x 131,072) / 3.35e12 = 5.1 ms
	// Compute-bound: 301,642,333 ns.
	prefill := tier.Step{Tokens: 8192, FLOPs: m.PrefillFLOPs(0, 8192), KVTokens: 8192}
	if got := c.Step(prefill); got != 301642333*time.Nanosecond {
		t.Errorf("prefill step = %v, want 301.642333ms", got)
	}

	// Without a memory bandwidth a step is its compute alone.
	flopsOnly := mustCost(t, m, 16, tier.Compute{FLOPS: 989e12, MFU: 0.5}, nil)
	if got := flopsOnly.Step(decode); got != 2146535*time.Nanosecond {
		t.Errorf("decode step without reads = %v, want 2.146535ms", got)
	}
	if tier.DefaultCompute() != gpu.Compute() {
		t.Errorf("DefaultCompute() = %+v, want the h100 preset's %+v", tier.DefaultCompute(), gpu.Compute())
	}
	if _, err := tier.LookupGPU("v100"); err == nil || !strings.Contains(err.Error(), "h100, h200, a100") {
		t.Errorf("LookupGPU(v100) = %v, want an error listing the presets", err)
	}
}
