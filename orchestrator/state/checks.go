package state

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/nodeauth"
	"github.com/zooai/gym/protocol/verdict"
)

// RoleValidator is the Node.Role of a validator: it registers like a
// node, is never put into a ring, and answers the trace checks the judge
// assigns it (docs/validators.md).
const RoleValidator = "validator"

// Check is a delegated trace check of one accepted delta: what was asked
// of whom, and the verdicts. The judge decides it from Asks
// (verdict.Decide); the state only keeps the record.
type Check struct {
	Epoch   int    `json:"epoch"`
	Step    uint64 `json:"step"`
	Node    string `json:"node"`
	Digest  string `json:"digest"`
	Package string `json:"package"` // CID of the check package
	K       int    `json:"k"`       // verdicts the job asks for
	Asks    []Ask  `json:"asks"`
}

// Ask is one validator asked for a check. Deadline is observed time.
type Ask struct {
	Validator string   `json:"validator"`
	Deadline  int64    `json:"deadline"`
	Expired   bool     `json:"expired,omitempty"`
	Verdict   *Verdict `json:"verdict,omitempty"`
}

// Verdict is a validator's signed answer, kept as evidence: with the
// check's fields it is the nodeauth.SubmitVerdict the signature covers.
type Verdict struct {
	Outcome   string `json:"outcome"`
	Check     string `json:"check,omitempty"`
	Detail    string `json:"detail,omitempty"`
	Figures   string `json:"figures,omitempty"`
	Seq       uint64 `json:"seq"`
	Timestamp int64  `json:"timestamp"`
	Sig       []byte `json:"sig"`
}

// EvalSubject and EvalSlot name an epoch's held-out evaluation (a check
// that measures figures instead of checking a delta, package evalpkg).
const EvalSubject = jobspec.EvalSubject

// EvalSlot is jobspec.EvalSlot.
func EvalSlot(epoch int, digest string) jobspec.Slot { return jobspec.EvalSlot(epoch, digest) }

// IsEval reports whether the check is an epoch's evaluation.
func (c *Check) IsEval() bool { return strings.HasPrefix(c.Node, EvalSubject) }

// Slot is the checked delta's slot.
func (c *Check) Slot() jobspec.Slot { return jobspec.Slot{Epoch: c.Epoch, Step: c.Step, Node: c.Node} }

// Tally returns the check's answers in the order given, how many asks are
// open and how many validators were asked: verdict.Decide's inputs.
func (c *Check) Tally() (answers []verdict.Outcome, who []string, open, asked int) {
	for _, a := range c.Asks {
		switch {
		case a.Verdict != nil:
			o := verdict.Outcome(a.Verdict.Outcome)
			if c.IsEval() && o == verdict.Pass {
				// An evaluation's validators agree on the figures.
				o = verdict.Measured(a.Verdict.Check)
			}
			answers = append(answers, o)
			who = append(who, a.Validator)
		case !a.Expired:
			open++
		}
	}
	return answers, who, open, len(c.Asks)
}

// Decision is where the check stands (verdict.Decide).
func (c *Check) Decision() verdict.Decision {
	answers, _, open, asked := c.Tally()
	return verdict.Decide(c.K, answers, open, asked)
}

// Asked lists the validators asked so far.
func (c *Check) Asked() []string {
	out := make([]string, len(c.Asks))
	for i, a := range c.Asks {
		out[i] = a.Validator
	}
	return out
}

func (c *Check) clone() *Check {
	d := *c
	d.Asks = slices.Clone(c.Asks)
	for i, a := range d.Asks {
		if a.Verdict != nil {
			v := *a.Verdict
			v.Sig = slices.Clone(a.Verdict.Sig)
			d.Asks[i].Verdict = &v
		}
	}
	return &d
}

// Commands of delegated checks.
type (
	// AssignCheck asks Validator for the check of the delta of Slot with
	// file digest Digest (the judge's command, on the leader): the first
	// assignment of a slot records the package and K.
	AssignCheck struct {
		Job       string
		Slot      jobspec.Slot
		Digest    string
		Package   string
		Validator string
		// K is how many agreeing verdicts the check asks for: 0, the
		// job's validators; a job without validators on a hanzod that
		// has no model to check with asks verdict.MinK.
		K int
	}
	// SubmitVerdict is a validator's signed verdict (nodeauth's).
	SubmitVerdict nodeauth.SubmitVerdict
	// WatchNodes records the nodes of Job whose check failed or could not
	// be made in Epoch: their deltas are checked at a higher share until
	// epoch Until (docs/validators.md).
	WatchNodes struct {
		Job   string
		Epoch int
		Nodes []string
		Until int
	}
)

func (AssignCheck) command()   {}
func (SubmitVerdict) command() {}
func (WatchNodes) command()    {}

// SignedBytes is what a validator signs.
func (v SubmitVerdict) SignedBytes() []byte { return nodeauth.SubmitVerdict(v).SignedBytes() }

// Events of delegated checks.
type (
	// CheckAssigned records a validator asked for a check.
	CheckAssigned struct {
		Job       string `json:"job"`
		Slot      string `json:"slot"`
		Digest    string `json:"digest"`
		Package   string `json:"package"`
		K         int    `json:"k"`
		Validator string `json:"validator"`
		Deadline  int64  `json:"deadline"`
	}
	// VerdictRecorded records a validator's signed verdict.
	VerdictRecorded struct {
		Job       string  `json:"job"`
		Slot      string  `json:"slot"`
		Validator string  `json:"validator"`
		Verdict   Verdict `json:"verdict"`
	}
	// CheckExpired records an assignment that passed its deadline
	// unanswered: the validator is noted (Node.MissedChecks), not slashed.
	CheckExpired struct {
		Job       string `json:"job"`
		Slot      string `json:"slot"`
		Validator string `json:"validator"`
	}
	// NodesWatched records WatchNodes.
	NodesWatched struct {
		Job   string   `json:"job"`
		Epoch int      `json:"epoch"`
		Nodes []string `json:"nodes"`
		Until int      `json:"until"`
	}
)

func (CheckAssigned) Kind() string   { return "check_assigned" }
func (VerdictRecorded) Kind() string { return "verdict_recorded" }
func (CheckExpired) Kind() string    { return "check_expired" }
func (NodesWatched) Kind() string    { return "nodes_watched" }

// Bounds on what a validator may send. MaxVerdictFigures holds an
// evaluation's figures (evalpkg.MaxFiguresBytes, which the judge checks is
// the same).
const (
	maxVerdictDetail  = 1024
	MaxVerdictFigures = 32 << 10
)

// ValidatorIneligible says why node n cannot be asked for a check, or ""
// when it can: registered as a validator, active, not banned, bonded ≥
// MinValidatorStake.
func (m *Machine) ValidatorIneligible(n *Node) string {
	switch {
	case n.Role != RoleValidator:
		return "not a validator"
	case n.Status != StatusActive:
		return "not active"
	case m.ledger.Banned(n.ID):
		return "banned"
	case m.ledger.Bonded(n.ID) < m.cfg.MinValidatorStake:
		return fmt.Sprintf("bonded stake %d below a validator's %d", m.ledger.Bonded(n.ID), m.cfg.MinValidatorStake)
	}
	return ""
}

// Validators lists the validators that may be asked for a check of job
// now, sorted: eligible, and never a member of the job's ring.
func (m *Machine) Validators(job string) []string {
	j := m.jobs[job]
	var out []string
	for _, id := range m.nodeIDs() {
		if m.ValidatorIneligible(m.nodes[id]) != "" {
			continue
		}
		if j != nil && (contains(j.Participants, id) || contains(j.Ring, id)) {
			continue
		}
		out = append(out, id)
	}
	return out
}

// OpenChecks lists the checks assigned to validator that it has not
// answered and that have not expired, by job then slot.
func (m *Machine) OpenChecks(validator string) []OpenCheck {
	var out []OpenCheck
	for _, id := range m.jobIDs() {
		j := m.jobs[id]
		for _, key := range slices.Sorted(maps.Keys(j.Checks)) {
			c := j.Checks[key]
			for _, a := range c.Asks {
				if a.Validator == validator && a.Verdict == nil && !a.Expired {
					out = append(out, OpenCheck{Job: id, Spec: j.Spec, Check: *c.clone(), Deadline: a.Deadline - m.observed})
				}
			}
		}
	}
	return out
}

// OpenCheck is a check assigned to a validator, with the milliseconds
// left before its deadline (observed time).
type OpenCheck struct {
	Job      string
	Spec     jobspec.Spec
	Check    Check
	Deadline int64
}

func (m *Machine) assignCheck(now int64, c AssignCheck) error {
	j, err := m.job(c.Job)
	if err != nil {
		return err
	}
	if j.State != Aggregating || j.Epoch != c.Slot.Epoch {
		return fmt.Errorf("%w: job %s is %s in epoch %d, not aggregating epoch %d", ErrPrecondition, j.ID, j.State, j.Epoch, c.Slot.Epoch)
	}
	k := c.K
	if k == 0 {
		k = j.Spec.Validators
	}
	switch {
	case k < verdict.MinK && j.Spec.Validators == 0:
		return fmt.Errorf("%w: job %s asks for no validators", ErrPrecondition, j.ID)
	case k < verdict.MinK || k > verdict.MaxK || (j.Spec.Validators != 0 && k != j.Spec.Validators):
		return fmt.Errorf("%w: a check of job %s asks %d verdicts (the job asks %d; %d..%d)", ErrInvalid, j.ID, k, j.Spec.Validators, verdict.MinK, verdict.MaxK)
	}
	if strings.HasPrefix(c.Slot.Node, EvalSubject) {
		if len(c.Digest) != 64 || c.Slot != EvalSlot(c.Slot.Epoch, c.Digest) {
			return fmt.Errorf("%w: evaluation slot %s with digest %q", ErrInvalid, c.Slot, c.Digest)
		}
	} else if d, ok := j.Slots[c.Slot]; !ok || d != c.Digest {
		return fmt.Errorf("%w: slot %s of %s has no accepted delta with digest %s", ErrPrecondition, c.Slot, j.ID, c.Digest)
	}
	if c.Package == "" || len(c.Package) > maxName {
		return fmt.Errorf("%w: package must be a CID of 1..%d bytes", ErrInvalid, maxName)
	}
	n := m.nodes[c.Validator]
	if n == nil {
		return fmt.Errorf("%w: validator %s is not registered", ErrPrecondition, c.Validator)
	}
	if why := m.ValidatorIneligible(n); why != "" {
		return fmt.Errorf("%w: %s cannot check: %s", ErrPrecondition, c.Validator, why)
	}
	if contains(j.Participants, c.Validator) || contains(j.Ring, c.Validator) {
		return fmt.Errorf("%w: %s is a member of job %s and cannot check it", ErrPrecondition, c.Validator, j.ID)
	}
	key := c.Slot.String()
	if ch := j.Checks[key]; ch != nil {
		if ch.K != k {
			return fmt.Errorf("%w: check %s was assigned asking %d verdicts, not %d", ErrPrecondition, key, ch.K, k)
		}
		if ch.Digest != c.Digest || ch.Package != c.Package {
			return fmt.Errorf("%w: check %s was assigned for digest %s with package %s", ErrPrecondition, key, ch.Digest, ch.Package)
		}
		if contains(ch.Asked(), c.Validator) {
			return fmt.Errorf("%w: %s was already asked for check %s", ErrPrecondition, c.Validator, key)
		}
		if d := ch.Decision(); d.Decided || d.Need == 0 {
			return fmt.Errorf("%w: check %s needs no more validators", ErrPrecondition, key)
		}
	}
	m.emit(now, CheckAssigned{Job: j.ID, Slot: key, Digest: c.Digest, Package: c.Package, K: k,
		Validator: c.Validator, Deadline: m.observedAt(now) + m.cfg.CheckTimeout.Milliseconds()})
	return nil
}

func (m *Machine) applyCheckAssigned(e CheckAssigned) error {
	j := m.jobs[e.Job]
	if j == nil {
		return fmt.Errorf("unknown job %s", e.Job)
	}
	if j.Checks == nil {
		j.Checks = map[string]*Check{}
	}
	c := j.Checks[e.Slot]
	if c == nil {
		sl, err := jobspec.ParseSlot(e.Slot)
		if err != nil {
			return err
		}
		c = &Check{Epoch: sl.Epoch, Step: sl.Step, Node: sl.Node, Digest: e.Digest, Package: e.Package, K: e.K}
		j.Checks[e.Slot] = c
	}
	c.Asks = append(c.Asks, Ask{Validator: e.Validator, Deadline: e.Deadline})
	return nil
}

func (m *Machine) submitVerdict(now int64, v SubmitVerdict) error {
	if _, err := verdict.Parse(v.Outcome); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if len(v.Check) > 64 || len(v.Detail) > maxVerdictDetail || len(v.Figures) > MaxVerdictFigures {
		return fmt.Errorf("%w: a verdict's check ≤ 64 bytes, detail ≤ %d, figures ≤ %d", ErrInvalid, maxVerdictDetail, MaxVerdictFigures)
	}
	n, err := m.authenticate(now, v.Auth, v.SignedBytes())
	if err != nil {
		return err
	}
	if n == nil {
		return fmt.Errorf("%w: validator %s is not registered", ErrPrecondition, v.Node)
	}
	j, err := m.job(v.Job)
	if err != nil {
		return err
	}
	key := jobspec.Slot{Epoch: int(v.Epoch), Step: v.Step, Node: v.Subject}.String()
	c := j.Checks[key]
	if c == nil || c.Digest != v.Digest || c.Package != v.Package {
		return fmt.Errorf("%w: no check of slot %s with digest %s and package %s was assigned", ErrNotFound, key, v.Digest, v.Package)
	}
	i := slices.IndexFunc(c.Asks, func(a Ask) bool { return a.Validator == v.Node })
	switch {
	case i < 0:
		return fmt.Errorf("%w: %s was not asked for check %s", ErrPermission, v.Node, key)
	case c.Asks[i].Verdict != nil:
		return fmt.Errorf("%w: %s answered check %s already", ErrPrecondition, v.Node, key)
	case c.Asks[i].Expired:
		return fmt.Errorf("%w: check %s expired for %s before its verdict came (another validator was asked)", ErrPrecondition, key, v.Node)
	}
	m.emit(now, VerdictRecorded{Job: j.ID, Slot: key, Validator: v.Node, Verdict: Verdict{Outcome: v.Outcome, Check: v.Check,
		Detail: v.Detail, Figures: v.Figures, Seq: v.Seq, Timestamp: v.Timestamp, Sig: v.Sig}})
	return nil
}

func (m *Machine) applyVerdict(e VerdictRecorded) error {
	j, n := m.jobs[e.Job], m.nodes[e.Validator]
	if j == nil || n == nil || j.Checks[e.Slot] == nil {
		return fmt.Errorf("verdict of %s on %s/%s out of place", e.Validator, e.Job, e.Slot)
	}
	c := j.Checks[e.Slot]
	i := slices.IndexFunc(c.Asks, func(a Ask) bool { return a.Validator == e.Validator })
	if i < 0 || c.Asks[i].Verdict != nil || c.Asks[i].Expired {
		return fmt.Errorf("verdict of %s on %s/%s not open", e.Validator, e.Job, e.Slot)
	}
	if e.Verdict.Seq <= n.LastSeq {
		return fmt.Errorf("sequence %d not above %d", e.Verdict.Seq, n.LastSeq)
	}
	n.LastSeq = e.Verdict.Seq
	m.alive(n)
	v := e.Verdict
	c.Asks[i].Verdict = &v
	return nil
}

// expireChecks expires the assignments past their deadline (tick).
func (m *Machine) expireChecks(now int64) {
	at := m.observedAt(now)
	for _, id := range m.jobIDs() {
		j := m.jobs[id]
		for _, k := range slices.Sorted(maps.Keys(j.Checks)) {
			for _, a := range j.Checks[k].Asks {
				if a.Verdict == nil && !a.Expired && at > a.Deadline {
					m.emit(now, CheckExpired{Job: id, Slot: k, Validator: a.Validator})
				}
			}
		}
	}
}

func (m *Machine) applyCheckExpired(e CheckExpired) error {
	j := m.jobs[e.Job]
	if j == nil || j.Checks[e.Slot] == nil {
		return fmt.Errorf("expiry of %s/%s out of place", e.Job, e.Slot)
	}
	c := j.Checks[e.Slot]
	i := slices.IndexFunc(c.Asks, func(a Ask) bool { return a.Validator == e.Validator })
	if i < 0 || c.Asks[i].Verdict != nil || c.Asks[i].Expired {
		return fmt.Errorf("expiry of %s on %s/%s not open", e.Validator, e.Job, e.Slot)
	}
	c.Asks[i].Expired = true
	if n := m.nodes[e.Validator]; n != nil {
		n.MissedChecks++
	}
	return nil
}

func (m *Machine) watchNodes(now int64, c WatchNodes) error {
	j, err := m.job(c.Job)
	if err != nil {
		return err
	}
	if j.State != Aggregating || j.Epoch != c.Epoch || c.Until <= c.Epoch || len(c.Nodes) > maxLinks {
		return fmt.Errorf("%w: watch of job %s epoch %d until %d (the job is %s in epoch %d)", ErrPrecondition, j.ID, c.Epoch, c.Until, j.State, j.Epoch)
	}
	for _, n := range c.Nodes {
		if !contains(j.Participants, n) {
			return fmt.Errorf("%w: %s never took part in job %s", ErrPrecondition, n, j.ID)
		}
	}
	if len(c.Nodes) > 0 {
		m.emit(now, NodesWatched{Job: j.ID, Epoch: c.Epoch, Nodes: slices.Sorted(slices.Values(c.Nodes)), Until: c.Until})
	}
	return nil
}

func (m *Machine) applyWatched(e NodesWatched) error {
	j := m.jobs[e.Job]
	if j == nil {
		return fmt.Errorf("unknown job %s", e.Job)
	}
	if j.Watch == nil {
		j.Watch = map[string]int{}
	}
	for _, n := range e.Nodes {
		j.Watch[n] = max(j.Watch[n], e.Until)
	}
	return nil
}

// AuthorizeValidator checks a validator's read-only request (ListChecks):
// its signature, its timestamp within MaxSkew of now, and that the key
// registered as a validator and is not banned. The sequence number is not
// checked: the request changes nothing.
func (m *Machine) AuthorizeValidator(now int64, a Auth, msg []byte) error {
	if err := m.verifyFresh(now, a, msg); err != nil {
		return err
	}
	n := m.nodes[a.Node]
	switch {
	case n == nil:
		return fmt.Errorf("%w: %s is not registered (gym validator registers it)", ErrNotFound, a.Node)
	case n.Role != RoleValidator:
		return fmt.Errorf("%w: %s registered as a compute node, not a validator", ErrPermission, a.Node)
	case m.ledger.Banned(a.Node):
		return fmt.Errorf("%w: %s is banned", ErrPermission, a.Node)
	}
	return nil
}
