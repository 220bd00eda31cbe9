package epoch

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/protocol/delta"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
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
	// ReasonTraces: the rollout traces the delta names are missing, are
	// not the bytes sent, do not read, or are not the node's of that
	// epoch (docs/traces.md).
	ReasonTraces = "traces"
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
	// Tensors are the file's tensors. For Screen only their names, dtypes
	// and shapes matter (Data may be nil: not decompressed yet).
	Tensors []delta.Tensor
	// Decoded, when not nil, is Tensors already decoded against the
	// standing's template (Decode): the judge decodes outside its lock.
	Decoded *Decoding
}

// Decoding is a submission's tensors decoded against a job's adapter
// (jobconf.Decode), or why they do not decode.
type Decoding struct {
	Adapter *llama.Adapter
	Err     error
}

// Decode decodes s's tensors against template.
func Decode(template *llama.Adapter, s Submission) *Decoding {
	a, err := jobconf.Decode(template, s.Tensors)
	return &Decoding{Adapter: a, Err: err}
}

func (s Submission) decode(template *llama.Adapter) (*llama.Adapter, error) {
	if s.Decoded != nil {
		return s.Decoded.Adapter, s.Decoded.Err
	}
	return jobconf.Decode(template, s.Tensors)
}

// Standing is what admitting a delta depends on: the job's plan and state
// and the node's record in it, at the time of submission.
type Standing struct {
	Plan     jobconf.Plan
	Template *llama.Adapter // an adapter of the job's shape
	Epoch    int            // the job's current epoch
	State    string         // the job's state
	Open     bool           // the job is running and takes deltas for Epoch
	Member   bool           // the node is in the job's ring
	LastSeq  uint64         // the sequence of the node's last accepted delta
	// Held is the digest of the delta already accepted for the slot
	// ("" none); HeldAdapter its tensors when Held is not this file's.
	Held        string
	HeldAdapter *llama.Adapter
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
	Adapter      *llama.Adapter
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

// Screen is the part of Admit that needs no tensor data: it runs Admit's
// checks in Admit's order up to the first that needs the decoded values,
// with the declared names, dtypes and shapes of s.Tensors compared with
// the job's adapter before that. It returns Admit's verdict when one
// follows from the header, trailer and metadata alone (more=false), or
// more=true when the tensors must be decoded — and then decoding them is
// bounded by the job's adapter size. A file that Screen refuses is never
// decompressed.
// Admit checks a submitted delta against its job in the order SPEC.md
// gives once the signer and the job are known — the sync its step ends,
// the sync and samples it claims, the slot (the same delta again is a
// duplicate, a different one equivocation), its sequence (a replayed
// delta is stale), the epoch and membership, shapes and finite values, the
// norm bound, and a re-signed copy of the node's earlier tensors — and
// returns the verdict. Every rejection it gives is attributable to the
// node.
func Admit(s Submission, st Standing) Admission {
	a, more := Screen(s, st)
	if !more {
		return a
	}
	plan := st.Plan
	slot := s.Slot()
	verdict := func(x Admission) Admission {
		x.Epoch, x.Sync = a.Epoch, a.Sync
		return x
	}
	if st.Held != "" {
		// The same tensors under new metadata are a worker that restarted
		// and trained the sync again (deterministically): a duplicate.
		// Different tensors for one slot are equivocation.
		if got, err := s.decode(st.Template); err == nil && st.HeldAdapter != nil &&
			llama.Digest(st.HeldAdapter.Views()) == llama.Digest(got.Views()) {
			return verdict(Admission{Outcome: Duplicate})
		}
		return verdict(equivocation(st, slot))
	}
	adapt, err := s.decode(st.Template)
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
	td := llama.Digest(adapt.Views())
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

func equivocation(st Standing, slot jobspec.Slot) Admission {
	a := rejected(ReasonEquivocation, "a different delta ("+st.Held[:min(16, len(st.Held))]+"…) is already accepted for slot "+slot.String())
	a.Offence = &Offence{Name: "equivocation", Detail: "two different signed deltas for slot " + slot.String(), Earlier: &slot, EarlierDigest: st.Held}
	return a
}

// Screen decides what a submission's metadata and declared shapes decide
// (Admit's checks up to the shapes): a verdict, or more when the tensors
// must be decoded.
func Screen(s Submission, st Standing) (a Admission, more bool) { return screen(s, st, true) }

// ScreenHead is Screen for an upload whose file has not arrived: the
// metadata is known, the tensors are not (s.Tensors is ignored). A
// duplicate of the file held for the slot (by the announced digest) and
// every refusal before the shapes are decided here; more means the file
// must be read (including a different file for a held slot, which may be
// equivocation or a restarted worker's duplicate).
func ScreenHead(s Submission, st Standing) (a Admission, more bool) { return screen(s, st, false) }

func screen(s Submission, st Standing, shapes bool) (a Admission, more bool) {
	plan := st.Plan
	meta := s.Meta
	epoch, k, ok := plan.SyncOf(meta.Step)
	if !ok || epoch != int(meta.Epoch) {
		a := rejected(ReasonMetadata, fmt.Sprintf("step %d of epoch %d ends no sync of the job (syncs every %d steps, %d per epoch)", meta.Step, meta.Epoch, plan.Interval, plan.StepsPerEpoch))
		a.Epoch = int(meta.Epoch)
		return a, false
	}
	verdict := func(a Admission) Admission {
		a.Epoch, a.Sync = epoch, k
		return a
	}
	if !s.HasSyncKey || string(s.SyncKey) != fmt.Sprint(k) {
		return verdict(rejected(ReasonMetadata, fmt.Sprintf("metadata sync %s, step %d is sync %d", s.SyncKey, meta.Step, k))), false
	}
	if st.Binding != "" && (!s.HasBinding || string(s.Binding) != strconv.Quote(st.Binding)) {
		return verdict(rejected(ReasonMetadata, fmt.Sprintf("job binding %s, this hanzod's job %s is bound to %q (a delta for another deployment or job)", s.Binding, meta.Job, st.Binding))), false
	}
	if meta.Samples != plan.Samples() {
		return verdict(rejected(ReasonMetadata, fmt.Sprintf("samples %d, a sync of this job trains on %d", meta.Samples, plan.Samples()))), false
	}
	slot := s.Slot()
	var declared error
	if shapes {
		declared = jobconf.CheckDeclared(st.Template, s.Tensors)
	}
	if st.Held != "" {
		if st.Held == s.Digest {
			return verdict(Admission{Outcome: Duplicate}), false
		}
		if declared != nil {
			// Not the job's shape, so not the held tensors: equivocation
			// without decoding anything.
			return verdict(equivocation(st, slot)), false
		}
		return verdict(Admission{}), true
	}
	if meta.Sequence <= st.LastSeq {
		return verdict(rejected(ReasonStale, fmt.Sprintf("sequence %d, the last accepted was %d (a replayed delta)", meta.Sequence, st.LastSeq))), false
	}
	if int(meta.Epoch) != st.Epoch || !st.Open {
		return verdict(rejected(ReasonLate, fmt.Sprintf("job is %s in epoch %d; this delta is for epoch %d", st.State, st.Epoch, meta.Epoch))), false
	}
	if !st.Member {
		return verdict(rejected(ReasonNotMember, "the node is not in the job's ring")), false
	}
	if declared != nil {
		return verdict(rejected(ReasonShape, declared.Error())), false
	}
	return verdict(Admission{}), true
}
