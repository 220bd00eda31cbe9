package transfer

import (
	"testing"
	"time"
)

// TestWindow drives the adaptive in-flight limit with a modelled source:
// a link of bandwidth bw and round trip rtt, where a reply takes
// max(rtt + block/bw, limit·block/bw) (the excess waits in the
// bottleneck's queue) and the rate is limit·block over that. The limit
// must reach the bandwidth-delay product and settle near 1.5 × it, stay
// small where one request already fills the link, and halve on a
// failure.
func TestWindow(t *testing.T) {
	const block = 256 << 10
	for _, tc := range []struct {
		name     string
		bw       float64 // bytes/s
		rtt      time.Duration
		min, max int
		lo, hi   int
	}{
		{"1Gbit 40ms", 125e6, 40 * time.Millisecond, 8, 64, 28, 34},   // BDP 19-20 blocks: 1.5 × + 2
		{"1Gbit 100ms", 125e6, 100 * time.Millisecond, 8, 64, 48, 64}, // BDP 48 blocks
		{"10Gbit 40ms", 1.25e9, 40 * time.Millisecond, 8, 64, 64, 64}, // BDP 191: capped
		{"loopback", 300e6, 100 * time.Microsecond, 8, 64, 8, 16},     // full at once; the min latency is a queued one here
		{"fixed", 125e6, 40 * time.Millisecond, 32, 32, 32, 32},       // Workers = 32
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(0, 0)
			w := newWindow(tc.min, tc.max, now)
			for range 200 {
				lat := max(tc.rtt.Seconds()+block/tc.bw, float64(w.limit)*block/tc.bw)
				rate := float64(w.limit) * block / lat
				per := time.Duration(float64(block) / rate * float64(time.Second))
				for range w.limit {
					now = now.Add(per)
					w.delivered(block, time.Duration(lat*float64(time.Second)), now)
				}
			}
			if w.limit < tc.lo || w.limit > tc.hi {
				t.Fatalf("limit %d, want %d–%d", w.limit, tc.lo, tc.hi)
			}
			before := w.limit
			w.failed(now)
			if want := max(tc.min, before/2); w.limit != want {
				t.Fatalf("after a failure %d, want %d", w.limit, want)
			}
		})
	}
}
