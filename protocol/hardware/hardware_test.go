package hardware_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/zooai/gym/protocol/hardware"
	"github.com/zooai/gym/protocol/jobspec"
)

// qwen06 is Qwen3-0.6B's shape (config.json; 596 M parameters with the
// tied embedding counted once).
var qwen06 = hardware.Shape{Params: 596_049_920, Hidden: 1024, Intermediate: 3072, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128, Vocab: 151_936}

func spec(t *testing.T, edit func(*jobspec.Spec)) jobspec.Spec {
	t.Helper()
	s := jobspec.Spec{Model: "builtin", Dataset: "addition", Epochs: 1, MinNodes: 3, GSPO: jobspec.DefaultGSPO()}
	if edit != nil {
		edit(&s)
	}
	if err := s.Normalise(); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestValidate(t *testing.T) {
	ok := hardware.Report{
		Accelerators: []hardware.Accelerator{{Name: "NVIDIA L4", TotalMiB: 23034, FreeMiB: 22000, Compute: "8.9"}, {Name: hardware.CPU, TotalMiB: 64000, FreeMiB: 60000}},
		Backends:     []string{"torch"}, DTypes: []string{"bfloat16", "nf4"},
	}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (hardware.Report{}).Validate(); err != nil {
		t.Fatalf("empty: %v", err)
	}
	for name, edit := range map[string]func(*hardware.Report){
		"no name":         func(r *hardware.Report) { r.Accelerators[0].Name = "" },
		"control":         func(r *hardware.Report) { r.Accelerators[0].Name = "L4\n" },
		"long name":       func(r *hardware.Report) { r.Accelerators[0].Name = strings.Repeat("x", 129) },
		"no memory":       func(r *hardware.Report) { r.Accelerators[0].TotalMiB = 0 },
		"too much":        func(r *hardware.Report) { r.Accelerators[0].TotalMiB = 1<<24 + 1 },
		"free over total": func(r *hardware.Report) { r.Accelerators[0].FreeMiB = 23035 },
		"compute":         func(r *hardware.Report) { r.Accelerators[0].Compute = "sm_89" },
		"compute padded":  func(r *hardware.Report) { r.Accelerators[0].Compute = "08.9" },
		"cpu compute":     func(r *hardware.Report) { r.Accelerators[1].Compute = "1.0" },
		"backend":         func(r *hardware.Report) { r.Backends = []string{"jax"} },
		"backend twice":   func(r *hardware.Report) { r.Backends = []string{"torch", "torch"} },
		"dtype":           func(r *hardware.Report) { r.DTypes = []string{"int8"} },
		"many":            func(r *hardware.Report) { r.Accelerators = make([]hardware.Accelerator, 65) },
	} {
		r := ok
		r.Accelerators = append([]hardware.Accelerator(nil), ok.Accelerators...)
		edit(&r)
		if err := r.Validate(); !errors.Is(err, hardware.ErrReport) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The go estimate is the float32 engine's (weights 4 bytes a parameter);
// torch float32 counts the same; bfloat16 halves the weights and the
// per-layer activations but not the float32 logits; 4-bit stores the
// projections in 4.5 bits.
func TestEstimateTargets(t *testing.T) {
	s := spec(t, func(s *jobspec.Spec) { s.GSPO.MaxSeqLen = 1024 })
	est := func(tg hardware.Target) hardware.Memory {
		m, err := hardware.Estimate(s, qwen06, tg)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s", tg, m)
		return m
	}
	g := est(hardware.GoTarget)
	f32 := est(hardware.Target{Backend: "torch", DType: "float32"})
	bf := est(hardware.Target{Backend: "torch", DType: "bfloat16"})
	q4 := est(hardware.Target{Backend: "torch", DType: "bfloat16", Use4Bit: true})
	if g.Weights != 4*qwen06.Params || g.Total != g.Weights+g.Adapter+g.Activations {
		t.Fatalf("go: %+v", g)
	}
	if f32.Total != g.Total {
		t.Fatalf("torch float32 %d, go %d", f32.Total, g.Total)
	}
	if bf.Weights != 2*qwen06.Params || bf.Adapter != g.Adapter || bf.Activations >= g.Activations || 2*bf.Activations <= g.Activations {
		t.Fatalf("bfloat16 %+v against %+v", bf, g)
	}
	// Projections of Qwen3-0.6B: 28 × (1024·2048 + 2·1024·1024 + 2048·1024 + 3·1024·3072).
	lin := int64(28 * (1024*2048 + 2*1024*1024 + 2048*1024 + 3*1024*3072))
	if want := lin*9/16 + 2*(qwen06.Params-lin); q4.Weights != want || q4.Activations != bf.Activations {
		t.Fatalf("4-bit weights %d, want %d", q4.Weights, want)
	}
	// The go engine ignores use_4bit.
	if m, _ := hardware.Estimate(s, qwen06, hardware.Target{Backend: "go", DType: "float32", Use4Bit: true}); m.Total != g.Total {
		t.Fatalf("go with use_4bit: %d, want %d", m.Total, g.Total)
	}
	for _, tg := range []hardware.Target{{Backend: "go", DType: "bfloat16"}, {Backend: "jax", DType: "float32"}, {Backend: "torch", DType: "int8"}} {
		if _, err := hardware.Estimate(s, qwen06, tg); !errors.Is(err, hardware.ErrTarget) {
			t.Errorf("%s: %v", tg, err)
		}
	}
	if _, err := hardware.Estimate(s, hardware.Shape{Params: 1}, hardware.GoTarget); !errors.Is(err, hardware.ErrShape) {
		t.Errorf("zero shape: %v", err)
	}
}

func gpuNode(name string, total, free uint64, dtypes ...string) hardware.Report {
	return hardware.Report{
		Accelerators: []hardware.Accelerator{{Name: name, TotalMiB: total, FreeMiB: free, Compute: "8.9"}, {Name: hardware.CPU, TotalMiB: 32768, FreeMiB: 30000}},
		Backends:     []string{"torch"}, DTypes: dtypes,
	}
}

var cpuNode = hardware.Report{
	Accelerators: []hardware.Accelerator{{Name: hardware.CPU, TotalMiB: 24576, FreeMiB: 20000}},
	Backends:     []string{"go"}, DTypes: []string{"float32"},
}

// Check explains each refusal with the numbers and picks the device the
// backend trains on.
func TestCheck(t *testing.T) {
	small := func(s *jobspec.Spec) { s.GSPO.MaxSeqLen, s.GSPO.GroupSize, s.PromptsPerStep = 512, 4, 4 }
	torch4 := spec(t, func(s *jobspec.Spec) { small(s); s.Backend = "torch" })
	torch := spec(t, func(s *jobspec.Spec) { s.Backend, s.GSPO.MaxSeqLen, s.GSPO.Use4Bit = "torch", 1024, false })
	goJob := spec(t, func(s *jobspec.Spec) { s.GSPO.MaxSeqLen, s.MinVRAMMiB = 1024, 16384 })
	need := func(s jobspec.Spec, tg hardware.Target) uint64 {
		m, err := hardware.Estimate(s, qwen06, tg)
		if err != nil {
			t.Fatal(err)
		}
		return m.TotalMiB()
	}
	bf4 := hardware.Target{Backend: "torch", DType: "bfloat16", Use4Bit: true}
	n4 := need(torch4, bf4)
	for _, c := range []struct {
		name string
		r    hardware.Report
		s    jobspec.Spec
		sh   *hardware.Shape
		ok   bool
		want []string // in the reason, or in the fit's description
	}{
		{"4-bit fits", gpuNode("NVIDIA L4", 23034, 22000, "bfloat16", "nf4"), torch4, &qwen06, true, []string{"torch bfloat16 4-bit on NVIDIA L4", "of 22000 MiB"}},
		{"no nf4", gpuNode("NVIDIA L4", 23034, 22000, "bfloat16"), torch4, &qwen06, false, []string{"use_4bit", "bfloat16"}},
		{"too small", gpuNode("T4", 4096, uint64(n4)-1, "bfloat16", "nf4"), torch4, &qwen06, false,
			[]string{"memory", "torch bfloat16 4-bit", "T4", "MiB free", itoa(n4), itoa(n4 - 1)}},
		{"go node, torch job", cpuNode, torch, &qwen06, false, []string{"backend torch", "runs go"}},
		{"go on 24 GiB host", cpuNode, goJob, nil, true, []string{"go float32 on cpu", "no memory estimate"}},
		{"go, min_vram above host", hardware.Report{Accelerators: []hardware.Accelerator{{Name: "cpu", TotalMiB: 8192}}, Backends: []string{"go"}}, goJob, nil, false,
			[]string{"min_vram_mib 16384", "cpu has 8192 MiB"}},
		{"go trains on the host, not the GPU", hardware.Report{Accelerators: []hardware.Accelerator{{Name: "H100", TotalMiB: 81559}, {Name: "cpu", TotalMiB: 8192}}}, goJob, nil, false,
			[]string{"cpu has 8192 MiB"}},
		{"dtype", gpuNode("L4", 23034, 22000, "float32"), spec(t, func(s *jobspec.Spec) { s.Backend, s.DType, s.GSPO.Use4Bit = "torch", "bfloat16", false }), nil, false,
			[]string{"dtype bfloat16", "trains in float32"}},
		{"legacy node", hardware.Legacy("A100", 40960), goJob, nil, true, nil},
		{"legacy node below", hardware.Legacy("cpu", 1), goJob, nil, false, []string{"min_vram_mib 16384: cpu has 1 MiB"}},
		{"any picks the node's backend", gpuNode("L4", 23034, 22000, "bfloat16", "nf4"), spec(t, func(s *jobspec.Spec) { small(s); s.Backend = "any" }), &qwen06, true,
			[]string{"torch bfloat16 4-bit"}},
	} {
		f := hardware.Check(c.r, c.s, c.sh)
		if f.OK() != c.ok {
			t.Errorf("%s: ok %v, want %v (%s)", c.name, f.OK(), c.ok, f)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(f.String(), w) {
				t.Errorf("%s: %q lacks %q", c.name, f, w)
			}
		}
	}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }
