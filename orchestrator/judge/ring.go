package judge

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"

	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/ring"
)

// RingFrame is a frame of a ring all-reduce kept as evidence: the bytes its
// sender signed, the signature and the payload (ring.OpenEvidence checks
// them against the sender's key).
type RingFrame struct {
	SignedBytes string `json:"signed_bytes"` // hex
	Signature   string `json:"signature"`    // hex
	Payload     string `json:"payload"`      // base64
}

// suspectReport is the part of a worker's suspect report evidence
// (worker.SuspectReport, JSON) the judge reads.
type suspectReport struct {
	Evidence []struct {
		Kind        string `json:"kind"`
		SignedBytes string `json:"signed_bytes"`
		Signature   string `json:"signature"`
		Payload     []byte `json:"payload"`
	} `json:"evidence"`
}

// RingEvidence looks in a suspect report's evidence for proof that the
// suspect broke the norm bound inside the ring all-reduce: a frame it
// signed for this job whose payload's norm is above what any partial sum
// of honest contributions can reach — (round + 1) × C while scattering, the
// job's participants × C while gathering, C the bound every contribution
// is clipped to (the bound of the deltas, and the ring's ClipNorm). No
// honest node sends such a frame in any configuration: a receiver checks
// each partial sum before it adds its own contribution. Proven, the
// suspect is slashed ("norm") and ejected as for a delta above the bound;
// the evidence keeps the frame and names the frame's epoch, whose deltas
// and reward the suspect forfeits (Judge.offenders). Anything else in the report (a timeout, a
// broken link, a frame that does not verify) proves nothing against the
// suspect and is left to the report rules of the state machine. It
// reports whether the suspect was punished.
func (j *Judge) RingEvidence(ctx context.Context, jobID, suspect string, evidence []byte) (bool, error) {
	var rep suspectReport
	if json.Unmarshal(evidence, &rep) != nil {
		return false, nil // not a worker's report: nothing to check
	}
	pub, err := nodekey.ParsePublicHex(suspect)
	if err != nil {
		return false, nil
	}
	var job state.Job
	var ok bool
	var C float64
	j.eng.View(func(m *state.Machine) {
		if job, ok = m.Job(jobID); ok {
			job.Slots, job.Tally, job.Suspects, job.Bandwidth = nil, nil, nil, nil
		}
	})
	if !ok || !contains(job.Participants, suspect) {
		return false, nil
	}
	plan, err := j.plan(job.ID, job.Spec)
	if err == nil {
		j.mu.Lock()
		var template *llama.Adapter
		if template, err = j.template(plan); err == nil {
			C = plan.ClipNorm(template.NumParams())
		}
		j.mu.Unlock()
	}
	if err != nil {
		j.log.Warn("ring evidence not checked", "job", jobID, "suspect", short(suspect), "err", err)
		return false, err
	}
	for _, e := range rep.Evidence {
		if e.Kind != ring.NormExceeded.String() {
			continue
		}
		sb, err1 := hex.DecodeString(e.SignedBytes)
		sig, err2 := hex.DecodeString(e.Signature)
		if err1 != nil || err2 != nil {
			continue
		}
		f, err := ring.OpenEvidence(pub, sb, sig, e.Payload)
		if err != nil || f.Job != jobID || f.Header.Epoch < 1 || f.Header.Epoch > uint64(job.Epoch) {
			continue
		}
		contributions := ring.Contributions(f.Header.Phase, f.Header.Round, len(job.Participants))
		if !ring.NormExceeds(f.NormSq, contributions, C, f.Header.Wire) {
			continue // this frame alone does not prove it (the ring's check is cumulative)
		}
		norm := math.Sqrt(f.NormSq)
		detail := fmt.Sprintf("ring frame of epoch %d, step %d, %s round %d, chunk %d segment %d: norm %.6g > %d × bound %.6g",
			f.Header.Epoch, f.Header.Step, f.Header.Phase, f.Header.Round, f.Header.Chunk, f.Header.Segment, norm, contributions, C)
		j.punishRing(ctx, jobID, int(f.Header.Epoch), suspect, detail, RingFrame{SignedBytes: e.SignedBytes, Signature: e.Signature,
			Payload: base64.StdEncoding.EncodeToString(e.Payload)})
		return true, nil
	}
	return false, nil
}
