package ring

import "testing"

// Each node sends and receives 2(N−1) chunks; over a call every element is
// sent by every node exactly twice except in one chunk (its final one,
// sent once, and its own, sent once); segments tile every chunk.
func TestPlanSchedule(t *testing.T) {
	for n := 2; n <= 9; n++ {
		for _, total := range []int{0, 1, n - 1, n, 3*n + 1, 1000} {
			for _, seg := range []int{1, 7, 64} {
				for self := range n {
					p := newPlan(n, self, total, seg)
					covered := make([]int, total)
					for c := range n {
						lo, hi := p.chunk(c)
						if c > 0 {
							if plo, phi := p.chunk(c - 1); phi != lo || hi-lo > phi-plo+1 || hi-lo < phi-plo-1 {
								t.Fatalf("n=%d total=%d: chunks not balanced and contiguous", n, total)
							}
						}
						prev := lo
						for k := range p.segs {
							slo, shi := p.segment(c, k)
							if slo != prev || shi-slo > seg {
								t.Fatalf("n=%d total=%d seg=%d: segment %d of chunk %d is [%d,%d)", n, total, seg, k, c, slo, shi)
							}
							for i := slo; i < shi; i++ {
								covered[i]++
							}
							prev = shi
						}
						if prev != hi {
							t.Fatalf("segments do not tile chunk %d", c)
						}
					}
					for i, v := range covered {
						if v != 1 {
							t.Fatalf("element %d covered %d times", i, v)
						}
					}
					// Sent chunk at step t+1 is the one received at step t.
					for s := 0; s+1 < p.steps(); s++ {
						if p.sendChunk(s+1) != p.recvChunk(s) {
							t.Fatal("forwarding broken")
						}
					}
					// After N−1 scatter steps this node owns chunk self+1.
					if p.recvChunk(n-2) != (self+1)%n {
						t.Fatalf("final chunk %d, want %d", p.recvChunk(n-2), (self+1)%n)
					}
					// Every chunk but self+1 is received exactly once while gathering.
					seen := map[int]bool{}
					for s := n - 1; s < p.steps(); s++ {
						seen[p.recvChunk(s)] = true
					}
					if len(seen) != n-1 || seen[(self+1)%n] {
						t.Fatal("all-gather does not deliver every other chunk once")
					}
					for s := range p.steps() {
						ph, r := p.phaseRound(s)
						if back, ok := p.step(ph, uint32(r)); !ok || back != s {
							t.Fatal("phaseRound/step not inverse")
						}
					}
				}
			}
		}
	}
}

func TestBF16Rounding(t *testing.T) {
	for _, tc := range []struct{ in, want float32 }{
		{1, 1}, {-2.5, -2.5}, {1 + 1.0/256, 1}, {1 + 3.0/256, 1 + 1.0/64}, {255, 255}, {257, 256}, {259, 260},
	} {
		if got := RoundBF16(tc.in); got != tc.want {
			t.Errorf("RoundBF16(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
