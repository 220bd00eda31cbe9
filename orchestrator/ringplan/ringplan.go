// Package ringplan orders a job's members into a ring that maximises the
// bottleneck link, and repairs a ring incrementally when a member fails.
//
// A ring all-reduce moves 2(N−1)/N of the vector over every link, so its
// speed is set by the slowest link: the objective is the bottleneck
// (minimum) bandwidth over the ring's N links, not their sum. Build uses an
// exact search for small rings and nearest neighbour followed by a
// bottleneck 2-opt for larger ones. Everything here is a pure,
// deterministic function of its inputs.
package ringplan

import (
	"errors"
	"fmt"
	"sort"
)

// ErrInput is wrapped by every error about the arguments.
var ErrInput = errors.New("ringplan: invalid input")

// Matrix holds measured bandwidth: m[i][j] is the link i→j in any unit
// (the orchestrator uses kbit/s); 0 means not measured or unusable. Build
// treats links as undirected and uses min(m[i][j], m[j][i]).
type Matrix [][]uint64

// Config tunes Build.
type Config struct {
	// ExactMax is the largest ring solved exactly (subset dynamic
	// programming, O(2ᴺ·N²) per probe). 0 disables the exact search.
	ExactMax int
	// Starts is how many nearest-neighbour starting points the heuristic
	// tries (spread evenly over the members).
	Starts int
	// Groups, when ≥ 2, makes every ring built a two-level all-reduce in
	// that many balanced groups of consecutive members (SplitGroups; a
	// ring too small for groups of two stays flat). 0: flat rings.
	Groups int
}

// DefaultConfig solves up to 12 members exactly and tries 8 starts.
func DefaultConfig() Config { return Config{ExactMax: 12, Starts: 8} }

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.ExactMax < 0 || c.ExactMax > 16 {
		return fmt.Errorf("%w: ExactMax %d outside 0..16", ErrInput, c.ExactMax)
	}
	if c.Groups < 0 || c.Groups > 1<<12 {
		return fmt.Errorf("%w: Groups %d outside 0..4096", ErrInput, c.Groups)
	}
	if c.Starts < 1 {
		return fmt.Errorf("%w: Starts %d, want at least 1", ErrInput, c.Starts)
	}
	return nil
}

func (m Matrix) w(i, j int) uint64 { return min(m[i][j], m[j][i]) }

func (m Matrix) check() error {
	for i, row := range m {
		if len(row) != len(m) {
			return fmt.Errorf("%w: row %d has %d entries, want %d", ErrInput, i, len(row), len(m))
		}
	}
	return nil
}

// Bottleneck is the smallest link bandwidth of the ring order (0 for fewer
// than two members).
func Bottleneck(m Matrix, order []int) uint64 {
	if len(order) < 2 {
		return 0
	}
	b := ^uint64(0)
	for k := range order {
		b = min(b, m.w(order[k], order[(k+1)%len(order)]))
	}
	return b
}

// Build returns a ring order over members 0..len(m)-1, starting at member 0.
func Build(cfg Config, m Matrix) ([]int, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	n := len(m)
	if n <= 3 {
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		return order, nil // every order of ≤ 3 members uses the same links
	}
	if n <= cfg.ExactMax {
		return Exact(m), nil
	}
	var best []int
	var bestB uint64
	for s := range min(cfg.Starts, n) {
		order := NearestNeighbour(m, s*n/min(cfg.Starts, n))
		TwoOpt(m, order)
		if b := Bottleneck(m, order); best == nil || b > bestB {
			best, bestB = order, b
		}
	}
	return rotate(best, 0), nil
}

// NearestNeighbour starts at start and repeatedly moves to the unvisited
// member with the highest bandwidth (ties: lowest index).
func NearestNeighbour(m Matrix, start int) []int {
	n := len(m)
	seen := make([]bool, n)
	order := make([]int, 0, n)
	cur := start
	seen[cur] = true
	order = append(order, cur)
	for len(order) < n {
		next := -1
		for j := range n {
			if !seen[j] && (next < 0 || m.w(cur, j) > m.w(cur, next)) {
				next = j
			}
		}
		seen[next] = true
		order = append(order, next)
		cur = next
	}
	return order
}

// TwoOpt raises the bottleneck of order in place. A 2-opt move replaces
// links (a,b) and (c,d) with (a,c) and (b,d) by reversing the path b…c.
// Only moves that remove a link at the current bottleneck can raise it, so
// each round looks at those links only and accepts a move when both new
// links are strictly faster than the bottleneck. Each accepted move lowers
// the number of links at or below the bottleneck, so the loop ends.
func TwoOpt(m Matrix, order []int) {
	n := len(order)
	if n < 4 {
		return
	}
	for {
		b := Bottleneck(m, order)
		improved := false
		for i := 0; i < n && !improved; i++ {
			a, bb := order[i], order[(i+1)%n]
			if m.w(a, bb) != b {
				continue
			}
			for k := 2; k < n-1; k++ {
				j := (i + k) % n
				c, d := order[j], order[(j+1)%n]
				if m.w(a, c) > b && m.w(bb, d) > b {
					reverse(order, (i+1)%n, j)
					improved = true
					break
				}
			}
		}
		if !improved {
			return
		}
	}
}

// reverse reverses the cyclic segment order[from..to].
func reverse(order []int, from, to int) {
	n := len(order)
	count := (to-from+n)%n + 1
	for k := range count / 2 {
		i, j := (from+k)%n, (to-k+n)%n
		order[i], order[j] = order[j], order[i]
	}
}

func rotate(order []int, first int) []int {
	out := make([]int, 0, len(order))
	for k, v := range order {
		if v == first {
			out = append(out, order[k:]...)
			return append(out, order[:k]...)
		}
	}
	return order
}

// Exact returns a ring with the largest possible bottleneck (ties: the
// first found in a fixed search order), starting at member 0. It probes the
// distinct bandwidths by binary search, asking at each whether a
// Hamiltonian cycle exists over links at least that fast (subset dynamic
// programming). Use only for small rings.
func Exact(m Matrix) []int {
	n := len(m)
	vals := map[uint64]bool{}
	for i := range n {
		for j := i + 1; j < n; j++ {
			vals[m.w(i, j)] = true
		}
	}
	ws := make([]uint64, 0, len(vals))
	for v := range vals {
		ws = append(ws, v)
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i] < ws[j] })
	lo, hi := 0, len(ws)-1 // a cycle always exists at ws[0] (complete graph)
	best := hamiltonian(m, ws[0])
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if c := hamiltonian(m, ws[mid]); c != nil {
			best, lo = c, mid
		} else {
			hi = mid - 1
		}
	}
	return best
}

// hamiltonian finds a cycle through all members using only links ≥ t.
func hamiltonian(m Matrix, t uint64) []int {
	n := len(m)
	full := 1<<n - 1
	// reach[mask] is a bitset of end vertices v such that a path from 0
	// visiting exactly mask ends at v.
	reach := make([]uint32, 1<<n)
	reach[1] = 1
	for mask := 1; mask <= full; mask += 2 { // masks containing vertex 0
		ends := reach[mask]
		if ends == 0 {
			continue
		}
		for v := range n {
			if ends&(1<<v) == 0 {
				continue
			}
			for u := range n {
				if mask&(1<<u) == 0 && m.w(v, u) >= t {
					reach[mask|1<<u] |= 1 << u
				}
			}
		}
	}
	last := -1
	for v := 1; v < n; v++ {
		if reach[full]&(1<<v) != 0 && m.w(v, 0) >= t {
			last = v
			break
		}
	}
	if last < 0 {
		return nil
	}
	order := make([]int, n)
	mask, v := full, last
	for k := n - 1; k > 0; k-- {
		order[k] = v
		prev := mask &^ (1 << v)
		for u := range n {
			if reach[prev]&(1<<u) != 0 && m.w(u, v) >= t {
				mask, v = prev, u
				break
			}
		}
	}
	order[0] = 0
	return order
}

// Repair removes failed from the ring order (its predecessor now links to
// its successor) and, when standby is not empty, inserts the standby where
// the resulting bottleneck is highest; ties go to the failed member's old
// slot, then to the earliest slot. bw(a, b) is the measured bandwidth
// between two members (0 when unknown). The other members keep their
// relative order: this is an incremental repair, not a rebuild.
func Repair(order []string, failed, standby string, bw func(a, b string) uint64) ([]string, error) {
	at := -1
	for k, id := range order {
		if id == failed {
			at = k
		}
	}
	if at < 0 {
		return nil, fmt.Errorf("%w: %q is not in the ring", ErrInput, failed)
	}
	out := make([]string, 0, len(order))
	out = append(out, order[:at]...)
	out = append(out, order[at+1:]...)
	if standby == "" {
		return out, nil
	}
	home := at - 1
	if home < 0 {
		home = len(out) - 1
	}
	return insert(out, standby, home, bw)
}

// Insert adds x to the ring where the resulting bottleneck is highest
// (ties: the earliest slot). Slot k is between order[k] and order[k+1].
func Insert(order []string, x string, bw func(a, b string) uint64) ([]string, error) {
	return insert(order, x, -1, bw)
}

func insert(out []string, x string, home int, bw func(a, b string) uint64) ([]string, error) {
	for _, id := range out {
		if id == x {
			return nil, fmt.Errorf("%w: %q is already in the ring", ErrInput, x)
		}
	}
	n := len(out)
	if n == 0 {
		return []string{x}, nil
	}
	link := func(a, b string) uint64 { return min(bw(a, b), bw(b, a)) }
	// links[k] is out[k]→out[k+1]; inserting at slot k replaces links[k].
	links := make([]uint64, n)
	for k := range n {
		links[k] = link(out[k], out[(k+1)%n])
	}
	// Prefix and suffix minima give "bottleneck without link k" in O(1).
	pre := make([]uint64, n+1)
	suf := make([]uint64, n+1)
	pre[0], suf[n] = ^uint64(0), ^uint64(0)
	for k := range n {
		pre[k+1] = min(pre[k], links[k])
	}
	for k := n - 1; k >= 0; k-- {
		suf[k] = min(suf[k+1], links[k])
	}
	best, bestB := -1, uint64(0)
	for k := range n {
		b := min(pre[k], suf[k+1], link(out[k], x), link(x, out[(k+1)%n]))
		if best < 0 || b > bestB || (b == bestB && k == home && best != home) {
			best, bestB = k, b
		}
	}
	res := make([]string, 0, n+1)
	res = append(res, out[:best+1]...)
	res = append(res, x)
	return append(res, out[best+1:]...), nil
}
