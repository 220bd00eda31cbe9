package state

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/big"
	"slices"
	"sort"

	"github.com/zooai/gym/orchestrator/ledger"
	"github.com/zooai/gym/orchestrator/ringplan"
	"github.com/zooai/gym/protocol/hardware"
	"github.com/zooai/gym/protocol/jobspec"
)

// JobState is a job's place in its state machine.
type JobState string

// Job states (SPEC.md). Running ⇄ Aggregating repeats once per epoch; the
// last epoch's checkpoint takes the job to Published. Any non-terminal
// state can go to Failed.
const (
	Pending      JobState = "pending"
	Provisioning JobState = "provisioning"
	Running      JobState = "running"
	Aggregating  JobState = "aggregating"
	Published    JobState = "published"
	Failed       JobState = "failed"
)

var transitions = map[JobState][]JobState{
	Pending:      {Provisioning, Failed},
	Provisioning: {Running, Failed},
	Running:      {Aggregating, Failed},
	Aggregating:  {Running, Published, Failed},
}

// Terminal reports whether no transition leaves s.
func (s JobState) Terminal() bool { return s == Published || s == Failed }

// CanTransition reports whether from → to is an edge of the job state
// machine.
func CanTransition(from, to JobState) bool {
	for _, t := range transitions[from] {
		if t == to {
			return true
		}
	}
	return false
}

// Job is a job and its progress. Times are observed milliseconds.
type Job struct {
	ID             string                       `json:"id"`
	Spec           jobspec.Spec                 `json:"spec"`
	State          JobState                     `json:"state"`
	SubmittedAt    int64                        `json:"submitted_at"`
	Members        []string                     `json:"members,omitempty"` // while Provisioning
	ProvisionStart int64                        `json:"provision_start,omitempty"`
	Bandwidth      map[string]map[string]uint64 `json:"bandwidth,omitempty"` // reporter → peer → kbit/s
	Ring           []string                     `json:"ring,omitempty"`
	RingGroups     []int                        `json:"ring_groups,omitempty"` // two-level: group sizes in Ring
	ConfigID       string                       `json:"config_id,omitempty"`
	Generation     uint64                       `json:"generation,omitempty"`
	Bottleneck     uint64                       `json:"bottleneck_kbps,omitempty"`
	Epoch          int                          `json:"epoch,omitempty"`
	EpochSize      int                          `json:"epoch_size,omitempty"` // ring size when the epoch started
	Paused         bool                         `json:"paused,omitempty"`
	CIDs           []string                     `json:"cids,omitempty"`
	PaidEpochs     []int                        `json:"paid_epochs,omitempty"`
	Reason         string                       `json:"reason,omitempty"`
	// End-to-end bookkeeping: ring failure reports against the current
	// configuration (suspect → reporters), accepted delta slots (slot →
	// digest), per-node tallies, every node that was ever in the ring (its
	// stake is locked until the job settles), and whether it settled.
	Suspects     map[string][]string     `json:"suspects,omitempty"`
	Slots        map[jobspec.Slot]string `json:"slots,omitempty"`
	Tally        map[string]*Tally       `json:"tally,omitempty"`
	Participants []string                `json:"participants,omitempty"`
	Settled      bool                    `json:"settled,omitempty"`
	// LogIndex is the index of the job_submitted event: the log from there
	// on is what the judge reads back for the job until it settles (0 in
	// snapshots older than the field: the whole log is kept for it).
	LogIndex uint64 `json:"log_index,omitempty"`
	// Resyncs counts this epoch's fresh configurations of an unchanged
	// ring (contradicting failure reports).
	Resyncs int `json:"resyncs,omitempty"`
	// Refusals: node → why it refused the job (its signed word). A node
	// that refused is never put back into the job.
	Refusals map[string]string `json:"refusals,omitempty"`
	// Shape is the base's dimensions hanzod read at submission (nil:
	// unknown; nodes are then matched by min_vram_mib alone).
	Shape *hardware.Shape `json:"shape,omitempty"`
	// Checks are the trace checks of the epoch delegated to validators,
	// by slot (docs/validators.md); dropped when the epoch is published.
	Checks map[string]*Check `json:"checks,omitempty"`
	// Watch: node → the last epoch its deltas are checked at the higher
	// share, after a failed or missing check.
	Watch map[string]int `json:"watch,omitempty"`
	// Funder is the signed submitter whose escrow pays the job's epochs
	// ("" for the operator's jobs: the treasury pays them); Escrow is
	// what is left of it, released to the Funder when the job ends.
	Funder string        `json:"funder,omitempty"`
	Escrow ledger.Amount `json:"escrow,omitempty"`
	// Rebases are the current epoch's rebases (rebase.go), in sync order.
	Rebases []Rebase `json:"rebases,omitempty"`
}

// maxName bounds names the state keeps (content ids, nodes in verdicts).
const maxName = 256

func (m *Machine) submit(now int64, c SubmitJob) error {
	spec := c.Spec
	if err := spec.Normalise(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if spec.Deadline != 0 && spec.Deadline <= now {
		return fmt.Errorf("%w: deadline %d is already past", ErrInvalid, spec.Deadline)
	}
	if err := m.checkEpochSize(spec); err != nil {
		return err
	}
	if c.Shape != nil {
		if err := c.Shape.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	var escrow ledger.Amount
	if c.By != "" {
		if err := m.checkSubmitter(now, c, &spec); err != nil {
			return err
		}
		var err error
		if escrow, err = m.checkEscrow(c.By, spec); err != nil {
			return err
		}
	}
	active := 0
	for _, j := range m.jobs {
		if !j.State.Terminal() {
			active++
		}
	}
	if active >= m.cfg.MaxJobs {
		return fmt.Errorf("%w: %d jobs are open, the limit is %d", ErrExhausted, active, m.cfg.MaxJobs)
	}
	ev := JobSubmitted{Job: fmt.Sprintf("job-%08d", m.nextJob+1), Spec: spec, Shape: c.Shape}
	if c.By != "" {
		ev.By, ev.Seq, ev.Escrow = c.By, c.Seq, escrow
	}
	m.emit(now, ev)
	m.schedule(now)
	return nil
}

func (m *Machine) applySubmitted(e JobSubmitted) error {
	if want := fmt.Sprintf("job-%08d", m.nextJob+1); e.Job != want {
		return fmt.Errorf("job id %q, want %q", e.Job, want)
	}
	if e.By != "" {
		if e.Seq <= m.submitSeq[e.By] {
			return fmt.Errorf("submitter %s sequence %d not above %d", e.By, e.Seq, m.submitSeq[e.By])
		}
		m.submitSeq[e.By] = e.Seq
	}
	if e.Escrow > 0 {
		if e.By == "" {
			return fmt.Errorf("job %s escrows %d without a submitter", e.Job, e.Escrow)
		}
		if err := m.ledger.Escrow(e.By, e.Escrow); err != nil {
			return err
		}
	}
	m.nextJob++
	m.jobs[e.Job] = &Job{ID: e.Job, Spec: e.Spec, State: Pending, SubmittedAt: m.observed, LogIndex: m.applied + 1,
		Funder: e.By, Escrow: e.Escrow, Shape: e.Shape}
	return nil
}

// RetainFrom is the first log index the orchestrator still needs to read
// back: the submission of the oldest job that has not settled (the judge
// reconstructs its rings, money and offences from the log), or the next
// index when every job has settled. Records before it, once a snapshot
// covers them, may be compacted away.
func (m *Machine) RetainFrom() uint64 {
	from := m.applied + 1
	for _, j := range m.jobs {
		if !j.Settled {
			from = min(from, max(j.LogIndex, 1))
		}
	}
	return from
}

// Priority is P = u · (S₀ + s) · (τ + w): u the job's utility, s the
// submitter's bonded stake, S₀ = MinStake (so a submitter without stake
// still has weight), w the observed time the job has waited and τ =
// AgingTau, all in ledger units and milliseconds. P grows linearly with
// waiting time, so every job eventually outranks any newer one: a job of
// weight W overtakes a fresh job of weight W′ once it has waited
// τ·(W′/W − 1). The seed's P = s·u/t divides by the waiting time instead,
// so the longer a job waits the lower it ranks and old jobs starve, the
// opposite of what its text intends.
func (m *Machine) Priority(j *Job) *big.Int {
	w := big.NewInt(int64(j.Spec.Utility))
	s := uint64(m.cfg.MinStake)
	if j.Spec.Submitter != "" {
		s += uint64(m.ledger.Bonded(j.Spec.Submitter))
	}
	w.Mul(w, new(big.Int).SetUint64(s))
	return w.Mul(w, big.NewInt(m.cfg.AgingTau.Milliseconds()+m.observed-j.SubmittedAt))
}

func (m *Machine) jobIDs() []string {
	ids := make([]string, 0, len(m.jobs))
	for id := range m.jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// schedule provisions Pending jobs in priority order (ties: older first).
// A job takes the best idle eligible nodes, up to MaxNodes. When the head
// job lacks nodes that exist but are busy, scheduling stops there, so
// smaller jobs cannot starve it by taking every node that frees up; a job
// that could not run even on an idle cluster does not block the others.
func (m *Machine) schedule(now int64) {
	var pending []*Job
	for _, id := range m.jobIDs() {
		if j := m.jobs[id]; j.State == Pending {
			pending = append(pending, j)
		}
	}
	prio := map[string]*big.Int{}
	for _, j := range pending {
		prio[j.ID] = m.Priority(j)
	}
	sort.SliceStable(pending, func(a, b int) bool { return prio[pending[a].ID].Cmp(prio[pending[b].ID]) > 0 })
	taken := map[string]bool{}
	for _, j := range pending {
		cands := m.idleEligible(j, now, taken)
		if len(cands) < j.Spec.MinNodes {
			if m.couldRun(j, now) {
				return
			}
			continue
		}
		cands = cands[:min(len(cands), j.Spec.MaxNodes)]
		members := make([]string, len(cands))
		for i, n := range cands {
			members[i] = n.ID
			taken[n.ID] = true
		}
		sort.Strings(members)
		m.transition(now, j, Provisioning, fmt.Sprintf("%d eligible nodes", len(members)), members, "")
	}
}

// couldRun reports whether enough eligible nodes exist, busy or not.
func (m *Machine) couldRun(j *Job, now int64) bool {
	k := 0
	for _, id := range m.nodeIDs() {
		if _, why := m.JobFit(m.nodes[id], j, now); why == "" {
			k++
		}
	}
	return k >= j.Spec.MinNodes
}

func (m *Machine) transition(now int64, j *Job, to JobState, reason string, members []string, cid string) {
	m.emit(now, JobTransitioned{Job: j.ID, From: j.State, To: to, Reason: reason, Members: members, CID: cid})
	if to.Terminal() && j.Escrow > 0 {
		// The job pays nothing more: what its submitter set aside and
		// the epochs did not spend goes back.
		m.emit(now, EscrowReleased{Job: j.ID, Account: j.Funder, Amount: j.Escrow})
	}
}

func (m *Machine) applyTransition(e JobTransitioned) error {
	j := m.jobs[e.Job]
	if j == nil {
		return fmt.Errorf("unknown job %s", e.Job)
	}
	if j.State != e.From || !CanTransition(e.From, e.To) {
		return fmt.Errorf("job %s is %s, cannot go %s → %s", e.Job, j.State, e.From, e.To)
	}
	switch {
	case e.To == Provisioning:
		for _, id := range e.Members {
			n := m.nodes[id]
			if n == nil || n.Job != "" {
				return fmt.Errorf("member %s unknown or busy", id)
			}
			n.Job = j.ID
		}
		j.Members = append([]string(nil), e.Members...)
		j.ProvisionStart = m.observed
	case e.From == Provisioning && e.To == Running:
		if len(j.Ring) == 0 {
			return fmt.Errorf("job %s has no ring", j.ID)
		}
		j.Members, j.Bandwidth = nil, nil
		j.Epoch, j.EpochSize = 1, len(j.Ring)
	case e.From == Aggregating && e.To == Running:
		j.CIDs = append(j.CIDs, e.CID)
		j.Epoch++
		j.EpochSize = len(j.Ring)
		j.Resyncs = 0
		j.Checks = nil // decided and acted on by the merge
		j.Rebases = nil
	case e.To == Published:
		j.CIDs = append(j.CIDs, e.CID)
	}
	if e.To.Terminal() {
		j.Checks, j.Rebases = nil, nil
	}
	if e.To.Terminal() {
		for _, id := range append(append([]string(nil), j.Members...), j.Ring...) {
			if n := m.nodes[id]; n != nil && n.Job == j.ID {
				n.Job = ""
			}
		}
		j.Members, j.Bandwidth, j.Paused = nil, nil, false
		if e.To == Failed {
			j.Reason = e.Reason
		}
	}
	j.State = e.To
	return nil
}

func (m *Machine) applyMember(e MemberChanged) error {
	j, n := m.jobs[e.Job], m.nodes[e.Node]
	if j == nil || n == nil || j.State != Provisioning {
		return fmt.Errorf("member change of %s in %s out of place", e.Node, e.Job)
	}
	if e.Added {
		if n.Job != "" || contains(j.Members, e.Node) {
			return fmt.Errorf("node %s is busy", e.Node)
		}
		n.Job = j.ID
		j.Members = append(j.Members, e.Node)
		sort.Strings(j.Members)
		return nil
	}
	if !contains(j.Members, e.Node) {
		return fmt.Errorf("node %s is not a member", e.Node)
	}
	j.Members = remove(j.Members, e.Node)
	delete(j.Bandwidth, e.Node)
	if n.Job == j.ID {
		n.Job = ""
	}
	return nil
}

func remove(s []string, x string) []string {
	out := make([]string, 0, len(s))
	for _, v := range s {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}

// bw is the job's measured bandwidth a → b (0 when not measured).
func (j *Job) bw(a, b string) uint64 { return j.Bandwidth[a][b] }

func (m *Machine) linkBW(j *Job) func(a, b string) uint64 {
	return func(a, b string) uint64 { return j.bw(a, b) }
}

// maybeBuild builds the ring once every member has reported.
func (m *Machine) maybeBuild(now int64, j *Job) {
	if j.State != Provisioning || len(j.Members) < j.Spec.MinNodes {
		return
	}
	for _, id := range j.Members {
		if _, ok := j.Bandwidth[id]; !ok {
			return
		}
	}
	m.build(now, j)
}

func (m *Machine) build(now int64, j *Job) {
	ids := j.Members
	mat := make(ringplan.Matrix, len(ids))
	for a := range ids {
		mat[a] = make([]uint64, len(ids))
		for b := range ids {
			if a != b {
				mat[a][b] = j.bw(ids[a], ids[b])
			}
		}
	}
	order, err := ringplan.Build(m.cfg.Ring, mat)
	if err != nil {
		panic(err) // the config was validated and the matrix is square
	}
	ring := make([]string, len(order))
	for k, i := range order {
		ring[k] = ids[i]
	}
	m.configure(now, j, ring, ringplan.SplitGroups(len(ring), m.cfg.Ring.Groups), ringplan.Bottleneck(mat, order), "built from measured bandwidth")
	m.transition(now, j, Running, "ring built", nil, "")
}

// ConfigID is the ring configuration id: SHA-256 over the job, the
// generation and the ordered membership (and, for a two-level ring, its
// group sizes), first 16 bytes in hex.
func ConfigID(job string, generation uint64, ring []string, groups ...int) string {
	h := sha256.New()
	var b [8]byte
	h.Write([]byte(job))
	h.Write([]byte{0})
	binary.BigEndian.PutUint64(b[:], generation)
	h.Write(b[:])
	for _, id := range ring {
		h.Write([]byte(id))
		h.Write([]byte{0})
	}
	if len(groups) > 0 {
		h.Write([]byte("groups\x00"))
		for _, g := range groups {
			binary.BigEndian.PutUint64(b[:], uint64(g))
			h.Write(b[:])
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func (m *Machine) configure(now int64, j *Job, ring []string, groups []int, bottleneck uint64, cause string) {
	g := j.Generation + 1
	m.emit(now, RingConfigured{Job: j.ID, ConfigID: ConfigID(j.ID, g, ring, groups...), Generation: g, Ring: ring, Groups: groups, Bottleneck: bottleneck, Cause: cause})
}

func (m *Machine) applyRing(e RingConfigured) error {
	j := m.jobs[e.Job]
	if j == nil || j.State.Terminal() || j.State == Pending {
		return fmt.Errorf("ring for job %s out of place", e.Job)
	}
	if len(e.Groups) > 0 {
		sum := 0
		for _, g := range e.Groups {
			if g < 1 {
				return fmt.Errorf("ring for job %s has a group of %d", e.Job, g)
			}
			sum += g
		}
		if len(e.Groups) < 2 || sum != len(e.Ring) {
			return fmt.Errorf("ring for job %s: groups %v for %d members", e.Job, e.Groups, len(e.Ring))
		}
	}
	if e.Generation != j.Generation+1 || e.ConfigID != ConfigID(e.Job, e.Generation, e.Ring, e.Groups...) {
		return fmt.Errorf("ring generation %d / id %s does not follow %d", e.Generation, e.ConfigID, j.Generation)
	}
	in := map[string]bool{}
	for _, id := range e.Ring {
		n := m.nodes[id]
		if n == nil || in[id] || (n.Job != "" && n.Job != j.ID) {
			return fmt.Errorf("ring member %s unknown, repeated or busy", id)
		}
		in[id] = true
	}
	for _, id := range j.Ring {
		if n := m.nodes[id]; !in[id] && n.Job == j.ID {
			n.Job = ""
			if !j.State.Terminal() && !contains(n.RemovedFrom, j.ID) {
				n.RemovedFrom = append(n.RemovedFrom, j.ID)
			}
		}
	}
	for _, id := range e.Ring {
		m.nodes[id].Job = j.ID
	}
	j.Ring, j.ConfigID, j.Generation, j.Bottleneck = append([]string(nil), e.Ring...), e.ConfigID, e.Generation, e.Bottleneck
	j.RingGroups = slices.Clone(e.Groups)
	j.Suspects = nil
	if e.Resync {
		j.Resyncs++
	}
	for _, id := range e.Ring {
		if !contains(j.Participants, id) {
			j.Participants = append(j.Participants, id)
			sort.Strings(j.Participants)
		}
	}
	return nil
}

// lose takes node n out of its job after a failure or a ban.
func (m *Machine) lose(now int64, n *Node, why string) {
	j := m.jobs[n.Job]
	if j == nil {
		return
	}
	switch j.State {
	case Provisioning:
		m.emit(now, MemberChanged{Job: j.ID, Node: n.ID, Reason: why})
		if len(j.Members) < j.Spec.MinNodes {
			if s := m.idleEligible(j, now, m.removedSet(j)); len(s) > 0 {
				m.emit(now, MemberChanged{Job: j.ID, Node: s[0].ID, Added: true, Reason: "replaces " + n.ID})
			}
		}
		m.maybeBuild(now, j)
	case Running, Aggregating:
		standby := ""
		if s := m.idleEligible(j, now, m.removedSet(j)); len(s) > 0 {
			standby = s[0].ID
		}
		ring, err := ringplan.Repair(j.Ring, n.ID, standby, m.linkBW(j))
		if err != nil {
			panic(err) // n.Job == j.ID means n is in the ring
		}
		cause := why + ": removed " + n.ID
		if standby != "" {
			cause += ", inserted standby " + standby
		}
		m.configure(now, j, ring, ringplan.Regroup(j.Ring, j.RingGroups, ring), m.ringBottleneck(j, ring), cause)
		m.checkPause(now, j)
	}
}

func (m *Machine) ringBottleneck(j *Job, ring []string) uint64 {
	if len(ring) < 2 {
		return 0
	}
	b := ^uint64(0)
	for k := range ring {
		a, c := ring[k], ring[(k+1)%len(ring)]
		b = min(b, j.bw(a, c), j.bw(c, a))
	}
	return b
}

// continues is the rule of SPEC.md: at least 3 members and more than 2/3
// of the ring the epoch started with.
func continues(j *Job) bool { return len(j.Ring) >= 3 && 3*len(j.Ring) > 2*j.EpochSize }

func (m *Machine) checkPause(now int64, j *Job) {
	if !j.Paused && !continues(j) {
		m.emit(now, JobPaused{Job: j.ID, Reason: fmt.Sprintf("%d of %d members remain", len(j.Ring), j.EpochSize)})
	}
}

func (m *Machine) applyPause(id string, paused bool) error {
	j := m.jobs[id]
	if j == nil || (j.State != Running && j.State != Aggregating) || j.Paused == paused {
		return fmt.Errorf("pause=%v of job %s out of place", paused, id)
	}
	j.Paused = paused
	return nil
}

// resume fills a paused job's ring with standbys until it may continue.
func (m *Machine) resume(now int64, j *Job) {
	for !continues(j) {
		s := m.idleEligible(j, now, m.removedSet(j))
		if len(s) == 0 {
			return
		}
		ring, err := ringplan.Insert(j.Ring, s[0].ID, m.linkBW(j))
		if err != nil {
			panic(err)
		}
		m.configure(now, j, ring, ringplan.Regroup(j.Ring, j.RingGroups, ring), m.ringBottleneck(j, ring), "standby "+s[0].ID+" joins a paused ring")
	}
	m.emit(now, JobResumed{Job: j.ID})
}

// tick is the periodic step: time, failures, provisioning timeouts,
// deadlines, paused jobs, scheduling.
func (m *Machine) tick(now int64) {
	m.emit(now, Ticked{})
	m.detectFailures(now)
	m.expireUnstaked(now)
	m.expireChecks(now)
	for _, id := range m.jobIDs() {
		j := m.jobs[id]
		if j.State.Terminal() {
			continue
		}
		if j.Spec.Deadline != 0 && now >= j.Spec.Deadline {
			m.transition(now, j, Failed, "deadline passed", nil, "")
			continue
		}
		if j.State == Provisioning && m.observed-j.ProvisionStart > m.cfg.ProvisionTimeout.Milliseconds() {
			m.provisionTimeout(now, j)
			continue
		}
		if j.Paused {
			m.resume(now, j)
		}
	}
	m.schedule(now)
}

// provisionTimeout drops members that never reported bandwidth, then
// builds with the rest or fails the job.
func (m *Machine) provisionTimeout(now int64, j *Job) {
	for _, id := range append([]string(nil), j.Members...) {
		if _, ok := j.Bandwidth[id]; !ok {
			m.emit(now, MemberChanged{Job: j.ID, Node: id, Reason: "no bandwidth report before the provisioning timeout"})
		}
	}
	if len(j.Members) >= j.Spec.MinNodes {
		m.build(now, j)
		return
	}
	reason := fmt.Sprintf("provisioning timed out: %d members reported bandwidth, the job needs %d", len(j.Members), j.Spec.MinNodes)
	if len(j.Refusals) > 0 {
		reason += fmt.Sprintf("; %d node(s) refused it (see refusals)", len(j.Refusals))
	}
	m.transition(now, j, Failed, reason, nil, "")
}

func (m *Machine) job(id string) (*Job, error) {
	j := m.jobs[id]
	if j == nil {
		return nil, fmt.Errorf("%w: job %q", ErrNotFound, id)
	}
	return j, nil
}

func (m *Machine) endEpoch(now int64, c EndEpoch) error {
	j, err := m.job(c.Job)
	if err != nil {
		return err
	}
	if j.State != Running || j.Epoch != c.Epoch {
		return fmt.Errorf("%w: job %s is %s in epoch %d, not running epoch %d", ErrPrecondition, j.ID, j.State, j.Epoch, c.Epoch)
	}
	if j.Paused {
		return fmt.Errorf("%w: job %s is paused (its ring lost too many members)", ErrPrecondition, j.ID)
	}
	m.transition(now, j, Aggregating, fmt.Sprintf("epoch %d ended", c.Epoch), nil, "")
	return nil
}

func (m *Machine) publish(now int64, c PublishCheckpoint) error {
	j, err := m.job(c.Job)
	if err != nil {
		return err
	}
	if c.CID == "" || len(c.CID) > maxName {
		return fmt.Errorf("%w: cid must be 1..%d bytes", ErrInvalid, maxName)
	}
	if j.State != Aggregating || j.Epoch != c.Epoch {
		return fmt.Errorf("%w: job %s is %s in epoch %d, not aggregating epoch %d", ErrPrecondition, j.ID, j.State, j.Epoch, c.Epoch)
	}
	if c.Record != "" || c.Signature != "" {
		if len(c.Record) > maxEvidence || len(c.Signature) != 128 {
			return fmt.Errorf("%w: publication record ≤ %d bytes with a 64-byte signature in hex", ErrInvalid, maxEvidence)
		}
		m.emit(now, CheckpointPublished{Job: j.ID, Epoch: c.Epoch, CID: c.CID, Record: c.Record, Signature: c.Signature})
	}
	if j.Epoch >= j.Spec.Epochs {
		m.transition(now, j, Published, fmt.Sprintf("final epoch %d merged", j.Epoch), nil, c.CID)
		return nil
	}
	// Nodes joining at the boundary are part of the ring the next epoch
	// starts with, so they join before the transition records its size.
	if !j.Paused {
		m.fillRing(now, j)
	}
	m.transition(now, j, Running, fmt.Sprintf("epoch %d merged", j.Epoch), nil, c.CID)
	return nil
}

func (m *Machine) failJob(now int64, c FailJob) error {
	j, err := m.job(c.Job)
	if err != nil {
		return err
	}
	if c.Reason == "" || len(c.Reason) > 1024 {
		return fmt.Errorf("%w: reason must be 1..1024 bytes", ErrInvalid)
	}
	if j.State.Terminal() {
		return fmt.Errorf("%w: job %s is already %s", ErrPrecondition, j.ID, j.State)
	}
	m.transition(now, j, Failed, c.Reason, nil, "")
	return nil
}

func (m *Machine) ledgerCommand(now int64, cmd Command) error {
	if done, err := m.checkRequest(cmd); done || err != nil {
		return err
	}
	l := m.ledger
	wrap := func(err error) error {
		if err != nil {
			return fmt.Errorf("%w: %w", ErrPrecondition, err)
		}
		return nil
	}
	switch c := cmd.(type) {
	case Deposit:
		if err := l.CheckMint(c.Account, c.Amount); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		m.emit(now, Minted{Account: c.Account, Amount: c.Amount, Request: c.Request})
	case Bond:
		if err := l.CheckBond(c.Account, c.Amount); err != nil {
			return wrap(err)
		}
		m.emit(now, Bonded{Account: c.Account, Amount: c.Amount, Request: c.Request})
	case Unbond:
		if id := m.stakeLocked(c.Account); id != "" {
			return fmt.Errorf("%w: the stake of %s is locked by job %s until it settles", ErrPrecondition, c.Account, id)
		}
		if err := l.CheckUnbond(c.Account, c.Amount); err != nil {
			return wrap(err)
		}
		m.emit(now, Unbonded{Account: c.Account, Amount: c.Amount, ReleaseAt: now + m.cfg.UnbondingPeriod.Milliseconds(), Request: c.Request})
	case Withdraw:
		amt := l.Withdrawable(c.Account, now)
		if amt == 0 {
			return wrap(ledger.ErrNothing)
		}
		m.emit(now, Withdrawn{Account: c.Account, Amount: amt, Request: c.Request})
	case Slash:
		if c.Reason == "" || len(c.Reason) > 1024 || len(c.Evidence) > maxReport {
			return fmt.Errorf("%w: slash needs a reason (≤ 1024 bytes) and evidence ≤ %d bytes", ErrInvalid, maxReport)
		}
		p, err := l.PlanSlash(c.Node)
		if err != nil {
			return wrap(err)
		}
		m.emit(now, Slashed{Account: c.Node, Offence: p.Offence, Amount: p.Amount, Ban: p.Ban, Reason: c.Reason, Evidence: c.Evidence})
		if n := m.nodes[c.Node]; p.Ban && n != nil {
			m.lose(now, n, "banned")
		}
	case PayRewards:
		j, err := m.job(c.Job)
		if err != nil {
			return err
		}
		if c.Epoch < 1 || c.Epoch > j.Epoch || (c.Epoch == j.Epoch && j.State != Published && j.State != Aggregating) {
			return fmt.Errorf("%w: job %s has not finished epoch %d", ErrPrecondition, j.ID, c.Epoch)
		}
		for _, e := range j.PaidEpochs {
			if e == c.Epoch {
				return fmt.Errorf("%w: epoch %d of %s was already paid", ErrPrecondition, c.Epoch, j.ID)
			}
		}
		total, samples := m.epochPayout(j, c)
		payouts, err := ledger.PlanRewards(total, c.Contributions)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if j.Funder != "" {
			err = l.CheckPayEscrow(j.Funder, payouts)
		} else {
			err = l.CheckPay(payouts)
		}
		if err != nil {
			return wrap(err)
		}
		m.emit(now, RewardsPaid{Job: c.Job, Epoch: c.Epoch, Total: total, Payouts: payouts, Samples: samples, From: j.Funder})
	}
	return nil
}

func (m *Machine) applyRewards(e RewardsPaid) error {
	j := m.jobs[e.Job]
	if j == nil {
		return fmt.Errorf("unknown job %s", e.Job)
	}
	for _, p := range j.PaidEpochs {
		if p == e.Epoch {
			return fmt.Errorf("epoch %d paid twice", e.Epoch)
		}
	}
	if e.From == "" {
		if err := m.ledger.Pay(e.Payouts); err != nil {
			return err
		}
	} else {
		var sum ledger.Amount
		for _, p := range e.Payouts {
			sum += p.Amount // PayEscrow refuses a sum that overflows
		}
		if e.From != j.Funder || sum > j.Escrow {
			return fmt.Errorf("epoch %d of %s paid %d from %s's escrow; the job's funder is %q with %d left", e.Epoch, e.Job, sum, e.From, j.Funder, j.Escrow)
		}
		if err := m.ledger.PayEscrow(e.From, e.Payouts); err != nil {
			return err
		}
		j.Escrow -= sum
	}
	j.PaidEpochs = append(j.PaidEpochs, e.Epoch)
	return nil
}

func (m *Machine) applyReleased(e EscrowReleased) error {
	j := m.jobs[e.Job]
	if j == nil || !j.State.Terminal() || e.Account != j.Funder || e.Amount != j.Escrow {
		return fmt.Errorf("escrow release of %d to %s for job %s out of place", e.Amount, e.Account, e.Job)
	}
	if err := m.ledger.Release(e.Account, e.Amount); err != nil {
		return err
	}
	j.Escrow = 0
	return nil
}
