package judge_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/orchestrator/judge"
	"github.com/zooai/gym/orchestrator/state"
	"github.com/zooai/gym/protocol/delta"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
)

// good is a valid delta of node i for sync k of epoch 1, its values of
// magnitude 1e-4 (well below the bound) and seeded by seed.
func (e *env) good(i, k int, seed uint64) []byte {
	return e.encode(i, e.sd(i, 1, k, e.small(seed, 1e-4)))
}

// rawFile writes tensors signed by node i with metadata meta (nil: none).
func (e *env) rawFile(i int, ts []delta.Tensor, meta *delta.Metadata) []byte {
	e.t.Helper()
	var b bytes.Buffer
	if _, err := delta.Write(context.Background(), &b, e.keys[i], ts, delta.WriteOptions{Compression: delta.Zstd, Flags: delta.FlagLoRA, Metadata: meta}); err != nil {
		e.t.Fatal(err)
	}
	return b.Bytes()
}

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

// meta is the metadata jobconf.Encode writes for d.
func meta(d jobconf.SyncDelta) *delta.Metadata {
	m := delta.NewMetadata(delta.MetadataFields{Job: d.Job, Epoch: uint64(d.Epoch), Step: d.Step, Node: d.Node,
		Sequence: d.Sequence, BaseCheckpoint: d.Base, ClaimedLoss: d.ClaimedLoss, Samples: d.Samples, Time: d.Time})
	_ = m.Set(jobconf.KeySync, d.Sync)
	_ = m.Set(jobconf.KeyBinding, jobconf.Binding(judgeKey().Public().(ed25519.PublicKey), d.Job))
	return m
}

// expectReject submits file and checks the typed reason (one of reasons),
// the response digest, and the verdict in the log: a rejected
// DeltaJudged with that reason when attributable, none otherwise. It
// returns the response detail.
func (e *env) expectReject(file []byte, attributable bool, reasons ...string) string {
	e.t.Helper()
	before := len(e.events())
	r := e.submit(file)
	if r.Accepted || r.Duplicate || !contains(reasons, r.Reason) {
		e.t.Fatalf("verdict %+v, want a rejection for %v", r, reasons)
	}
	if r.Detail == "" {
		e.t.Errorf("rejection %q without a detail", r.Reason)
	}
	if !utf8.ValidString(r.Reason) || !utf8.ValidString(r.Detail) {
		e.t.Fatalf("verdict %+v cannot be sent: a protobuf string must be valid UTF-8", r)
	}
	// The digest is computed once the signer is known to be registered:
	// a file nobody registered signed is not even hashed.
	if want := e.expectedDigest(file); r.Digest != want {
		e.t.Errorf("response digest %q, want %q", r.Digest, want)
	}
	vs := e.verdicts(digestOf(file))
	if !attributable {
		if len(vs) != 0 || len(e.events()) != before {
			e.t.Fatalf("an unattributable rejection (%s) changed the log: %+v", r.Reason, vs)
		}
		return r.Detail
	}
	if len(vs) == 0 {
		e.t.Fatalf("no delta_judged event for a %s rejection", r.Reason)
	}
	v := vs[len(vs)-1]
	if v.Accepted || v.Reason != r.Reason || v.Job != e.job || !strings.HasPrefix(r.Detail, v.Detail) || v.Detail == "" {
		e.t.Fatalf("delta_judged %+v for response %+v", v, r)
	}
	return r.Detail
}

// expectedDigest is the response digest of file: its signature digest
// when its trailer names a registered node, "" otherwise.
func (e *env) expectedDigest(file []byte) string {
	_, k, err := delta.PeekSigner(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		return ""
	}
	key := hex.EncodeToString(k)
	var known bool
	e.eng.View(func(m *state.Machine) { _, known = m.Node(key) })
	if !known {
		return ""
	}
	return digestOf(file)
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

func (e *env) expectAccept(file []byte) {
	e.t.Helper()
	r := e.submit(file)
	if !r.Accepted || r.Duplicate || r.Reason != "" {
		e.t.Fatalf("verdict %+v, want accepted", r)
	}
	vs := e.verdicts(digestOf(file))
	if len(vs) != 1 || !vs[0].Accepted {
		e.t.Fatalf("delta_judged events %+v, want one accepted", vs)
	}
}

// expectSlashed checks node i was slashed exactly once for offence, with
// evidence holding files, and is out of the ring.
func (e *env) expectSlashed(i int, offence string, files ...[]byte) {
	e.t.Helper()
	sl := e.slashes(e.ids[i])
	if len(sl) != 1 {
		e.t.Fatalf("node slashed %d times, want once: %+v", len(sl), sl)
	}
	if !strings.HasPrefix(sl[0].Reason, offence+":") || sl[0].Amount == 0 {
		e.t.Fatalf("slash %+v, want one for %s", sl[0], offence)
	}
	ev := evidence(e.t, sl[0])
	if ev.Offence != offence {
		e.t.Fatalf("evidence offence %q, want %q", ev.Offence, offence)
	}
	if len(ev.Files) != len(files) {
		e.t.Fatalf("evidence holds %d files, want %d", len(ev.Files), len(files))
	}
	for _, f := range files {
		if !holdsFile(e.t, ev, f) {
			e.t.Fatalf("evidence does not hold file %s", digestOf(f)[:12])
		}
	}
	if e.inRing(i) {
		e.t.Fatal("a slashed node is still in the ring")
	}
}

func (e *env) expectNotSlashed(i int) {
	e.t.Helper()
	if sl := e.slashes(e.ids[i]); len(sl) != 0 {
		e.t.Fatalf("node %d slashed: %+v", i, sl)
	}
	if !e.inRing(i) {
		e.t.Fatalf("node %d left the ring", i)
	}
}

// TestValidation runs every check of the validation chain on a fresh
// job, each with the typed reason it must give.
func TestValidation(t *testing.T) {
	spec := tinySpec()
	cases := []struct {
		name string
		run  func(t *testing.T, e *env)
	}{
		{"garbage", func(t *testing.T, e *env) {
			e.expectReject([]byte("this is not a delta file at all"), false, judge.ReasonFormat)
			e.expectReject(nil, false, judge.ReasonFormat)
		}},
		{"flipped payload byte", func(t *testing.T, e *env) {
			f := e.good(0, 1, 1)
			for _, off := range []int{len(f) / 2, 40, len(f) - delta.SignatureSize - 33} {
				g := bytes.Clone(f)
				g[off] ^= 0x10
				e.expectReject(g, false, judge.ReasonSignature, judge.ReasonFormat)
			}
			e.expectNotSlashed(0)
			e.expectAccept(f) // the original is still fine
		}},
		{"flipped signature byte", func(t *testing.T, e *env) {
			f := e.good(0, 1, 1)
			g := bytes.Clone(f)
			g[len(g)-ed25519PublicKeySize-5] ^= 1
			e.expectReject(g, false, judge.ReasonSignature)
		}},
		{"unregistered signer", func(t *testing.T, e *env) {
			f := e.encode(3, e.sd(3, 1, 1, e.small(1, 1e-4)))
			d := e.expectReject(f, false, judge.ReasonSignature)
			if !strings.Contains(d, "not a registered node") {
				t.Errorf("detail %q", d)
			}
		}},
		{"no metadata", func(t *testing.T, e *env) {
			e.expectReject(e.rawFile(0, tensors(e.small(1, 1e-4)), nil), false, judge.ReasonMetadata)
		}},
		{"incomplete metadata", func(t *testing.T, e *env) {
			m := &delta.Metadata{}
			_ = m.Set(delta.KeyJob, e.job)
			_ = m.Set(delta.KeyNode, e.ids[0])
			e.expectReject(e.rawFile(0, tensors(e.small(1, 1e-4)), m), false, judge.ReasonMetadata)
		}},
		{"metadata names another node", func(t *testing.T, e *env) {
			d := e.sd(0, 1, 1, e.small(1, 1e-4))
			d.Node = e.ids[1]
			e.expectReject(e.encode(0, d), false, judge.ReasonMetadata)
			e.expectNotSlashed(0)
			e.expectNotSlashed(1)
		}},
		{"unknown job", func(t *testing.T, e *env) {
			d := e.sd(0, 1, 1, e.small(1, 1e-4))
			d.Job = "job-99999999"
			e.expectReject(e.encode(0, d), false, judge.ReasonMetadata)
		}},
		{"step ends no sync", func(t *testing.T, e *env) {
			for _, step := range []uint64{0, uint64(e.plan.SyncStep(e.plan.Epochs, e.plan.Syncs()) + 1), math.MaxUint64} {
				d := e.sd(0, 1, 1, e.small(1, 1e-4))
				d.Step = step
				e.expectReject(e.encode(0, d), true, judge.ReasonMetadata)
			}
			d := e.sd(0, 1, 1, e.small(1, 1e-4))
			d.Epoch = 2 // step 1 is in epoch 1
			e.expectReject(e.encode(0, d), true, judge.ReasonMetadata)
			if tl := e.jobState().Tally[e.ids[0]]; tl == nil || tl.Rejected != 4 || tl.Accepted != 0 {
				t.Fatalf("tally %+v, want 4 rejected", tl)
			}
			e.expectNotSlashed(0)
		}},
		{"sync key mismatch", func(t *testing.T, e *env) {
			d := e.sd(0, 1, 1, e.small(1, 1e-4))
			d.Sync = 2
			e.expectReject(e.encode(0, d), true, judge.ReasonMetadata)
			d = e.sd(0, 1, 1, e.small(1, 1e-4))
			m := meta(d)
			_ = m.Set(jobconf.KeySync, "1") // a string, not the number
			e.expectReject(e.rawFile(0, tensors(d.Delta), m), true, judge.ReasonMetadata)
			e.expectReject(e.rawFile(0, tensors(d.Delta), delta.NewMetadata(delta.MetadataFields{Job: d.Job, Epoch: 1, Step: d.Step,
				Node: d.Node, Sequence: 9, Time: d.Time})), true, judge.ReasonMetadata) // no sync key
		}},
		{"stale sequence", func(t *testing.T, e *env) {
			first := e.sd(0, 1, 1, e.small(1, 1e-4))
			first.Sequence = 5
			e.expectAccept(e.encode(0, first))
			for _, seq := range []uint64{5, 4, 0} {
				d := e.sd(0, 1, 2, e.small(2, 1e-4))
				d.Sequence = seq
				e.expectReject(e.encode(0, d), true, judge.ReasonStale)
			}
			d := e.sd(0, 1, 2, e.small(2, 1e-4))
			d.Sequence = 6
			e.expectAccept(e.encode(0, d))
			e.expectNotSlashed(0)
		}},
		{"wrong shape", func(t *testing.T, e *env) {
			d := e.sd(0, 1, 1, e.small(1, 1e-4))
			ts := tensors(d.Delta)
			e.expectReject(e.rawFile(0, ts[:len(ts)-1], meta(d)), true, judge.ReasonShape)
			sw := append([]delta.Tensor(nil), ts...)
			sw[0], sw[1] = sw[1], sw[0]
			e.expectReject(e.rawFile(0, sw, meta(d)), true, judge.ReasonShape)
			tr := append([]delta.Tensor(nil), ts...)
			tr[0].Shape = []uint64{tr[0].Shape[1], tr[0].Shape[0]} // same bytes, transposed
			e.expectReject(e.rawFile(0, tr, meta(d)), true, judge.ReasonShape)
			bf := append([]delta.Tensor(nil), ts...)
			bf[0] = delta.Tensor{Name: bf[0].Name, DType: delta.FP16, Shape: bf[0].Shape, Data: bf[0].Data[:len(bf[0].Data)/2]}
			e.expectReject(e.rawFile(0, bf, meta(d)), true, judge.ReasonShape)
			e.expectNotSlashed(0)
			e.expectAccept(e.encode(0, e.sd(0, 1, 1, e.small(1, 1e-4))))
		}},
		{"long detail", func(t *testing.T, e *env) {
			// A rejection whose detail is longer than the log keeps (1024
			// bytes) and made of multi-byte characters: the logged detail
			// is a valid UTF-8 prefix of the response's, whatever the
			// byte the cut falls on.
			for _, prefix := range []string{"", "x"} {
				d := e.sd(0, 1, 1, e.small(1, 1e-4))
				ts := tensors(d.Delta)
				ts[0].Name = prefix + strings.Repeat("é", 500)
				file := e.rawFile(0, ts, meta(d))
				r := e.submit(file)
				if r.Reason != judge.ReasonShape || !utf8.ValidString(r.Detail) {
					t.Fatalf("verdict %+v", r)
				}
				vs := e.verdicts(digestOf(file))
				if len(vs) != 1 {
					t.Fatalf("%d verdicts", len(vs))
				}
				if v := vs[0].Detail; len(v) > 1024 || len(v) < 1000 || !utf8.ValidString(v) || !strings.HasPrefix(r.Detail, v) {
					t.Fatalf("logged detail (%d bytes, valid UTF-8 %v) is not a prefix of the response's: ...%q", len(v), utf8.ValidString(v), v[max(0, len(v)-8):])
				}
			}
		}},
		{"non-finite value", func(t *testing.T, e *env) {
			for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
				a := e.small(1, 1e-4)
				ts := a.Views()
				ts[len(ts)-1].Data[3] = float32(v)
				e.expectReject(e.encode(0, e.sd(0, 1, 1, a)), true, judge.ReasonNonFinite)
			}
			e.expectNotSlashed(0)
		}},
		{"norm above the bound", func(t *testing.T, e *env) {
			a := e.small(1, 1e-4)
			// Scale to 1.01 times the bound.
			f := float32(1.01 * e.bound() / jobconf.Norm(a))
			for _, tt := range a.Views() {
				for j := range tt.Data {
					tt.Data[j] *= f
				}
			}
			file := e.encode(0, e.sd(0, 1, 1, a))
			e.expectReject(file, true, judge.ReasonNorm)
			e.expectSlashed(0, "norm", file)
			// Exactly at the bound is honest (clipped).
			b := e.small(2, 1e-4)
			f = float32(e.bound() / jobconf.Norm(b))
			for _, tt := range b.Views() {
				for j := range tt.Data {
					tt.Data[j] *= f
				}
			}
			e.expectAccept(e.encode(1, e.sd(1, 1, 1, b)))
			e.expectNotSlashed(1)
		}},
		{"duplicate", func(t *testing.T, e *env) {
			f := e.good(0, 1, 1)
			e.expectAccept(f)
			for range 2 {
				r := e.submit(f)
				if !r.Accepted || !r.Duplicate || r.Digest != digestOf(f) {
					t.Fatalf("resubmission: %+v, want accepted duplicate", r)
				}
			}
			if vs := e.verdicts(digestOf(f)); len(vs) != 1 || !vs[0].Accepted {
				t.Fatalf("delta_judged events %+v, want exactly one accepted", vs)
			}
			if tl := e.jobState().Tally[e.ids[0]]; tl.Accepted != 1 || tl.Rejected != 0 {
				t.Fatalf("tally %+v", tl)
			}
			e.expectNotSlashed(0)
		}},
		{"retrained after a restart", func(t *testing.T, e *env) {
			// A worker that restarts and trains the same sync again
			// signs the same tensors under a new sequence and time: a
			// duplicate, not equivocation.
			d := e.small(7, 1e-4)
			first := e.encode(0, e.sd(0, 1, 1, d))
			e.expectAccept(first)
			e.clk.Advance(time.Second)
			again := e.encode(0, e.sd(0, 1, 1, d.Clone()))
			if digestOf(again) == digestOf(first) {
				t.Fatal("the retrained file should differ in its metadata")
			}
			if r := e.submit(again); !r.Accepted || !r.Duplicate {
				t.Fatalf("retrained delta: %+v, want an accepted duplicate", r)
			}
			e.expectNotSlashed(0)
		}},
		{"samples", func(t *testing.T, e *env) {
			sd := e.sd(0, 1, 1, e.small(8, 1e-4))
			sd.Samples++
			e.expectReject(e.encode(0, sd), true, judge.ReasonMetadata)
			e.expectNotSlashed(0)
		}},
		{"equivocation", func(t *testing.T, e *env) {
			a, b, c := e.good(0, 1, 1), e.good(0, 1, 2), e.good(0, 1, 3)
			e.expectAccept(a)
			e.expectReject(b, true, judge.ReasonEquivocation)
			e.expectSlashed(0, "equivocation", a, b)
			e.expectReject(c, true, judge.ReasonEquivocation)
			e.expectSlashed(0, "equivocation", a, b) // still once
			if r := e.submit(a); !r.Duplicate {
				t.Fatalf("the accepted delta again: %+v", r)
			}
			if got := e.jobState().Slots[jobspec.Slot{Epoch: 1, Step: 1, Node: e.ids[0]}]; got != digestOf(a) {
				t.Fatalf("slot holds %s, want the first delta", got)
			}
			e.expectNotSlashed(1)
		}},
		{"replay", func(t *testing.T, e *env) {
			x := e.small(1, 1e-4)
			a := e.encode(0, e.sd(0, 1, 1, x))
			e.expectAccept(a)
			e.expectAccept(e.good(1, 1, 5)) // another node is not affected
			r := e.encode(0, e.sd(0, 1, 2, x.Clone()))
			d := e.expectReject(r, true, judge.ReasonReplay)
			if !strings.Contains(d, jobspec.Slot{Epoch: 1, Step: 1, Node: e.ids[0]}.String()) {
				t.Errorf("detail %q does not name the original slot", d)
			}
			e.expectSlashed(0, "replay", a, r)
			e.expectNotSlashed(1)
		}},
		{"replay after a restart", func(t *testing.T, e *env) {
			x := e.small(1, 1e-4)
			a := e.encode(0, e.sd(0, 1, 1, x))
			e.expectAccept(a)
			e.restartJudge()
			r := e.encode(0, e.sd(0, 1, 2, x.Clone()))
			e.expectReject(r, true, judge.ReasonReplay)
			e.expectSlashed(0, "replay", a, r)
		}},
		{"duplicate after a restart", func(t *testing.T, e *env) {
			a := e.good(0, 1, 1)
			e.expectAccept(a)
			e.restartJudge()
			if r := e.submit(a); !r.Accepted || !r.Duplicate {
				t.Fatalf("resubmission after a restart: %+v", r)
			}
		}},
		{"late", func(t *testing.T, e *env) {
			e.expectAccept(e.good(0, 1, 1))
			e.do(state.EndEpoch{Job: e.job, Epoch: 1})
			if jb := e.jobState(); jb.State != state.Aggregating {
				t.Fatalf("job is %s", jb.State)
			}
			e.expectReject(e.good(1, 1, 2), true, judge.ReasonLate)
			e.expectReject(e.good(0, 2, 3), true, judge.ReasonLate)
			e.expectNotSlashed(1)
		}},
		{"future epoch", func(t *testing.T, e *env) {
			e.expectReject(e.encode(0, e.sd(0, 2, 1, e.small(1, 1e-4))), true, judge.ReasonLate)
		}},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			c.run(t, newEnv(t, 3, spec))
		})
	}
	t.Run("not_a_ring_member", func(t *testing.T) {
		e := newEnv(t, 4, spec) // four registered and staked, three in the ring
		out := -1
		for i := range 4 {
			if !e.inRing(i) {
				out = i
			}
		}
		if out < 0 {
			t.Fatalf("all four nodes in a ring of %d", spec.MaxNodes)
		}
		e.expectReject(e.good(out, 1, 1), true, judge.ReasonNotMember)
		e.expectNotSlashed((out + 1) % 4)
		if sl := e.slashes(e.ids[out]); len(sl) != 0 {
			t.Fatalf("a non-member slashed for submitting: %+v", sl)
		}
		// A member ejected for cheating is no longer one.
		in := (out + 1) % 4
		a := e.good(in, 1, 2)
		e.expectAccept(a)
		e.expectReject(e.good(in, 1, 3), true, judge.ReasonEquivocation)
		e.expectReject(e.good(in, 2, 4), true, judge.ReasonNotMember)
	})
}

const ed25519PublicKeySize = 32

// restartJudge replaces the judge with a new one over the same engine and
// data directory, as a restarted hanzod has.
func (e *env) restartJudge() {
	e.t.Helper()
	j, err := judge.New(judge.Config{DataDir: e.jdir(), Key: judgeKey(), Store: e.arts, Threads: 2, ShardSize: 8, EvalSize: 8, Base: base(e.t), Now: e.clk.Now}, e.eng)
	if err != nil {
		e.t.Fatal(err)
	}
	e.j = j
}

// TestEvidenceJSON checks the evidence of a slash decodes as Evidence and
// names the files by digest (the fields a verifier outside reads).
func TestEvidenceJSON(t *testing.T) {
	e := newEnv(t, 3, tinySpec())
	a, b := e.good(0, 1, 1), e.good(0, 1, 2)
	e.expectAccept(a)
	e.expectReject(b, true, judge.ReasonEquivocation)
	sl := e.slashes(e.ids[0])
	var raw map[string]any
	if err := json.Unmarshal(sl[0].Evidence, &raw); err != nil {
		t.Fatal(err)
	}
	files, _ := raw["files"].([]any)
	if raw["offence"] != "equivocation" || len(files) != 2 {
		t.Fatalf("evidence %s", sl[0].Evidence)
	}
	var digests []string
	for _, f := range files {
		digests = append(digests, f.(map[string]any)["digest"].(string))
	}
	if digests[0] != digestOf(a) || digests[1] != digestOf(b) {
		t.Fatalf("evidence digests %v, want the held and the new file", digests)
	}
}
