package state

import (
	"fmt"
	"slices"
)

// A rebase tells the members of a running epoch to continue, at one
// sync's all-reduce, from a state the judge rebuilt from the honest
// deltas instead of from the ring's result, after it proved a member to
// cheat while the epoch ran (docs/byzantine.md). The judge sets it when
// it ejects the cheater, at a sync none of the epoch's members has
// submitted a delta for yet, so every member learns of it when it submits
// that sync's delta (SubmitDeltaResponse) before it would all-reduce; it
// publishes the state once it holds every member's delta up to that sync.

// Rebase is one rebase of a job's current epoch.
type Rebase struct {
	Epoch int    `json:"epoch"`
	Sync  int    `json:"sync"`
	Step  uint64 `json:"step"` // the global step the sync ends at
	// CID and Digest name the state (a checkpoint directory of the
	// artifact store; jobconf.Digest of its adapter); empty until the
	// judge publishes it.
	CID    string `json:"cid,omitempty"`
	Digest string `json:"digest,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// MaxRebases bounds the rebases of one epoch (each follows an ejection).
const MaxRebases = 16

// Commands of rebases (the judge's).
type (
	// SetRebase tells the members of Job's epoch Epoch to continue from a
	// rebuilt state at sync Sync (which ends at global step Step). It is
	// refused (ErrPrecondition) once any delta of the epoch at Step or
	// later was accepted: some member may be past the all-reduce already.
	SetRebase struct {
		Job    string
		Epoch  int
		Sync   int
		Step   uint64
		Reason string
	}
	// PublishRebase names the state of a rebase set before.
	PublishRebase struct {
		Job         string
		Epoch, Sync int
		CID, Digest string
	}
)

func (SetRebase) command()     {}
func (PublishRebase) command() {}

// Events of rebases.
type (
	// RebaseSet records SetRebase.
	RebaseSet struct {
		Job    string `json:"job"`
		Epoch  int    `json:"epoch"`
		Sync   int    `json:"sync"`
		Step   uint64 `json:"step"`
		Reason string `json:"reason,omitempty"`
	}
	// RebasePublished records PublishRebase.
	RebasePublished struct {
		Job    string `json:"job"`
		Epoch  int    `json:"epoch"`
		Sync   int    `json:"sync"`
		CID    string `json:"cid"`
		Digest string `json:"digest"`
	}
)

func (RebaseSet) Kind() string       { return "rebase_set" }
func (RebasePublished) Kind() string { return "rebase_published" }

func (m *Machine) setRebase(now int64, c SetRebase) error {
	j, err := m.job(c.Job)
	if err != nil {
		return err
	}
	if c.Sync < 1 || c.Step == 0 || len(c.Reason) > 1024 {
		return fmt.Errorf("%w: a rebase needs a sync ≥ 1, its step and a reason of at most 1024 bytes", ErrInvalid)
	}
	if j.State != Running || j.Epoch != c.Epoch {
		return fmt.Errorf("%w: rebase of job %s epoch %d (the job is %s in epoch %d)", ErrPrecondition, j.ID, c.Epoch, j.State, j.Epoch)
	}
	if len(j.Rebases) >= MaxRebases {
		return fmt.Errorf("%w: job %s has %d rebases this epoch, the most there may be", ErrPrecondition, j.ID, len(j.Rebases))
	}
	for _, r := range j.Rebases {
		if r.Sync >= c.Sync {
			return fmt.Errorf("%w: job %s has a rebase at sync %d already", ErrPrecondition, j.ID, r.Sync)
		}
	}
	for sl := range j.Slots {
		if sl.Epoch == c.Epoch && sl.Step >= c.Step {
			return fmt.Errorf("%w: a delta of job %s epoch %d at step %d is accepted: sync %d (step %d) may be past", ErrPrecondition, j.ID, c.Epoch, sl.Step, c.Sync, c.Step)
		}
	}
	m.emit(now, RebaseSet{Job: j.ID, Epoch: c.Epoch, Sync: c.Sync, Step: c.Step, Reason: c.Reason})
	return nil
}

func (m *Machine) applyRebaseSet(e RebaseSet) error {
	j := m.jobs[e.Job]
	if j == nil || j.State != Running || j.Epoch != e.Epoch {
		return fmt.Errorf("rebase of %s epoch %d out of place", e.Job, e.Epoch)
	}
	j.Rebases = append(j.Rebases, Rebase{Epoch: e.Epoch, Sync: e.Sync, Step: e.Step, Reason: e.Reason})
	return nil
}

func (m *Machine) publishRebase(now int64, c PublishRebase) error {
	j, err := m.job(c.Job)
	if err != nil {
		return err
	}
	if c.CID == "" || len(c.CID) > maxName || len(c.Digest) != 64 {
		return fmt.Errorf("%w: a rebase state needs a CID and a 64-digit digest", ErrInvalid)
	}
	i := slices.IndexFunc(j.Rebases, func(r Rebase) bool { return r.Epoch == c.Epoch && r.Sync == c.Sync })
	if j.State != Running || j.Epoch != c.Epoch || i < 0 || j.Rebases[i].CID != "" {
		return fmt.Errorf("%w: no unpublished rebase of job %s at epoch %d sync %d", ErrPrecondition, j.ID, c.Epoch, c.Sync)
	}
	m.emit(now, RebasePublished{Job: j.ID, Epoch: c.Epoch, Sync: c.Sync, CID: c.CID, Digest: c.Digest})
	return nil
}

func (m *Machine) applyRebasePublished(e RebasePublished) error {
	j := m.jobs[e.Job]
	if j == nil {
		return fmt.Errorf("rebase state of unknown job %s", e.Job)
	}
	i := slices.IndexFunc(j.Rebases, func(r Rebase) bool { return r.Epoch == e.Epoch && r.Sync == e.Sync })
	if i < 0 || j.Rebases[i].CID != "" {
		return fmt.Errorf("rebase state of %s epoch %d sync %d out of place", e.Job, e.Epoch, e.Sync)
	}
	j.Rebases[i].CID, j.Rebases[i].Digest = e.CID, e.Digest
	return nil
}
