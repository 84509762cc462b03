package tier

import (
	"fmt"
	"strings"
)

// Medium names where a tier keeps its blocks, as vLLM's KV events name it
// (BlockStored's medium): the GPU's memory, the host's memory, or storage
// (a local disk, a remote file system or object store).
type Medium string

// The mediums, in the order a hierarchy descends them.
const (
	GPU     Medium = "GPU"
	CPU     Medium = "CPU"
	Storage Medium = "STORAGE"
)

// mediums lists every medium, top first.
var mediums = []Medium{GPU, CPU, Storage}

// ParseMedium returns the medium named s, in any case ("gpu", "CPU",
// "storage"), or an error naming the mediums there are.
func ParseMedium(s string) (Medium, error) {
	for _, m := range mediums {
		if strings.EqualFold(s, string(m)) {
			return m, nil
		}
	}
	return "", fmt.Errorf("tier: unknown medium %q (want gpu, cpu or storage)", s)
}

// rank is m's place in a hierarchy, 0 for the GPU; -1 for an unknown medium.
func (m Medium) rank() int {
	for i, k := range mediums {
		if k == m {
			return i
		}
	}
	return -1
}
