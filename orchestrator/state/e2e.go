package state

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"

	"github.com/zooai/gym/orchestrator/ringplan"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/nodeauth"
)

// Commands of the end-to-end run: ring failure reports from nodes, and the
// validator's decisions (deltas judged, members ejected on proof,
// checkpoints published with a signed record, jobs settled).
type (
	// ReportSuspect is a ring member's signed report that a neighbour
	// failed an all-reduce of configuration ConfigID (nodeauth's).
	ReportSuspect nodeauth.ReportSuspect
	// RefuseJob is a node's signed word that it will not run the job it
	// was assigned (nodeauth's): recorded in the job, and the node is
	// taken out of it as a lost member is, never to be put back.
	RefuseJob nodeauth.RefuseJob
	// JudgeDelta records the validator's verdict on a submitted delta.
	JudgeDelta struct{ Verdict DeltaJudged }
	// Eject removes a member from a running job's ring on proven
	// misbehaviour (the validator checked the evidence).
	Eject struct {
		Job, Node, Reason string
	}
	// Settle closes a terminal job: the signed settlement record goes into
	// the log and the members' stakes are released.
	Settle struct {
		Job, Record, Signature string
	}
)

func (ReportSuspect) command() {}
func (RefuseJob) command()     {}
func (JudgeDelta) command()    {}
func (Eject) command()         {}
func (Settle) command()        {}

// SignedBytes is what a node signs.
func (r ReportSuspect) SignedBytes() []byte { return nodeauth.ReportSuspect(r).SignedBytes() }

// SignedBytes is what a node signs.
func (r RefuseJob) SignedBytes() []byte { return nodeauth.RefuseJob(r).SignedBytes() }

// SignRefuse signs r in place (and sets Auth.Node to the key's public key).
func SignRefuse(key ed25519.PrivateKey, r *RefuseJob) {
	nodeauth.SignRefuse(key, (*nodeauth.RefuseJob)(r))
}

// SignSuspect signs r in place (and sets Auth.Node to the key's public key).
func SignSuspect(key ed25519.PrivateKey, r *ReportSuspect) {
	nodeauth.SignSuspect(key, (*nodeauth.ReportSuspect)(r))
}

// Events of the end-to-end run.
type (
	// SuspectReported records a ring failure report.
	SuspectReported struct {
		Job      string `json:"job"`
		Reporter string `json:"reporter"`
		Seq      uint64 `json:"seq"`
		Suspect  string `json:"suspect"`
		ConfigID string `json:"config_id"`
		Failure  string `json:"kind"`
		Evidence []byte `json:"evidence,omitempty"`
	}
	// JobRefused records a node's refusal of a job it was assigned.
	JobRefused struct {
		Job    string `json:"job"`
		Node   string `json:"node"`
		Seq    uint64 `json:"seq"`
		Reason string `json:"reason"`
	}
	// DeltaJudged is the validator's verdict on one delta.
	DeltaJudged struct {
		Job      string `json:"job"`
		Node     string `json:"node"`
		Epoch    int    `json:"epoch"`
		Sync     int    `json:"sync"`
		Step     uint64 `json:"step"`
		Sequence uint64 `json:"sequence"`
		Samples  uint64 `json:"samples"`
		Digest   string `json:"digest"`
		Accepted bool   `json:"accepted"`
		Reason   string `json:"reason,omitempty"`
		Detail   string `json:"detail,omitempty"`
	}
	// CheckpointPublished is the orchestrator-signed publication record of
	// an epoch's checkpoint of record.
	CheckpointPublished struct {
		Job       string `json:"job"`
		Epoch     int    `json:"epoch"`
		CID       string `json:"cid"`
		Record    string `json:"record"`
		Signature string `json:"signature"`
	}
	// JobSettled is a job's signed settlement record.
	JobSettled struct {
		Job       string `json:"job"`
		Record    string `json:"record"`
		Signature string `json:"signature"`
	}
)

func (SuspectReported) Kind() string     { return "suspect_reported" }
func (DeltaJudged) Kind() string         { return "delta_judged" }
func (JobRefused) Kind() string          { return "job_refused" }
func (CheckpointPublished) Kind() string { return "checkpoint_published" }
func (JobSettled) Kind() string          { return "job_settled" }

// Tally counts a node's deltas in a job.
type Tally struct {
	Accepted int    `json:"accepted"`
	Rejected int    `json:"rejected"`
	Samples  uint64 `json:"samples"`  // of accepted deltas
	LastSeq  uint64 `json:"last_seq"` // highest accepted sequence
}

const maxEvidence = 256 << 10

// maxResyncs bounds the fresh configurations of unchanged membership an
// epoch gets when its ring's reports contradict each other.
const maxResyncs = 3

func (m *Machine) reportSuspect(now int64, r ReportSuspect) error {
	if len(r.Kind) == 0 || len(r.Kind) > 32 || len(r.Evidence) > maxEvidence {
		return fmt.Errorf("%w: suspect report needs a kind (≤ 32 bytes) and evidence ≤ %d bytes", ErrInvalid, maxEvidence)
	}
	if _, err := m.authenticate(now, r.Auth, r.SignedBytes()); err != nil {
		return err
	}
	j, err := m.job(r.Job)
	if err != nil {
		return err
	}
	if j.State != Running && j.State != Aggregating {
		return fmt.Errorf("%w: job %s is %s; reports apply to a running ring", ErrPrecondition, j.ID, j.State)
	}
	if r.ConfigID != j.ConfigID {
		return fmt.Errorf("%w: configuration %s is not the current one (%s): install it first", ErrPrecondition, r.ConfigID, j.ConfigID)
	}
	if !contains(j.Ring, r.Node) || !contains(j.Ring, r.Suspect) || r.Node == r.Suspect {
		return fmt.Errorf("%w: reporter and suspect must be two members of the ring", ErrInvalid)
	}
	m.emit(now, SuspectReported{Job: j.ID, Reporter: r.Node, Seq: r.Seq, Suspect: r.Suspect, ConfigID: r.ConfigID, Failure: r.Kind, Evidence: r.Evidence})
	// Both ring neighbours of the suspect reporting it is the rule for
	// removal: one report alone could be a lie, but a node that neither
	// its predecessor can send to nor its successor hears from is gone for
	// the ring either way. Proven misbehaviour goes through Eject.
	pred, succ := ringNeighbours(j, r.Suspect)
	if rs := j.Suspects[r.Suspect]; contains(rs, pred) && contains(rs, succ) {
		m.lose(now, m.nodes[r.Suspect], "reported by both ring neighbours ("+r.Kind+")")
		return nil
	}
	// Every member reported a neighbour and no member was reported by both
	// of its own: the reports contradict each other (no link of the ring
	// works, or liars are at work) and no repair follows from them. End
	// the job rather than let its ring wait for ever.
	reporters := map[string]bool{}
	for _, rs := range j.Suspects {
		for _, x := range rs {
			reporters[x] = true
		}
	}
	if len(reporters) < len(j.Ring) {
		return nil
	}
	// The usual cause is members that entered the call on different
	// configurations (one was replaced while they ran) and timed out on
	// each other: a fresh configuration of the same members puts them in
	// step again. Reports that still contradict each other after
	// maxResyncs fresh starts in one epoch mean no link of the ring works:
	// end the job with the reason.
	if j.Resyncs < maxResyncs {
		g := j.Generation + 1
		m.emit(now, RingConfigured{Job: j.ID, ConfigID: ConfigID(j.ID, g, j.Ring, j.RingGroups...), Generation: g, Ring: append([]string(nil), j.Ring...), Groups: slices.Clone(j.RingGroups),
			Bottleneck: j.Bottleneck, Cause: fmt.Sprintf("re-sync: every member reported a neighbour, none by both of its neighbours (%d of %d)", j.Resyncs+1, maxResyncs), Resync: true})
		return nil
	}
	m.transition(now, j, Failed, fmt.Sprintf("the ring cannot make progress: all %d members of configuration %s reported a neighbour and none was reported by both of its neighbours, %d times this epoch (check that the nodes' ring addresses are reachable from each other)", len(j.Ring), j.ConfigID, maxResyncs+1), nil, "")
	return nil
}

// maxRefusal bounds a refusal's reason.
const maxRefusal = 1024

func (m *Machine) refuseJob(now int64, r RefuseJob) error {
	if len(r.Reason) == 0 || len(r.Reason) > maxRefusal {
		return fmt.Errorf("%w: a refusal needs a reason of 1..%d bytes", ErrInvalid, maxRefusal)
	}
	n, err := m.authenticate(now, r.Auth, r.SignedBytes())
	if err != nil {
		return err
	}
	if n == nil {
		return fmt.Errorf("%w: node %s is not registered", ErrPrecondition, r.Node)
	}
	j, err := m.job(r.Job)
	if err != nil {
		return err
	}
	if n.Job != j.ID {
		return fmt.Errorf("%w: node %s is not assigned to job %s", ErrPrecondition, r.Node, j.ID)
	}
	m.emit(now, JobRefused{Job: j.ID, Node: r.Node, Seq: r.Seq, Reason: r.Reason})
	m.lose(now, n, "refused the job")
	return nil
}

func (m *Machine) applyRefused(e JobRefused) error {
	j, n := m.jobs[e.Job], m.nodes[e.Node]
	if j == nil || n == nil || n.Job != j.ID {
		return fmt.Errorf("refusal of %s by %s out of place", e.Job, e.Node)
	}
	if e.Seq <= n.LastSeq {
		return fmt.Errorf("sequence %d not above %d", e.Seq, n.LastSeq)
	}
	n.LastSeq = e.Seq
	m.alive(n)
	if j.Refusals == nil {
		j.Refusals = map[string]string{}
	}
	j.Refusals[e.Node] = e.Reason
	return nil
}

func (m *Machine) applySuspect(e SuspectReported) error {
	j, n := m.jobs[e.Job], m.nodes[e.Reporter]
	if j == nil || n == nil || e.ConfigID != j.ConfigID {
		return fmt.Errorf("suspect report for %s out of place", e.Job)
	}
	if e.Seq <= n.LastSeq {
		return fmt.Errorf("sequence %d not above %d", e.Seq, n.LastSeq)
	}
	n.LastSeq = e.Seq
	m.alive(n)
	if j.Suspects == nil {
		j.Suspects = map[string][]string{}
	}
	if !contains(j.Suspects[e.Suspect], e.Reporter) {
		rs := append(j.Suspects[e.Suspect], e.Reporter)
		sort.Strings(rs)
		j.Suspects[e.Suspect] = rs
	}
	return nil
}

func index(s []string, x string) int {
	for i, v := range s {
		if v == x {
			return i
		}
	}
	return -1
}

func (m *Machine) judge(now int64, c JudgeDelta) error {
	v := c.Verdict
	j, err := m.job(v.Job)
	if err != nil {
		return err
	}
	if _, err := hex.DecodeString(v.Digest); err != nil || len(v.Digest) != 64 {
		return fmt.Errorf("%w: digest must be 64 hex characters", ErrInvalid)
	}
	if len(v.Reason) > 64 || len(v.Detail) > 1024 || len(v.Node) > maxName {
		return fmt.Errorf("%w: verdict fields too long", ErrInvalid)
	}
	if v.Accepted {
		if m.nodes[v.Node] == nil {
			return fmt.Errorf("%w: node %s", ErrNotFound, v.Node)
		}
		slot := jobspec.Slot{Epoch: v.Epoch, Step: v.Step, Node: v.Node}
		if d, ok := j.Slots[slot]; ok {
			return fmt.Errorf("%w: slot %s already holds delta %s", ErrPrecondition, slot, d)
		}
		if t := j.Tally[v.Node]; t != nil && v.Sequence <= t.LastSeq {
			return fmt.Errorf("%w: sequence %d not above %d", ErrPrecondition, v.Sequence, t.LastSeq)
		}
		if v.Epoch != j.Epoch || j.State != Running {
			return fmt.Errorf("%w: job %s is %s in epoch %d; a delta for epoch %d is late", ErrPrecondition, j.ID, j.State, j.Epoch, v.Epoch)
		}
	}
	m.emit(now, v)
	return nil
}

func (m *Machine) applyJudged(e DeltaJudged) error {
	j := m.jobs[e.Job]
	if j == nil {
		return fmt.Errorf("verdict for unknown job %s", e.Job)
	}
	if j.Tally == nil {
		j.Tally = map[string]*Tally{}
	}
	t := j.Tally[e.Node]
	if t == nil {
		t = &Tally{}
		j.Tally[e.Node] = t
	}
	if !e.Accepted {
		t.Rejected++
		return nil
	}
	if j.Slots == nil {
		j.Slots = map[jobspec.Slot]string{}
	}
	j.Slots[jobspec.Slot{Epoch: e.Epoch, Step: e.Step, Node: e.Node}] = e.Digest
	t.Accepted++
	t.Samples += e.Samples
	t.LastSeq = max(t.LastSeq, e.Sequence)
	return nil
}

func (m *Machine) eject(now int64, c Eject) error {
	j, err := m.job(c.Job)
	if err != nil {
		return err
	}
	if c.Reason == "" || len(c.Reason) > 1024 {
		return fmt.Errorf("%w: reason must be 1..1024 bytes", ErrInvalid)
	}
	n := m.nodes[c.Node]
	if n == nil || n.Job != j.ID || (j.State != Running && j.State != Aggregating) {
		return fmt.Errorf("%w: %s is not a member of running job %s", ErrPrecondition, c.Node, j.ID)
	}
	m.lose(now, n, c.Reason)
	return nil
}

func (m *Machine) settle(now int64, c Settle) error {
	j, err := m.job(c.Job)
	if err != nil {
		return err
	}
	if !j.State.Terminal() || j.Settled {
		return fmt.Errorf("%w: job %s is %s (settled %v); only a published or failed job settles, once", ErrPrecondition, j.ID, j.State, j.Settled)
	}
	if c.Record == "" || len(c.Record) > maxEvidence || len(c.Signature) != 128 {
		return fmt.Errorf("%w: settlement needs a record and a 64-byte signature in hex", ErrInvalid)
	}
	m.emit(now, JobSettled{Job: j.ID, Record: c.Record, Signature: c.Signature})
	return nil
}

func (m *Machine) applySettled(e JobSettled) error {
	j := m.jobs[e.Job]
	if j == nil || !j.State.Terminal() || j.Settled {
		return fmt.Errorf("settlement of %s out of place", e.Job)
	}
	j.Settled = true
	return nil
}

func (m *Machine) applyPublished(e CheckpointPublished) error {
	j := m.jobs[e.Job]
	if j == nil || j.State != Aggregating || j.Epoch != e.Epoch {
		return fmt.Errorf("publication of %s epoch %d out of place", e.Job, e.Epoch)
	}
	return nil
}

// stakeLocked names the unsettled job that holds account's stake, if any:
// opening a job (its ring) locks its members' stake until it settles.
func (m *Machine) stakeLocked(account string) string {
	for _, id := range m.jobIDs() {
		j := m.jobs[id]
		if !j.Settled && contains(j.Participants, account) {
			return id
		}
	}
	return ""
}

// fillRing adds idle eligible nodes to a job's ring up to max_nodes at an
// epoch boundary: restarted or new workers join the next epoch.
func (m *Machine) fillRing(now int64, j *Job) {
	removed := m.removedSet(j)
	for len(j.Ring) < j.Spec.MaxNodes {
		s := m.idleEligible(j, now, removed)
		if len(s) == 0 {
			return
		}
		ring, err := ringplan.Insert(j.Ring, s[0].ID, m.linkBW(j))
		if err != nil {
			panic(err)
		}
		m.configure(now, j, ring, ringplan.Regroup(j.Ring, j.RingGroups, ring), m.ringBottleneck(j, ring), s[0].ID+" joins at the epoch boundary")
	}
}

// removedSet is the nodes a job must not take back: those that refused
// it, and those not yet: taken out
// of its ring (failed, reported by both neighbours, ejected) and not heard
// from since. A node that was killed is removed by its neighbours' reports
// seconds after it died, long before it misses enough heartbeats to count
// as failed; without this it would be put back at the next epoch boundary
// and stall the ring again.
func (m *Machine) removedSet(j *Job) map[string]bool {
	out := map[string]bool{}
	for _, id := range m.nodeIDs() {
		if contains(m.nodes[id].RemovedFrom, j.ID) || j.Refusals[id] != "" {
			out[id] = true
		}
	}
	return out
}

// ringNeighbours returns the members whose reports together remove id:
// its predecessor and successor in the ring, or, in a two-level ring, in
// its group's ring (a group of one: in the flat order, its shard rings'
// neighbours being members of the next and previous groups). Reports
// from a shard ring are often cascades of a failure in a group (a group
// that failed its first phase never joins its shard rings, whose other
// members then name its honest members), so only a member's group
// neighbours can remove it.
func ringNeighbours(j *Job, id string) (pred, succ string) {
	k := index(j.Ring, id)
	lo, n := 0, len(j.Ring)
	if len(j.RingGroups) >= 2 {
		at := 0
		for _, g := range j.RingGroups {
			if k < at+g {
				if g > 1 {
					lo, n = at, g
				}
				break
			}
			at += g
		}
	}
	i := k - lo
	return j.Ring[lo+(i+n-1)%n], j.Ring[lo+(i+1)%n]
}
