package tier_test

import (
	"fmt"
	"time"

	"github.com/sagellm/kvevict/tier"
)

// Loading a 512-token block of Llama-3-8B from host memory or from a local
// NVMe drive, against recomputing it on an H100 at 50% MFU.
func ExampleCost() {
	model, err := tier.LookupModel("llama-3-8b")
	if err != nil {
		fmt.Println(err)
		return
	}
	cost, err := tier.NewCost(model, 512, tier.DefaultCompute(), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s, %d-token blocks of %d MiB\n", model.Name, cost.BlockTokens(), cost.BlockBytes()>>20)
	for _, m := range []tier.Medium{tier.CPU, tier.Storage} {
		fmt.Printf("%-17s %9v (pays: %v)\n", "load from "+m, cost.Load(m, 1).Round(time.Microsecond), cost.Pays(m, 1, 0))
	}
	fmt.Printf("%-17s %9v\n", "recompute at 0", cost.Prefill(0, 512).Round(time.Microsecond))
	fmt.Printf("%-17s %9v\n", "recompute at 32k", cost.Prefill(32768, 32768+512).Round(time.Microsecond))
	// Output:
	// llama-3-8b, 512-token blocks of 64 MiB
	// load from CPU       1.253ms (pays: true)
	// load from STORAGE   9.667ms (pays: true)
	// recompute at 0     16.768ms
	// recompute at 32k   34.556ms
}

// The -link flag's forms: a bandwidth and a latency, or a preset.
func ExampleParseLink() {
	for _, s := range []string{"cpu=54GB/s,10us", "storage=s3", "storage=7Gb/s,80us"} {
		m, l, err := tier.ParseLink(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s over %s\n", m, l)
	}
	// Output:
	// CPU over 54GB/s,10us
	// STORAGE over 1GB/s,30ms
	// tier: link "storage=7Gb/s,80us": bandwidth "7Gb/s": a lowercase b is bits; give bytes (GB/s, GiB/s, MB/s, MiB/s, B/s) (want MEDIUM=BANDWIDTH,LATENCY as cpu=54GB/s,10us, or MEDIUM=PRESET as storage=nvme)
}
