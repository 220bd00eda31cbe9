package epoch_test

import (
	"encoding/hex"
	"math"
	"strings"
	"testing"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/orchestrator/judge/epoch"
	"github.com/zooai/gym/protocol/delta"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
)

// tensors is a as delta tensors (fp32), as jobconf.Encode writes them.
func tensors(a *llama.Adapter) []delta.Tensor {
	var ts []delta.Tensor
	for _, t := range a.Views() {
		var shape []uint64
		for _, s := range t.Shape {
			shape = append(shape, uint64(s))
		}
		ts = append(ts, delta.Tensor{Name: t.Name, DType: delta.FP32, Shape: shape, Data: llama.Float32Bytes(t.Data)})
	}
	return ts
}

func tensorDigest(a *llama.Adapter) string {
	d := llama.Digest(a.Views())
	return hex.EncodeToString(d[:])
}

// TestAdmit runs the admission of one submitted delta against a job's
// standing, for an honest delta and every kind of misbehaviour a delta
// proves (or is refused for) on its own.
func TestAdmit(t *testing.T) {
	w := newWorld(t)
	node := w.nodes[0]
	honest := w.contribution(node, 1)
	submission := func(a *llama.Adapter) epoch.Submission {
		return epoch.Submission{Node: node, Digest: "d-new", SyncKey: []byte("1"), HasSyncKey: true, Tensors: tensors(a),
			Binding: []byte(`"b-this-hanzod"`), HasBinding: true,
			Meta: delta.MetadataFields{Job: w.plan.Job, Epoch: 1, Step: 1, Node: node, Sequence: 5, Samples: w.plan.Samples()}}
	}
	standing := func() epoch.Standing {
		return epoch.Standing{Plan: w.plan, Template: w.start, Epoch: 1, State: "running", Open: true, Member: true, LastSeq: 4,
			Seen: map[string]jobspec.Slot{}, Binding: "b-this-hanzod"}
	}
	scaled := func(a *llama.Adapter, f float64) *llama.Adapter {
		a = a.Clone()
		for _, t := range a.Views() {
			for j := range t.Data {
				t.Data[j] *= float32(f)
			}
		}
		return a
	}
	bound := w.plan.ClipNorm(w.start.NumParams())
	slot := jobspec.Slot{Epoch: 1, Step: 1, Node: node}
	cases := []struct {
		name    string
		edit    func(s *epoch.Submission, st *epoch.Standing)
		outcome epoch.Outcome
		reason  string
		detail  string // prefix
		offence string
		earlier string
	}{
		{"honest", func(*epoch.Submission, *epoch.Standing) {}, epoch.Accepted, "", "", "", ""},
		{"at the norm bound", func(s *epoch.Submission, _ *epoch.Standing) {
			s.Tensors = tensors(scaled(honest, bound/jobconf.Norm(honest)))
		}, epoch.Accepted, "", "", "", ""},
		{"norm-violating", func(s *epoch.Submission, _ *epoch.Standing) {
			s.Tensors = tensors(scaled(honest, 1.01*bound/jobconf.Norm(honest)))
		}, epoch.Rejected, epoch.ReasonNorm, "norm ", "norm", ""},
		{"equivocating", func(_ *epoch.Submission, st *epoch.Standing) {
			st.Held, st.HeldAdapter = "d-held-0123456789abcdef", w.contribution(node, 2)
		}, epoch.Rejected, epoch.ReasonEquivocation, "a different delta (d-held-012345678…) is already accepted for slot " + slot.String(), "equivocation", slot.String()},
		{"the same file again", func(_ *epoch.Submission, st *epoch.Standing) {
			st.Held = "d-new"
		}, epoch.Duplicate, "", "", "", ""},
		{"the same tensors under new metadata", func(s *epoch.Submission, st *epoch.Standing) {
			st.Held, st.HeldAdapter = "d-held", honest.Clone()
			s.Meta.Sequence = 1 // a restarted worker: below the last accepted, still a duplicate
		}, epoch.Duplicate, "", "", "", ""},
		{"replayed tensors", func(s *epoch.Submission, st *epoch.Standing) {
			st.Seen[node+"/"+tensorDigest(honest)] = jobspec.Slot{Epoch: 1, Step: 7, Node: node}
		}, epoch.Rejected, epoch.ReasonReplay, "the tensors are a copy of the delta accepted for slot 1/7/", "replay", "1/7/" + node},
		{"another node's tensors", func(s *epoch.Submission, st *epoch.Standing) {
			st.Seen[w.nodes[1]+"/"+tensorDigest(honest)] = jobspec.Slot{Epoch: 1, Step: 1, Node: w.nodes[1]}
		}, epoch.Accepted, "", "", "", ""},
		{"stale sequence", func(s *epoch.Submission, _ *epoch.Standing) { s.Meta.Sequence = 4 },
			epoch.Rejected, epoch.ReasonStale, "sequence 4, the last accepted was 4", "", ""},
		{"late", func(_ *epoch.Submission, st *epoch.Standing) { st.Epoch, st.Open, st.State = 2, true, "running" },
			epoch.Rejected, epoch.ReasonLate, "job is running in epoch 2; this delta is for epoch 1", "", ""},
		{"aggregating", func(_ *epoch.Submission, st *epoch.Standing) { st.Open, st.State = false, "aggregating" },
			epoch.Rejected, epoch.ReasonLate, "job is aggregating in epoch 1", "", ""},
		{"not a member", func(_ *epoch.Submission, st *epoch.Standing) { st.Member = false },
			epoch.Rejected, epoch.ReasonNotMember, "the node is not in the job's ring", "", ""},
		{"wrong shape", func(s *epoch.Submission, _ *epoch.Standing) { s.Tensors = s.Tensors[1:] },
			epoch.Rejected, epoch.ReasonShape, "", "", ""},
		{"non-finite", func(s *epoch.Submission, _ *epoch.Standing) {
			a := honest.Clone()
			a.Views()[0].Data[1] = float32(math.NaN())
			s.Tensors = tensors(a)
		}, epoch.Rejected, epoch.ReasonNonFinite, "", "", ""},
		{"step ends no sync", func(s *epoch.Submission, _ *epoch.Standing) { s.Meta.Step = 9 },
			epoch.Rejected, epoch.ReasonMetadata, "step 9 of epoch 1 ends no sync", "", ""},
		{"sync key", func(s *epoch.Submission, _ *epoch.Standing) { s.SyncKey = []byte(`"1"`) },
			epoch.Rejected, epoch.ReasonMetadata, `metadata sync "1", step 1 is sync 1`, "", ""},
		{"samples", func(s *epoch.Submission, _ *epoch.Standing) { s.Meta.Samples++ },
			epoch.Rejected, epoch.ReasonMetadata, "samples ", "", ""},
		{"declared shape larger than the job's", func(s *epoch.Submission, _ *epoch.Standing) {
			s.Tensors[0].Shape = []uint64{s.Tensors[0].Shape[0], 1 << 40}
		}, epoch.Rejected, epoch.ReasonShape, "llama: tensors do not match the adapter: tensor ", "", ""},
		{"declared fp16", func(s *epoch.Submission, _ *epoch.Standing) { s.Tensors[1].DType = delta.FP16 },
			epoch.Rejected, epoch.ReasonShape, "llama: tensors do not match the adapter: tensor ", "", ""},
		{"equivocating in another shape", func(s *epoch.Submission, st *epoch.Standing) {
			st.Held, st.HeldAdapter = "d-held-0123456789abcdef", honest.Clone()
			s.Tensors = s.Tensors[1:]
		}, epoch.Rejected, epoch.ReasonEquivocation, "a different delta", "equivocation", slot.String()},
		{"another deployment's job of the same id", func(s *epoch.Submission, _ *epoch.Standing) { s.Binding = []byte(`"b-other-hanzod"`) },
			epoch.Rejected, epoch.ReasonMetadata, `job binding "b-other-hanzod"`, "", ""},
		{"no job binding", func(s *epoch.Submission, _ *epoch.Standing) { s.Binding, s.HasBinding = nil, false },
			epoch.Rejected, epoch.ReasonMetadata, "job binding ", "", ""},
	}
	// The cases whose verdict depends on the tensors' values.
	needsData := map[string]bool{"honest": true, "at the norm bound": true, "norm-violating": true, "equivocating": true,
		"the same tensors under new metadata": true, "replayed tensors": true, "another node's tensors": true, "non-finite": true}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, st := submission(honest), standing()
			c.edit(&s, &st)
			// Screen sees the declared tensors only (nothing decompressed):
			// it must either give Admit's verdict or ask for the data.
			hdr := s
			hdr.Tensors = nil
			for _, tn := range s.Tensors {
				hdr.Tensors = append(hdr.Tensors, delta.Tensor{Name: tn.Name, DType: tn.DType, Shape: tn.Shape})
			}
			sa, more := epoch.Screen(hdr, st)
			a := epoch.Admit(s, st)
			if !more && (sa.Outcome != a.Outcome || sa.Reason != a.Reason || sa.Detail != a.Detail || sa.Epoch != a.Epoch || sa.Sync != a.Sync) {
				t.Fatalf("Screen decided %+v, Admit %+v", sa, a)
			}
			if more != needsData[c.name] {
				t.Errorf("Screen asked for the data: %v, want %v", more, needsData[c.name])
			}
			// Decoded outside (the judge decodes outside its lock): the same.
			if more {
				s2 := s
				s2.Decoded = epoch.Decode(st.Template, s)
				if a2 := epoch.Admit(s2, st); a2.Outcome != a.Outcome || a2.Reason != a.Reason || a2.Detail != a.Detail {
					t.Fatalf("Admit with the tensors decoded outside: %+v, inside: %+v", a2, a)
				}
			}
			if a.Outcome != c.outcome || a.Reason != c.reason || !strings.HasPrefix(a.Detail, c.detail) {
				t.Fatalf("admission %v %q %q, want %v %q %q…", a.Outcome, a.Reason, a.Detail, c.outcome, c.reason, c.detail)
			}
			if c.outcome == epoch.Rejected && a.Detail == "" {
				t.Error("a rejection without a detail")
			}
			switch {
			case c.offence == "" && a.Offence != nil:
				t.Errorf("offence %+v, want none", a.Offence)
			case c.offence != "" && (a.Offence == nil || a.Offence.Name != c.offence || earlierKey(a.Offence) != c.earlier || a.Offence.Detail == ""):
				t.Errorf("offence %+v, want %s with earlier slot %q", a.Offence, c.offence, c.earlier)
			}
			if a.Outcome == epoch.Accepted {
				if a.Adapter == nil || a.TensorDigest != tensorDigest(a.Adapter) || a.Epoch != 1 || a.Sync != 1 {
					t.Errorf("accepted admission %+v", a)
				}
			}
		})
	}
}

func earlierKey(o *epoch.Offence) string {
	if o == nil || o.Earlier == nil {
		return ""
	}
	return o.Earlier.String()
}
