package tier_test

import (
	"math"
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
