package sim

import (
	"testing"

	"github.com/sagellm/kvevict"
)

// TestReplayAdaptiveChat replays the default chat workload under the
// adaptive strategies, which Replay sizes to the cache plus one request.
// Sized to the cache alone, the history evicted on its own, before the
// request's one selection, blocks the cache still held, and ARC fell from
// 0.644 to 0.529 at 2000 blocks. The golden numbers come from a run of this
// replay.
func TestReplayAdaptiveChat(t *testing.T) {
	if raceEnabled {
		t.Skip("a long single-threaded replay; run without -race")
	}
	w, err := Synthetic("chat", 1, 2000)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		strategy kvevict.Strategy
		want     float64
	}{
		{kvevict.ARC, 0.6439},
		{kvevict.S3FIFO, 0.5885},
		{kvevict.SIEVE, 0.4583},
	} {
		rep, err := Replay(w, tc.strategy, Config{Capacity: 2000})
		if err != nil {
			t.Fatal(err)
		}
		checkRatio(t, string(tc.strategy)+" hit ratio", rep.HitRatio, tc.want)
	}
}
