package sim

import (
	"testing"

	"github.com/sagellm/kvevict"
)

// TestReplayAdaptiveChat replays the default chat workload under the
// adaptive strategies, which Replay sizes to the cache plus one request:
// sized to the cache alone, ARC's history evicts on its own, before the
// request's one selection, blocks the cache still holds, and its hit ratio
// falls by a tenth. S3-FIFO and SIEVE gain nothing from the extra room (they
// lose about a hundredth on this workload), so for them the test asserts
// only the bound every online strategy obeys: no fewer loads than MIN.
func TestReplayAdaptiveChat(t *testing.T) {
	if raceEnabled {
		t.Skip("a long single-threaded replay; run without -race")
	}
	w, err := Synthetic("chat", 1, 2000)
	if err != nil {
		t.Fatal(err)
	}
	const capacity = 2000
	_, optLoads := runBelady(t, w, Config{Capacity: capacity})
	for _, s := range []kvevict.Strategy{kvevict.ARC, kvevict.S3FIFO, kvevict.SIEVE} {
		var loads int64
		rep, err := replay(w, s, Config{Capacity: capacity}, &loads)
		if err != nil {
			t.Fatal(err)
		}
		if loads < optLoads {
			t.Errorf("%s: loaded %d blocks, fewer than MIN's %d", s, loads, optLoads)
		}
		if s != kvevict.ARC {
			continue
		}
		small, err := Replay(w, s, Config{Capacity: capacity, Options: []kvevict.Option{kvevict.WithCapacity(capacity)}})
		if err != nil {
			t.Fatal(err)
		}
		if rep.HitRatio < small.HitRatio+0.05 {
			t.Errorf("arc: hit ratio %.4f, not a twentieth above %.4f with the history sized to the cache alone", rep.HitRatio, small.HitRatio)
		}
	}
}
