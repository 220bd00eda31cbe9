// Package workertest is an in-process orchestrator for worker tests: it
// registers nodes, provisions one job once enough nodes registered, runs it
// epoch by epoch with a ring, validates every submitted delta (signature,
// registered key, metadata, sequence, shapes, one delta per slot), merges an
// epoch by the plain mean of its syncs' contributions, publishes it as a
// checkpoint and finally marks the job Published.
//
// Ring repair: a suspect report backed by signed norm evidence (verified)
// removes and bans the suspect at once; a report without evidence removes
// the suspect only once its heartbeats have stopped for DeadAfter.
package workertest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/zooai/gym/basemodel"
	"github.com/zooai/gym/delta"
	"github.com/zooai/gym/edkey"
	"github.com/zooai/gym/jobconf"
	"github.com/zooai/gym/jobspec"
	"github.com/zooai/gym/model"
	"github.com/zooai/gym/worker"
)

// Slot is one sync of one epoch.
type Slot struct{ Epoch, Sync int }

// Node is what the fake knows about a registered node.
type Node struct {
	ID               string
	RingAddr, Probe  string
	Registered       bool
	Registrations    int
	LastBeat         time.Time
	LastSeq          uint64
	Banned           bool
	HeartbeatTooSoon int
	lastHB           time.Time
}

// Fake is the in-process orchestrator. Create it with New and hand each
// worker Client(key).
type Fake struct {
	// MinGap is the least spacing of one node's heartbeats; closer ones
	// are counted in Node.HeartbeatTooSoon (and answered).
	MinGap time.Duration
	// DeadAfter is how long a node reported without evidence must have
	// been silent before it is removed.
	DeadAfter time.Duration
	// FailAfterProvisioning fails the job instead of running it once
	// every member reported its bandwidth.
	FailAfterProvisioning bool
	// Stall, if set, holds a node's delta submission for (epoch, sync)
	// until the caller's context ends when it returns true: a node that
	// falls silent before its ring call.
	Stall func(node string, epoch, sync int) bool

	mu       sync.Mutex
	job      string
	spec     jobspec.Spec
	plan     jobconf.Plan
	template *model.Adapter
	need     int

	nodes   map[string]*Node
	members []string // the job's nodes, in registration order
	state   string
	epoch   int
	ring    []string
	gen     uint64
	cp      string
	kbps    map[string]map[string]uint64

	start       *model.Adapter
	deltas      map[Slot]map[string]*model.Adapter
	bases       map[Slot]map[string]string
	losses      map[Slot]map[string]float64
	files       map[Slot]map[string][32]byte
	checkpoints map[string]*model.Adapter
	reports     []worker.Suspect
	reporters   []string
	pending     []pendingReport
	rejections  []string
	errs        []string
	changed     chan struct{}
}

type pendingReport struct {
	suspect string
	gen     uint64
}

// New returns a fake that provisions job with spec once need nodes
// registered.
func New(job string, spec jobspec.Spec, need int) (*Fake, error) {
	base, err := basemodel.Load()
	if err != nil {
		return nil, err
	}
	plan, err := jobconf.FromSpec(job, spec, base)
	if err != nil {
		return nil, err
	}
	init, err := plan.InitialAdapter(base)
	if err != nil {
		return nil, err
	}
	return &Fake{MinGap: time.Second, DeadAfter: time.Second, job: job, spec: spec, plan: plan, template: init.ZeroLike(),
		need: need, nodes: map[string]*Node{}, start: init, kbps: map[string]map[string]uint64{},
		deltas: map[Slot]map[string]*model.Adapter{}, bases: map[Slot]map[string]string{},
		losses: map[Slot]map[string]float64{}, files: map[Slot]map[string][32]byte{},
		checkpoints: map[string]*model.Adapter{}, changed: make(chan struct{})}, nil
}

// Client returns the orchestrator as the node with key sees it.
func (f *Fake) Client(key ed25519.PrivateKey) worker.Orchestrator {
	return &client{f: f, id: hex.EncodeToString(key.Public().(ed25519.PublicKey))}
}

func (f *Fake) errorf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

func (f *Fake) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Wait blocks until cond (called under the fake's lock) holds or ctx ends.
func (f *Fake) Wait(ctx context.Context, cond func(*Fake) bool) error {
	for {
		f.mu.Lock()
		ok, ch := cond(f), f.changed
		f.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Errors lists protocol violations the fake saw.
func (f *Fake) Errors() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.errs)
}

// Rejections lists the rejected deltas ("node slot reason").
func (f *Fake) Rejections() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.rejections)
}

// State returns the job state and epoch.
func (f *Fake) State() (string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state, f.epoch
}

// Ring returns the current ring and its generation.
func (f *Fake) Ring() ([]string, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ring), f.gen
}

// Deltas returns, per slot, the nodes whose delta was accepted.
func (f *Fake) Deltas() map[Slot][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[Slot][]string{}
	for s, m := range f.deltas {
		for id := range m {
			out[s] = append(out[s], id)
		}
		slices.Sort(out[s])
	}
	return out
}

// Bases returns, per slot, the base checkpoints the deltas named.
func (f *Fake) Bases() map[Slot]map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[Slot]map[string]string{}
	for s, m := range f.bases {
		out[s] = map[string]string{}
		for k, v := range m {
			out[s][k] = v
		}
	}
	return out
}

// Reports returns the suspect reports received and who sent them.
func (f *Fake) Reports() ([]worker.Suspect, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reports), slices.Clone(f.reporters)
}

// Checkpoint returns a published checkpoint.
func (f *Fake) Checkpoint(cid string) *model.Adapter {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a := f.checkpoints[cid]; a != nil {
		return a.Clone()
	}
	return nil
}

// Node returns a copy of what the fake knows about node id.
func (f *Fake) Node(id string) (Node, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[id]
	if !ok {
		return Node{}, false
	}
	return *n, true
}

// Forget drops node id's registration, as an orchestrator restart would:
// its next heartbeat fails with worker.ErrUnknownNode.
func (f *Fake) Forget(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := f.nodes[id]; n != nil {
		n.Registered = false
	}
}

func (f *Fake) inRing(id string) bool { return slices.Contains(f.ring, id) }

func (f *Fake) configID() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s/%d/%d", f.job, f.epoch, f.gen)
	for _, id := range f.ring {
		fmt.Fprintf(h, "/%s", id)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

func (f *Fake) setRing(ids []string) {
	f.ring = ids
	f.gen++
	f.pending = nil
	f.notify()
}

// tick applies the pending reports whose suspect fell silent.
func (f *Fake) tick(now time.Time) {
	for _, p := range f.pending {
		if p.gen != f.gen || !f.inRing(p.suspect) {
			continue
		}
		if n := f.nodes[p.suspect]; n != nil && now.Sub(n.LastBeat) > f.DeadAfter {
			f.remove(p.suspect, false)
			return
		}
	}
}

// Remove takes a node out of the ring, as an orchestrator does on proof or
// on its own failure detection: the members get a new configuration.
func (f *Fake) Remove(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.remove(id, false)
}

func (f *Fake) remove(id string, ban bool) {
	if ban {
		f.nodes[id].Banned = true
	}
	f.setRing(slices.DeleteFunc(slices.Clone(f.ring), func(s string) bool { return s == id }))
	f.maybeMerge()
}

func (f *Fake) assignment(id string) worker.Assignment {
	if f.state == "" || !slices.Contains(f.members, id) {
		return worker.Assignment{}
	}
	a := worker.Assignment{Job: f.job, State: f.state, Epoch: f.epoch, Spec: f.spec, Checkpoint: f.cp}
	switch f.state {
	case "provisioning":
		for _, m := range f.members {
			a.ProbePeers = append(a.ProbePeers, worker.Peer{ID: m, Addr: f.nodes[m].Probe})
		}
	case "running":
		if f.inRing(id) {
			r := &worker.Ring{ConfigID: f.configID(), Generation: f.gen}
			for _, m := range f.ring {
				r.Members = append(r.Members, worker.Peer{ID: m, Addr: f.nodes[m].RingAddr})
			}
			a.Ring = r
		}
	}
	return a
}

// maybeMerge ends the epoch once every ring member submitted its last
// sync: the checkpoint is the epoch's start plus, per sync, the mean of
// the contributions of nodes that were not banned.
func (f *Fake) maybeMerge() {
	if f.state != "running" || len(f.ring) == 0 {
		return
	}
	last := Slot{f.epoch, f.plan.Syncs()}
	for _, id := range f.ring {
		if f.deltas[last][id] == nil {
			return
		}
	}
	merged := f.start.Clone()
	for k := 1; k <= f.plan.Syncs(); k++ {
		var sum []float64
		n := 0
		for id, d := range f.deltas[Slot{f.epoch, k}] {
			if f.nodes[id].Banned {
				continue
			}
			v := jobconf.Flatten(d)
			if sum == nil {
				sum = make([]float64, len(v))
			}
			for i, x := range v {
				sum[i] += float64(x)
			}
			n++
		}
		mean := make([]float32, len(sum))
		for i := range sum {
			mean[i] = float32(sum[i] / float64(n))
		}
		if n > 0 {
			jobconf.AddFlat(merged, mean)
		}
	}
	cid := fmt.Sprintf("fake-%s-epoch-%d", f.job, f.epoch)
	f.checkpoints[cid] = merged
	f.cp, f.start = cid, merged
	if f.epoch == f.plan.Epochs {
		f.state = "published"
	} else {
		f.epoch++
	}
	f.notify()
}

type client struct {
	f  *Fake
	id string
}

func (c *client) Register(ctx context.Context, ringAddr, probeAddr string) error {
	f := c.f
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.nodes[c.id]
	if n == nil {
		n = &Node{ID: c.id}
		f.nodes[c.id] = n
	}
	n.RingAddr, n.Probe, n.Registered, n.LastBeat = ringAddr, probeAddr, true, time.Now()
	n.Registrations++
	if f.state == "" && !slices.Contains(f.members, c.id) && len(f.members) < f.need {
		f.members = append(f.members, c.id)
		if len(f.members) == f.need {
			f.state = "provisioning"
		}
	}
	f.notify()
	return nil
}

func (c *client) Heartbeat(ctx context.Context) (worker.Assignment, error) {
	f := c.f
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.nodes[c.id]
	if n == nil || !n.Registered {
		return worker.Assignment{}, fmt.Errorf("fake: node %s: %w", c.id[:8], worker.ErrUnknownNode)
	}
	now := time.Now()
	if !n.lastHB.IsZero() && now.Sub(n.lastHB) < f.MinGap {
		n.HeartbeatTooSoon++
	}
	n.LastBeat, n.lastHB = now, now
	f.tick(now)
	return f.assignment(c.id), nil
}

func (c *client) ReportBandwidth(ctx context.Context, job string, kbps map[string]uint64) (worker.Assignment, error) {
	f := c.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if job != f.job || f.state != "provisioning" {
		return f.assignment(c.id), nil
	}
	f.kbps[c.id] = kbps
	for _, m := range f.members {
		if m != c.id && kbps[m] == 0 {
			f.errorf("%s measured 0 kbit/s to %s", c.id[:8], m[:8])
		}
	}
	if len(f.kbps) == len(f.members) && f.FailAfterProvisioning {
		f.state = "failed"
	} else if len(f.kbps) == len(f.members) {
		f.state, f.epoch = "running", 1
		f.setRing(slices.Clone(f.members))
	}
	f.notify()
	return f.assignment(c.id), nil
}

func (c *client) SubmitDelta(ctx context.Context, file []byte) (worker.Verdict, error) {
	f := c.f
	d, err := delta.Read(ctx, bytes.NewReader(file), delta.DefaultLimits())
	if err != nil {
		return worker.Verdict{Reason: "format", Detail: err.Error()}, nil
	}
	if f.Stall != nil && d.Info.Metadata != nil {
		ep, _ := d.Info.Metadata.Epoch()
		raw, _ := d.Info.Metadata.Get(jobconf.KeySync)
		var k int
		fmt.Sscan(string(raw), &k)
		if f.Stall(c.id, int(ep), k) {
			<-ctx.Done()
			return worker.Verdict{}, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.notify()
	reject := func(reason, format string, args ...any) (worker.Verdict, error) {
		f.rejections = append(f.rejections, fmt.Sprintf("%s %s", c.id[:8], reason))
		return worker.Verdict{Reason: reason, Detail: fmt.Sprintf(format, args...)}, nil
	}
	if hex.EncodeToString(d.Info.PublicKey) != c.id {
		f.errorf("%s: delta signed by another key", c.id[:8])
		return reject("signature", "signed by another key")
	}
	m := d.Info.Metadata
	if m == nil {
		f.errorf("%s: no metadata", c.id[:8])
		return reject("metadata", "no metadata")
	}
	fields, err := m.Fields()
	if err != nil {
		f.errorf("%s: metadata: %v", c.id[:8], err)
		return reject("metadata", "%v", err)
	}
	var k int
	if raw, ok := m.Get(jobconf.KeySync); !ok || json.Unmarshal(raw, &k) != nil {
		f.errorf("%s: no sync in metadata", c.id[:8])
		return reject("metadata", "no sync")
	}
	e, sk, ok := f.plan.SyncOf(fields.Step)
	switch {
	case fields.Job != f.job || fields.Node != c.id || !ok || uint64(e) != fields.Epoch || sk != k:
		f.errorf("%s: bad metadata %+v sync %d", c.id[:8], fields, k)
		return reject("metadata", "%+v", fields)
	case fields.Samples != f.plan.Samples():
		f.errorf("%s: samples %d, want %d", c.id[:8], fields.Samples, f.plan.Samples())
	}
	n := f.nodes[c.id]
	if fields.Sequence <= n.LastSeq {
		f.errorf("%s: sequence %d after %d", c.id[:8], fields.Sequence, n.LastSeq)
		return reject("replay", "sequence %d after %d", fields.Sequence, n.LastSeq)
	}
	n.LastSeq = fields.Sequence
	slot := Slot{e, k}
	sum := sha256.Sum256(file)
	if prev, ok := f.files[slot][c.id]; ok {
		if prev == sum {
			return worker.Verdict{Accepted: true, Duplicate: true}, nil
		}
		return reject("equivocation", "a second delta for epoch %d sync %d", e, k)
	}
	if f.state != "running" || e != f.epoch {
		return reject("stale", "epoch %d, the job is at %d (%s)", e, f.epoch, f.state)
	}
	a, err := jobconf.Decode(f.template, d.Tensors)
	if err != nil {
		f.errorf("%s: %v", c.id[:8], err)
		return reject("shape", "%v", err)
	}
	if f.files[slot] == nil {
		f.files[slot], f.deltas[slot], f.bases[slot], f.losses[slot] = map[string][32]byte{}, map[string]*model.Adapter{}, map[string]string{}, map[string]float64{}
	}
	f.files[slot][c.id], f.deltas[slot][c.id], f.bases[slot][c.id], f.losses[slot][c.id] = sum, a, fields.BaseCheckpoint, fields.ClaimedLoss
	f.maybeMerge()
	return worker.Verdict{Accepted: true}, nil
}

func (c *client) ReportSuspect(ctx context.Context, s worker.Suspect) error {
	f := c.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reports = append(f.reports, s)
	f.reporters = append(f.reporters, c.id)
	f.notify()
	if s.Job != f.job || s.ConfigID != f.configID() || !f.inRing(c.id) || !f.inRing(s.Node) {
		return nil // stale
	}
	if f.verified(s) {
		f.remove(s.Node, true)
		return nil
	}
	f.pending = append(f.pending, pendingReport{suspect: s.Node, gen: f.gen})
	f.tick(time.Now())
	return nil
}

// verified reports whether s carries a norm-exceeded frame signed by the
// suspect.
func (f *Fake) verified(s worker.Suspect) bool {
	var r worker.SuspectReport
	if json.Unmarshal(s.Evidence, &r) != nil {
		return false
	}
	pub, err := edkey.ParseHex(s.Node)
	if err != nil {
		return false
	}
	for _, e := range r.Evidence {
		sb, err1 := hex.DecodeString(e.SignedBytes)
		sig, err2 := hex.DecodeString(e.Signature)
		if e.Kind == "norm-exceeded" && e.SuspectID == s.Node && err1 == nil && err2 == nil &&
			edkey.Verify(pub, sb, sig) == nil {
			return true
		}
	}
	return false
}

func (c *client) FetchCheckpoint(ctx context.Context, cid string) (*model.Adapter, error) {
	f := c.f
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.checkpoints[cid]
	if a == nil {
		return nil, fmt.Errorf("fake: no checkpoint %q", cid)
	}
	return a.Clone(), nil
}
