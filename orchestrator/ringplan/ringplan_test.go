package ringplan

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

func randomMatrix(r *rand.Rand, n int, max uint64) Matrix {
	m := make(Matrix, n)
	for i := range m {
		m[i] = make([]uint64, n)
	}
	for i := range n {
		for j := range n {
			if i != j {
				m[i][j] = 1 + r.Uint64N(max)
			}
		}
	}
	return m
}

// bruteForce enumerates every ring starting at 0.
func bruteForce(m Matrix) uint64 {
	n := len(m)
	rest := make([]int, n-1)
	for i := range rest {
		rest[i] = i + 1
	}
	var best uint64
	var perm func(k int)
	perm = func(k int) {
		if k == len(rest) {
			best = max(best, Bottleneck(m, append([]int{0}, rest...)))
			return
		}
		for i := k; i < len(rest); i++ {
			rest[k], rest[i] = rest[i], rest[k]
			perm(k + 1)
			rest[k], rest[i] = rest[i], rest[k]
		}
	}
	perm(0)
	return best
}

func isPermutation(order []int, n int) bool {
	s := slices.Clone(order)
	slices.Sort(s)
	for i, v := range s {
		if v != i {
			return false
		}
	}
	return len(s) == n
}

func TestExactIsOptimal(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for trial := range 200 {
		n := 4 + trial%5            // 4..8
		m := randomMatrix(r, n, 20) // few distinct values: many ties
		order, err := Build(DefaultConfig(), m)
		if err != nil {
			t.Fatal(err)
		}
		if !isPermutation(order, n) || order[0] != 0 {
			t.Fatalf("trial %d: not a ring from 0: %v", trial, order)
		}
		if got, want := Bottleneck(m, order), bruteForce(m); got != want {
			t.Fatalf("trial %d (n=%d): bottleneck %d, optimum %d", trial, n, got, want)
		}
	}
}

func TestHeuristic(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	cfg := Config{ExactMax: 0, Starts: 8}
	optimal := 0
	for trial := range 100 {
		n := 9 + trial%4
		m := randomMatrix(r, n, 1000)
		order, err := Build(cfg, m)
		if err != nil {
			t.Fatal(err)
		}
		if !isPermutation(order, n) {
			t.Fatalf("not a permutation: %v", order)
		}
		nn := NearestNeighbour(m, 0)
		h := Bottleneck(m, order)
		if h < Bottleneck(m, nn) {
			t.Fatalf("trial %d: 2-opt lowered the bottleneck %d → %d", trial, Bottleneck(m, nn), h)
		}
		e := Bottleneck(m, Exact(m))
		if h > e {
			t.Fatalf("trial %d: heuristic %d beats the exact optimum %d", trial, h, e)
		}
		if h == e {
			optimal++
		}
	}
	t.Logf("heuristic optimal on %d/100 random rings of 9..12", optimal)
}

func TestPlantedRing(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	const n = 300
	m := randomMatrix(r, n, 50)
	hidden := r.Perm(n)
	for k := range n {
		a, b := hidden[k], hidden[(k+1)%n]
		m[a][b] = 100 + r.Uint64N(100)
		m[b][a] = 100 + r.Uint64N(100)
	}
	order, err := Build(DefaultConfig(), m)
	if err != nil {
		t.Fatal(err)
	}
	if b := Bottleneck(m, order); b < 100 {
		t.Fatalf("missed the planted fast ring: bottleneck %d", b)
	}
}

func TestTwoOptRaisesBottleneck(t *testing.T) {
	// 0-1-2-3-4-5 with a slow link 2→3 in the given order; a faster ring exists.
	m := randomMatrix(rand.New(rand.NewPCG(5, 5)), 6, 1)
	for i := range m {
		for j := range m {
			if i != j {
				m[i][j] = 10
			}
		}
	}
	m[2][3], m[3][2] = 1, 1
	order := []int{0, 1, 2, 3, 4, 5}
	TwoOpt(m, order)
	if !isPermutation(order, 6) || Bottleneck(m, order) != 10 {
		t.Fatalf("2-opt left %v with bottleneck %d", order, Bottleneck(m, order))
	}
}

func TestReverse(t *testing.T) {
	o := []int{0, 1, 2, 3, 4, 5}
	reverse(o, 4, 1) // cyclic 4,5,0,1
	if !reflect.DeepEqual(o, []int{5, 4, 2, 3, 1, 0}) {
		t.Fatalf("got %v", o)
	}
}

func TestRepair(t *testing.T) {
	bw := map[[2]string]uint64{}
	set := func(a, b string, v uint64) { bw[[2]string{a, b}], bw[[2]string{b, a}] = v, v }
	get := func(a, b string) uint64 { return bw[[2]string{a, b}] }
	ring := []string{"a", "b", "c", "d", "e"}
	for i := range ring {
		for j := range ring {
			if i != j {
				set(ring[i], ring[j], 100)
			}
		}
	}
	got, err := Repair(ring, "c", "", get)
	if err != nil || !reflect.DeepEqual(got, []string{"a", "b", "d", "e"}) {
		t.Fatalf("remove: %v %v", got, err)
	}
	// An unmeasured standby takes the failed member's slot.
	got, _ = Repair(ring, "c", "s", get)
	if !reflect.DeepEqual(got, []string{"a", "b", "s", "d", "e"}) {
		t.Fatalf("home slot: %v", got)
	}
	got, _ = Repair(ring, "a", "s", get)
	if !reflect.DeepEqual(got, []string{"b", "c", "d", "e", "s"}) {
		t.Fatalf("home slot at the wrap: %v", got)
	}
	// A measured standby goes where its links are fast.
	set("s", "d", 90)
	set("s", "e", 80)
	got, _ = Repair(ring, "b", "s", get)
	if !reflect.DeepEqual(got, []string{"a", "c", "d", "s", "e"}) {
		t.Fatalf("best slot: %v", got)
	}
	if _, err := Repair(ring, "zz", "", get); err == nil {
		t.Fatal("repairing an absent member succeeded")
	}
	if _, err := Repair(ring, "a", "b", get); err == nil {
		t.Fatal("a member was accepted as standby")
	}
}

func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{12, 64, 1000} {
		m := randomMatrix(rand.New(rand.NewPCG(uint64(n), 1)), n, 10_000)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Build(DefaultConfig(), m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
