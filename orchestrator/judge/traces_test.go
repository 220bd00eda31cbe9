package judge_test

import (
	"context"
	"strings"
	"testing"

	"github.com/zooai/gym/orchestrator/judge"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/trace"
)

// traceSet is a one-sequence trace set of node i's epoch ep at step.
func (e *env) traceSet(i, ep, step int) *trace.Set {
	return &trace.Set{Header: trace.Header{Format: trace.Format, Version: trace.Version, Model: "builtin", Dataset: "addition",
		Job: e.job, Node: e.ids[i], Epoch: ep, Step: step, Temperature: 1, Prompts: 1, GroupSize: 1, Vocab: 16},
		Seqs: []trace.Sequence{{PromptText: "^1+2=", Answer: "3", PromptIDs: []int{1, 2}, Completion: "3", CompletionIDs: []int{3}, LogProbs: []float32{-0.5}, Reward: 1}}}
}

// TestSubmitTraces: the trace bundle a delta names must come with it, be
// the bytes named, read, and be the signer's of that job and epoch; a
// torch delta must name one; traces sent for a delta that names none are
// refused. A delta with its traces is accepted.
func TestSubmitTraces(t *testing.T) {
	spec := tinySpec()
	spec.Backend = "any"
	e := newEnv(t, 3, spec)
	ctx := context.Background()
	enc := func(sets ...*trace.Set) jobconf.Traces {
		tr, err := jobconf.EncodeTraces(ctx, sets)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	submit := func(file, traces []byte) judge.Verdict {
		v, err := e.j.Submit(e.ctx, file, traces)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	step := e.plan.SyncStep(1, 1)
	own := enc(e.traceSet(0, 1, step))
	other := enc(e.traceSet(0, 1, step+1))
	foreign := enc(e.traceSet(1, 1, step))
	cases := []struct {
		name    string
		backend string
		names   string // the CID the metadata names
		send    []byte
		detail  string
	}{
		{"a torch delta naming no traces", "torch", "", nil, "must name its sync's rollout traces"},
		{"traces named, none sent", "torch", own.CID, nil, "none were sent"},
		{"other traces sent than named", "torch", own.CID, other.Compressed, "the traces sent are"},
		{"not zstd", "torch", own.CID, []byte("not zstd at all"), "traces"},
		{"another node's traces", "torch", foreign.CID, foreign.Compressed, "node"},
		{"traces sent with a go delta naming none", "", "", own.Compressed, "names none"},
	}
	for _, c := range cases {
		d := e.sd(0, 1, 1, e.small(1, 1e-4))
		d.Backend, d.Traces = c.backend, c.names
		v := submit(e.encode(0, d), c.send)
		if v.Accepted || v.Reason != judge.ReasonTraces || !strings.Contains(v.Detail, c.detail) {
			t.Errorf("%s: %+v, want a %s rejection saying %q", c.name, v, judge.ReasonTraces, c.detail)
		}
	}
	d := e.sd(0, 1, 1, e.small(1, 1e-4))
	d.Backend, d.Traces = "torch", own.CID
	file := e.encode(0, d)
	if v := submit(file, own.Compressed); !v.Accepted {
		t.Fatalf("a torch delta with its traces: %+v", v)
	}
	// The same file again, without its traces (a client sending a worker's
	// kept delta files): a duplicate, accepted before.
	if v := submit(file, nil); !v.Accepted || !v.Duplicate {
		t.Fatalf("the accepted file again without traces: %+v", v)
	}
	// A go delta may still come without traces (workers before traces).
	if v := submit(e.encode(1, e.sd(1, 1, 1, e.small(2, 1e-4))), nil); !v.Accepted {
		t.Fatalf("a go delta without traces: %+v", v)
	}
}

// TestSubmitDType: a delta's dtype claim is checked at submission: one
// without measured tolerances, or a go delta claiming anything but
// float32, is refused for its metadata, saying what to send instead; a
// bfloat16 torch delta with its traces is accepted.
func TestSubmitDType(t *testing.T) {
	spec := tinySpec()
	spec.Backend = "any"
	e := newEnv(t, 3, spec)
	ctx := context.Background()
	tr, err := jobconf.EncodeTraces(ctx, []*trace.Set{e.traceSet(0, 1, e.plan.SyncStep(1, 1))})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, backend, dtype, detail string }{
		{"a torch delta in float16", "torch", "float16", `want "float32" or "bfloat16"`},
		{"a go delta in bfloat16", "", jobconf.BFloat16, "float32 only"},
	} {
		d := e.sd(0, 1, 1, e.small(1, 1e-4))
		d.Backend, d.DType, d.Traces = c.backend, c.dtype, tr.CID
		v, err := e.j.Submit(e.ctx, e.encode(0, d), tr.Compressed)
		if err != nil {
			t.Fatal(err)
		}
		if v.Accepted || v.Reason != judge.ReasonMetadata || !strings.Contains(v.Detail, c.detail) {
			t.Errorf("%s: %+v, want a %s rejection saying %q", c.name, v, judge.ReasonMetadata, c.detail)
		}
	}
	d := e.sd(0, 1, 1, e.small(1, 1e-4))
	d.Backend, d.DType, d.Traces = "torch", jobconf.BFloat16, tr.CID
	if v, err := e.j.Submit(e.ctx, e.encode(0, d), tr.Compressed); err != nil || !v.Accepted {
		t.Fatalf("a bfloat16 torch delta with its traces: %+v %v", v, err)
	}
}
