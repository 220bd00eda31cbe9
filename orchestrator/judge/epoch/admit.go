package epoch

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/zooai/gym/delta"
	"github.com/zooai/gym/jobconf"
	"github.com/zooai/gym/jobspec"
	"github.com/zooai/gym/model"
)

// Rejection reasons of a submitted delta (SubmitDeltaResponse.reason). The
// ones Admit gives are attributable to the node and recorded in the log;
// the others (signature, format, unknown job) are the judge's before it
// knows whom to blame.
const (
	ReasonSignature    = "signature"
	ReasonFormat       = "format"
	ReasonMetadata     = "metadata"
	ReasonStale        = "stale"
	ReasonLate         = "late"
	ReasonNotMember    = "not_member"
	ReasonEquivocation = "equivocation"
	ReasonReplay       = "replay"
	ReasonShape        = "shape"
	ReasonNonFinite    = "non_finite"
	ReasonNorm         = "norm"
	ReasonSpotCheck    = "spot_check"
)

// Submission is a delta as submitted: its signature verified, its
// metadata read, its tensors not yet checked against the job.
type Submission struct {
	Node       string // the signer (hex public key), the one metadata names
	Digest     string // the file's signature digest
	Meta       delta.MetadataFields
	SyncKey    []byte // the raw jobconf.KeySync metadata value
	HasSyncKey bool
	Binding    []byte // the raw jobconf.KeyBinding metadata value
	HasBinding bool
	Tensors    []delta.Tensor
}

// Standing is what admitting a delta depends on: the job's plan and state
// and the node's record in it, at the time of submission.
type Standing struct {
	Plan     jobconf.Plan
	Template *model.Adapter // an adapter of the job's shape
	Epoch    int            // the job's current epoch
	State    string         // the job's state
	Open     bool           // the job is running and takes deltas for Epoch
	Member   bool           // the node is in the job's ring
	LastSeq  uint64         // the sequence of the node's last accepted delta
	// Held is the digest of the delta already accepted for the slot
	// ("" none); HeldAdapter its tensors when Held is not this file's.
	Held        string
	HeldAdapter *model.Adapter
	// Seen maps node + "/" + tensor digest to the slot of each of the
	// job's accepted deltas (replay detection).
	Seen map[string]jobspec.Slot
	// Binding is the job's binding to this hanzod (jobconf.Binding); a
	// delta must carry it. Empty: not checked.
	Binding string
}

// Outcome is what becomes of a submitted delta.
type Outcome int

const (
	Rejected Outcome = iota
	Accepted
	Duplicate // accepted before: the same file, or the same tensors under new metadata
)

// Admission is the verdict on a submitted delta and what follows from it.
type Admission struct {
	Outcome Outcome
	Reason  string // when rejected: one of the Reason constants
	Detail  string
	Epoch   int
	Sync    int // the sync the delta's step ends (0: none)
	// Offence, when set, is proven by the delta: slash and eject the node.
	Offence *Offence
	// Adapter and TensorDigest are the accepted delta's decoded tensors
	// and their digest (model.Digest, hex).
	Adapter      *model.Adapter
	TensorDigest string
}

// Offence is a misbehaviour a delta proves on submission.
type Offence struct {
	Name   string // equivocation, replay or norm
	Detail string
	// Earlier is the slot of an earlier accepted delta the evidence keeps
	// besides the submitted one (nil: none); EarlierDigest its file digest
	// when known.
	Earlier       *jobspec.Slot
	EarlierDigest string
}

// Slot is the key of the slot the submission is for.
func (s Submission) Slot() jobspec.Slot {
	return jobspec.Slot{Epoch: int(s.Meta.Epoch), Step: s.Meta.Step, Node: s.Node}
}

func rejected(reason, detail string) Admission {
	return Admission{Outcome: Rejected, Reason: reason, Detail: detail}
}

// Admit checks a submitted delta against its job in the order SPEC.md
// gives once the signer and the job are known — the sync its step ends,
// the sync and samples it claims, the slot (the same delta again is a
// duplicate, a different one equivocation), its sequence (a replayed
// delta is stale), the epoch and membership, shapes and finite values, the
// norm bound, and a re-signed copy of the node's earlier tensors — and
// returns the verdict. Every rejection it gives is attributable to the
// node.
func Admit(s Submission, st Standing) Admission {
	plan := st.Plan
	meta := s.Meta
	epoch, k, ok := plan.SyncOf(meta.Step)
	if !ok || epoch != int(meta.Epoch) {
		a := rejected(ReasonMetadata, fmt.Sprintf("step %d of epoch %d ends no sync of the job (syncs every %d steps, %d per epoch)", meta.Step, meta.Epoch, plan.Interval, plan.StepsPerEpoch))
		a.Epoch = int(meta.Epoch)
		return a
	}
	verdict := func(a Admission) Admission {
		a.Epoch, a.Sync = epoch, k
		return a
	}
	if !s.HasSyncKey || string(s.SyncKey) != fmt.Sprint(k) {
		return verdict(rejected(ReasonMetadata, fmt.Sprintf("metadata sync %s, step %d is sync %d", s.SyncKey, meta.Step, k)))
	}
	if st.Binding != "" && (!s.HasBinding || string(s.Binding) != strconv.Quote(st.Binding)) {
		return verdict(rejected(ReasonMetadata, fmt.Sprintf("job binding %s, this hanzod's job %s is bound to %q (a delta for another deployment or job)", s.Binding, meta.Job, st.Binding)))
	}
	if meta.Samples != plan.Samples() {
		return verdict(rejected(ReasonMetadata, fmt.Sprintf("samples %d, a sync of this job trains on %d", meta.Samples, plan.Samples())))
	}
	slot := s.Slot()
	if st.Held != "" {
		if st.Held == s.Digest {
			return verdict(Admission{Outcome: Duplicate})
		}
		// The same tensors under new metadata are a worker that restarted
		// and trained the sync again (deterministically): a duplicate.
		// Different tensors for one slot are equivocation.
		if got, err := jobconf.Decode(st.Template, s.Tensors); err == nil && st.HeldAdapter != nil &&
			model.Digest(st.HeldAdapter.Tensors()) == model.Digest(got.Tensors()) {
			return verdict(Admission{Outcome: Duplicate})
		}
		a := rejected(ReasonEquivocation, "a different delta ("+st.Held[:min(16, len(st.Held))]+"…) is already accepted for slot "+slot.String())
		a.Offence = &Offence{Name: "equivocation", Detail: "two different signed deltas for slot " + slot.String(), Earlier: &slot, EarlierDigest: st.Held}
		return verdict(a)
	}
	if meta.Sequence <= st.LastSeq {
		return verdict(rejected(ReasonStale, fmt.Sprintf("sequence %d, the last accepted was %d (a replayed delta)", meta.Sequence, st.LastSeq)))
	}
	if int(meta.Epoch) != st.Epoch || !st.Open {
		return verdict(rejected(ReasonLate, fmt.Sprintf("job is %s in epoch %d; this delta is for epoch %d", st.State, st.Epoch, meta.Epoch)))
	}
	if !st.Member {
		return verdict(rejected(ReasonNotMember, "the node is not in the job's ring"))
	}
	adapt, err := jobconf.Decode(st.Template, s.Tensors)
	switch {
	case errors.Is(err, jobconf.ErrNonFinite):
		return verdict(rejected(ReasonNonFinite, err.Error()))
	case err != nil:
		return verdict(rejected(ReasonShape, err.Error()))
	}
	bound := plan.ClipNorm(st.Template.NumParams())
	if n := jobconf.Norm(adapt); n > bound*(1+1e-6) {
		a := rejected(ReasonNorm, fmt.Sprintf("norm %.6g above the bound %.6g every honest contribution is clipped to", n, bound))
		a.Offence = &Offence{Name: "norm", Detail: fmt.Sprintf("delta for slot %s has norm %.6g > bound %.6g", slot, n, bound)}
		return verdict(a)
	}
	td := model.Digest(adapt.Tensors())
	tdig := hex.EncodeToString(td[:])
	// A node's own earlier tensors under a new slot are a re-signed copy.
	// An all-zero contribution (every group had equal rewards) can repeat
	// honestly and proves nothing.
	if prev, ok := st.Seen[s.Node+"/"+tdig]; ok && jobconf.Norm(adapt) > 0 {
		a := rejected(ReasonReplay, "the tensors are a copy of the delta accepted for slot "+prev.String())
		a.Offence = &Offence{Name: "replay", Detail: "re-signed copy of the delta of slot " + prev.String() + " submitted for slot " + slot.String(), Earlier: &prev}
		return verdict(a)
	}
	return verdict(Admission{Outcome: Accepted, Adapter: adapt, TensorDigest: tdig})
}
