package tier

import (
	"testing"

	"github.com/sagellm/kvevict"
)

// FuzzParse: the parsers of the command's tier flags never panic, and what
// they accept reads back the same.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"through", "selective=3", "back", "vllm", "selective=-1", "cpu=54GB/s,10us",
		"storage=nvme", "cpu=1e400GB/s,1us", "gpu", "STORAGE", "cpu=,", "=5GB/s,1ms"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if w, n, err := ParseWrite(s); err == nil {
			back := w.String()
			if w == WriteSelective {
				if n < 1 {
					t.Fatalf("ParseWrite(%q): threshold %d", s, n)
				}
				return
			}
			if back != s {
				t.Fatalf("ParseWrite(%q) = %v, which prints %q", s, w, back)
			}
		}
		if m, l, err := ParseLink(s); err == nil {
			if l.Validate() != nil || m.rank() < 1 {
				t.Fatalf("ParseLink(%q) = %s, %+v: accepted and invalid", s, m, l)
			}
		}
		if m, err := ParseMedium(s); err == nil && m.rank() < 0 {
			t.Fatalf("ParseMedium(%q) = %q", s, m)
		}
	})
}

// FuzzHierarchy drives a small hierarchy with requests drawn from the
// input under each write policy, with soft hints drawn from it too
// (RequestHints) in half the modes, and checks that every tier stays
// within its capacity and consistent, and that the runs and misses
// partition each request.
func FuzzHierarchy(f *testing.F) {
	f.Add([]byte{3, 1, 2, 3, 0, 2, 4, 5, 1, 1, 1}, uint8(0))
	f.Add([]byte{8, 1, 2, 3, 4, 5, 6, 7, 8, 2, 1, 9}, uint8(3))
	f.Add([]byte{3, 1, 2, 3, 0x91, 2, 4, 5, 0x23, 1, 1, 1, 0x45}, uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		hinted := mode/5%2 == 1
		cfg := Config{Levels: []Level{
			{Medium: GPU, Capacity: 4, Strategy: kvevict.LRU},
			{Medium: CPU, Capacity: 6, Strategy: kvevict.ARC},
		}}
		switch mode % 5 {
		case 1:
			cfg.Write, cfg.Threshold = WriteSelective, 2
		case 2:
			cfg.Write = WriteBack
		case 3:
			cfg.Write, cfg.Exclusive = WriteBack, true
		case 4:
			cfg.Write = WriteVLLM
		}
		if cfg.Write != WriteVLLM {
			cfg.Levels = append(cfg.Levels, Level{Medium: Storage, Capacity: 9, Strategy: kvevict.S3FIFO})
		}
		h, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		now := int64(0)
		for len(data) > 0 {
			n := int(data[0]%10) + 1
			data = data[1:]
			hashes := make([]uint64, 0, n)
			for i := 0; i < n && len(data) > 0; i++ {
				hashes = append(hashes, uint64(data[0]%16))
				data = data[1:]
			}
			var m *Match
			var err error
			if hinted && len(data) > 0 {
				// A byte of hints: released, a soft lease of up to 7 requests
				// ahead, a retention priority of up to 3 requests.
				b := data[0]
				data = data[1:]
				now += 16
				var hints kvevict.Hints
				hints.Released = b&1 != 0
				if k := int64(b>>1) & 7; k != 0 {
					hints.LeaseUntil = now + 16*k
				}
				if k := int64(b>>4) & 3; k != 0 {
					hints.Retention, hints.RetainUntil = b>>6*30, now+16*k
				}
				m, err = h.RequestHints(hashes, kvevict.PriorityLow, hints, now)
				if cfg.Write == WriteVLLM {
					if err == nil {
						t.Fatal("hints under WriteVLLM taken")
					}
					continue
				}
			} else {
				m, err = h.Request(hashes, kvevict.PriorityLow)
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Hits()+m.Misses != len(hashes) {
				t.Fatalf("runs %v and %d misses for %d blocks", m.Runs, m.Misses, len(hashes))
			}
			for i, l := range cfg.Levels {
				if h.Len(i) > l.Capacity {
					t.Fatalf("tier %d holds %d blocks, capacity %d", i, h.Len(i), l.Capacity)
				}
				if h.levels[i] != nil {
					if err := h.levels[i].Check(); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	})
}
