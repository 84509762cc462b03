package tier_test

import (
	"fmt"

	"github.com/sagellm/kvevict/tier"
)

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
