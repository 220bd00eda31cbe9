package ring

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
)

// layout is the pure shape of a two-level configuration: who is in which
// group, how the vector splits into shards, who owns which shard. It holds
// no buffers.
//
// The vector is cut into S shards (S = the largest group's size, a
// balanced split as plan.chunk makes). In a group of g members the ring's
// chunk c is the run of shards [c·S/g, (c+1)·S/g) — one shard per chunk
// when g = S — and, as in every ring reduce-scatter, member c−1 (mod g)
// ends holding chunk c reduced over the group. So group position i owns
// the shards of chunk i+1 (mod g): one each in a full group, more in a
// smaller one (a group of one owns them all). The shard ring of shard s
// has one member per group, the one owning s there, in group order.
type layout struct {
	groups []int // sizes
	start  []int // first member index of each group; len(groups)+1
	shards int   // S
}

func newLayout(groups []int) layout {
	l := layout{groups: groups, start: make([]int, len(groups)+1)}
	for k, g := range groups {
		l.start[k+1] = l.start[k] + g
		l.shards = max(l.shards, g)
	}
	return l
}

// groupOf returns member x's group and its position in it.
func (l layout) groupOf(x int) (k, i int) {
	for k = range l.groups {
		if x < l.start[k+1] {
			return k, x - l.start[k]
		}
	}
	return -1, -1
}

// chunkShards returns the shards [lo, hi) of chunk c in group k's ring.
func (l layout) chunkShards(k, c int) (lo, hi int) {
	g, S := l.groups[k], l.shards
	return c * S / g, (c + 1) * S / g
}

// owned returns the shards [lo, hi) group position i of group k owns.
func (l layout) owned(k, i int) (lo, hi int) {
	return l.chunkShards(k, (i+1)%l.groups[k])
}

// owner returns the member index owning shard s in group k.
func (l layout) owner(k, s int) int {
	g := l.groups[k]
	c := s * g / l.shards // chunk c holds s: c·S/g ≤ s < (c+1)·S/g
	for c > 0 && c*l.shards/g > s {
		c--
	}
	for c+1 < g && (c+1)*l.shards/g <= s {
		c++
	}
	return l.start[k] + (c+g-1)%g
}

// shard returns the element range of shard s of a vector of total elements.
func (l layout) shard(s, total int) (lo, hi int) {
	S := int64(l.shards)
	return int(int64(s) * int64(total) / S), int(int64(s+1) * int64(total) / S)
}

// groupBounds returns the chunk boundaries of group k's ring over a vector
// of total elements (len = group size + 1).
func (l layout) groupBounds(k, total int) []int {
	g := l.groups[k]
	b := make([]int, g+1)
	for c := range g {
		lo, _ := l.chunkShards(k, c)
		b[c], _ = l.shard(lo, total)
	}
	b[g] = total
	return b
}

// GroupRing returns the configuration of group k's ring: its members in
// order, bound to c (its id hashes c's id and the part "group K").
func (c *Config) GroupRing(k int) (Config, error) {
	if !c.TwoLevel() || k < 0 || k >= len(c.Groups) {
		return Config{}, fmt.Errorf("%w: no group %d", ErrConfig, k)
	}
	l := newLayout(c.Groups)
	return Config{Job: c.Job, Epoch: c.Epoch, Generation: c.Generation, Parent: c.ID(), Part: "group " + strconv.Itoa(k),
		Members: append([]Member(nil), c.Members[l.start[k]:l.start[k+1]]...)}, nil
}

// ShardRing returns the configuration of shard s's ring across the groups:
// the member owning s in every group, in group order, bound to c (part
// "shard S").
func (c *Config) ShardRing(s int) (Config, error) {
	if !c.TwoLevel() {
		return Config{}, fmt.Errorf("%w: not a two-level configuration", ErrConfig)
	}
	l := newLayout(c.Groups)
	if s < 0 || s >= l.shards {
		return Config{}, fmt.Errorf("%w: no shard %d", ErrConfig, s)
	}
	out := Config{Job: c.Job, Epoch: c.Epoch, Generation: c.Generation, Parent: c.ID(), Part: "shard " + strconv.Itoa(s)}
	for k := range c.Groups {
		out.Members = append(out.Members, c.Members[l.owner(k, s)])
	}
	return out, nil
}

// twoLevel is a node's part in a two-level configuration: the Comm of its
// group's ring and one per shard ring it belongs to (one in a full group,
// several in a smaller one). They share the parent's key, transport,
// options and counters.
type twoLevel struct {
	parent    *Comm
	lay       layout
	self      int // index in the parent configuration
	k, i      int // group and position in it
	group     *Comm
	shards    []*Comm // shard rings, for shards sLo, sLo+1, …
	sLo       int
	weights   []int // shard rings' member weights: the groups' sizes
	partIndex map[string]int
}

func newTwoLevel(parent *Comm, cfg Config, self int) (*twoLevel, error) {
	l := newLayout(cfg.Groups)
	t := &twoLevel{parent: parent, lay: l, self: self, weights: l.groups, partIndex: map[string]int{}}
	t.k, t.i = l.groupOf(self)
	for j, m := range cfg.Members {
		t.partIndex[m.ID] = j
	}
	sub := func(c Config) (*Comm, error) {
		o := parent.opt
		o.Config = c
		sc := &Comm{opt: o, pub: parent.pub, st: parent.st, sub: true}
		if err := sc.install(c); err != nil {
			return nil, err
		}
		return sc, nil
	}
	gc, err := cfg.GroupRing(t.k)
	if err != nil {
		return nil, err
	}
	if t.group, err = sub(gc); err != nil {
		return nil, err
	}
	lo, hi := l.owned(t.k, t.i)
	t.sLo = lo
	for s := lo; s < hi; s++ {
		sc, err := cfg.ShardRing(s)
		if err != nil {
			return nil, err
		}
		c, err := sub(sc)
		if err != nil {
			return nil, err
		}
		t.shards = append(t.shards, c)
	}
	return t, nil
}

func (t *twoLevel) closeLinks() {
	t.group.closeLinks()
	for _, s := range t.shards {
		s.closeLinks()
	}
}

// lift rewrites a sub-ring's PeerError to name the suspect by its index in
// the two-level configuration.
func (t *twoLevel) lift(err error) error {
	var pe *PeerError
	if errors.As(err, &pe) {
		q := *pe
		if j, ok := t.partIndex[pe.SuspectID]; ok {
			q.Suspect = j
		}
		return &q
	}
	return err
}

// allReduce runs the three phases: a reduce-scatter of src inside the
// group into work, an all-reduce of each owned shard of work (in place)
// across the groups, an all-gather of work inside the group. src is only
// read. On error the caller closes every sub-ring's links, so members of
// other rings waiting on this node see a broken link at once.
func (t *twoLevel) allReduce(ctx context.Context, work, src []float32, op Op, call Call) error {
	n, g := len(t.parent.cfg.Members), t.lay.groups[t.k]
	if uint64(len(src)) > math.MaxUint32*uint64(max(g, len(t.lay.groups))) {
		return ErrSize
	}
	bounds := t.lay.groupBounds(t.k, len(src))
	if g == 1 {
		copy(work, src) // a group of one: its partial sum is its input
	} else if _, err := t.group.allReduce(ctx, work, src, Sum, call, part{scatterOnly: true, bounds: bounds}); err != nil {
		return t.lift(err)
	}
	cross := func(ctx context.Context, s int, c *Comm) error {
		lo, hi := t.lay.shard(s, len(src))
		sh := work[lo:hi]
		_, err := c.allReduce(ctx, sh, sh, op, call, part{cross: true, weight: t.weights, whole: n, div: n})
		return err
	}
	if len(t.shards) == 1 {
		if err := cross(ctx, t.sLo, t.shards[0]); err != nil {
			return t.lift(err)
		}
	} else {
		// Several shard rings (a group smaller than the largest): run
		// them at once; the first failure ends the others.
		sctx, cancel := context.WithCancel(ctx)
		errs := make([]error, len(t.shards))
		var wg sync.WaitGroup
		for j, c := range t.shards {
			wg.Go(func() {
				if errs[j] = cross(sctx, t.sLo+j, c); errs[j] != nil {
					cancel()
				}
			})
		}
		wg.Wait()
		cancel()
		if err := firstPeerError(errs); err != nil {
			return t.lift(err)
		}
	}
	if g > 1 {
		if _, err := t.group.allReduce(ctx, work, work, op, call, part{gatherOnly: true, bounds: bounds, whole: n}); err != nil {
			return t.lift(err)
		}
	}
	return nil
}

// firstPeerError returns the first error among errs that is not a
// cancellation (the shard rings a node ran at once: the others were
// cancelled because one failed), else the first error.
func firstPeerError(errs []error) error {
	var first error
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}
