package state

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/protocol/hardware"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
)

// registerHW registers node name with hardware report r (signed), and
// stakes it.
func (h *harness) registerHW(name string, r hardware.Report) {
	h.t.Helper()
	gpu, vram := r.Summary()
	c := Register{Address: "10.0.0.1:9560", Region: "eu", GPUModel: gpu, VRAMMiB: vram, Hardware: r}
	c.Auth = h.auth(name, nil)
	c.Sign(h.key(name), c.SignedBytes())
	if out := h.step(c); !strings.HasPrefix(out, "node_registered") {
		h.t.Fatalf("register %s: %s", name, out)
	}
	wantPrefix(h.t, h, "deposit "+name+" 10000", "minted")
	wantPrefix(h.t, h, "bond "+name+" 10000", "bonded")
}

func gpuReport(name string, mib uint64) hardware.Report {
	return hardware.Report{
		Accelerators: []hardware.Accelerator{{Name: name, TotalMiB: mib, FreeMiB: mib - 512, Compute: "8.9"}, {Name: hardware.CPU, TotalMiB: 65536, FreeMiB: 60000}},
		Backends:     []string{"torch"}, DTypes: []string{"bfloat16", "nf4"},
	}
}

func cpuReport(mib uint64) hardware.Report {
	return hardware.Report{
		Accelerators: []hardware.Accelerator{{Name: hardware.CPU, TotalMiB: mib, FreeMiB: mib - 1024}},
		Backends:     []string{"go"}, DTypes: []string{"float32"},
	}
}

// qwen06 is Qwen3-0.6B's shape.
var qwen06 = hardware.Shape{Params: 596_049_920, Hidden: 1024, Intermediate: 3072, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128, Vocab: 151_936}

func (h *harness) submitSpec(s jobspec.Spec, sh *hardware.Shape) string {
	h.t.Helper()
	out := h.step(SubmitJob{Spec: s, Shape: sh})
	if !strings.HasPrefix(out, "job_submitted") {
		h.t.Fatalf("submit: %s", out)
	}
	return out
}

func smallSpec(backend string) jobspec.Spec {
	s := jobspec.Spec{Model: "zoo/eco-1b", Dataset: "gsm8k", Epochs: 1, MinNodes: 3, Backend: backend, GSPO: jobspec.DefaultGSPO()}
	s.GSPO.MaxSeqLen, s.GSPO.GroupSize, s.PromptsPerStep = 512, 4, 4
	return s
}

// A torch job goes to the nodes whose GPUs run it, a go job to the nodes
// that run the go engine; a job that fits no node waits, and its pending
// reason gives the numbers: what it needs, what each node has, which node.
func TestScheduleByReportedHardware(t *testing.T) {
	h := newHarness(t)
	for _, n := range []string{"g1", "g2", "g3"} {
		h.registerHW(n, gpuReport("NVIDIA L4", 23034))
	}
	for _, n := range []string{"c1", "c2", "c3"} {
		h.registerHW(n, cpuReport(24576))
	}
	out := h.submitSpec(smallSpec("torch"), &qwen06)
	if !strings.Contains(out, `job_transitioned {"job":"job-00000001","from":"pending","to":"provisioning"`) || !members(out, "g1", "g2", "g3") {
		t.Fatalf("torch job: %s", out)
	}
	j, _ := h.m.Job("job-00000001")
	if j.Shape == nil || *j.Shape != qwen06 {
		t.Fatalf("the job's shape: %+v", j.Shape)
	}
	out = h.submitSpec(smallSpec(""), &qwen06)
	if !members(out, "c1", "c2", "c3") {
		t.Fatalf("go job: %s", out)
	}
	// The seed's defaults (8192 tokens, 16 prompts × 8) on Qwen3-0.6B in
	// bfloat16 need far more than an L4.
	big := smallSpec("torch")
	big.GSPO = jobspec.DefaultGSPO()
	big.GSPO.Use4Bit = false
	h.registerHW("g4", gpuReport("NVIDIA L4", 23034))
	out = h.submitSpec(big, &qwen06)
	if strings.Contains(out, "provisioning") {
		t.Fatalf("a job that fits no node started: %s", out)
	}
	s := big
	if err := s.Normalise(); err != nil {
		t.Fatal(err)
	}
	m, err := hardware.Estimate(s, qwen06, hardware.Target{Backend: "torch", DType: "bfloat16"})
	if err != nil {
		t.Fatal(err)
	}
	j, _ = h.m.Job("job-00000003")
	why := h.names2(h.m.PendingReason(&j, h.now))
	for _, want := range []string{"needs 3 eligible idle nodes: 0 of 7 registered are eligible",
		"memory: torch bfloat16 needs " + itoa(m.TotalMiB()) + " MiB", "NVIDIA L4 has 22522 MiB free", "3 ineligible: backend torch: the node runs go (node " + h.id("c1")[:12]} {
		if !strings.Contains(why, want) {
			t.Errorf("pending reason lacks %q:\n%s", want, why)
		}
	}
	// The per-node view says the same, node by node.
	for _, f := range h.m.Eligibility(&j, h.now) {
		name := h.names[f.Node]
		switch {
		case strings.HasPrefix(name, "g") && (f.Fit.Need == nil || f.Fit.Device.Name != "NVIDIA L4" || !strings.Contains(f.Why, "MiB free")):
			t.Errorf("%s: %+v", name, f)
		case strings.HasPrefix(name, "c") && !strings.Contains(f.Why, "backend torch"):
			t.Errorf("%s: %+v", name, f)
		}
	}
	h.checkReplay()
}

// A node that registered before reports (gpu model and VRAM only) is
// judged by them as before: a job's min_vram_mib against its VRAM.
func TestLegacyNodeByVRAM(t *testing.T) {
	h := newHarness(t)
	for _, n := range []string{"a", "b", "c"} {
		wantPrefix(t, h, "register "+n+" vram=8192", "node_registered")
		wantPrefix(t, h, "deposit "+n+" 10000", "minted")
		wantPrefix(t, h, "bond "+n+" 10000", "bonded")
	}
	if out := h.run("submit vram=16384"); strings.Contains(out, "provisioning") {
		t.Fatalf("8 GiB nodes took a 16 GiB job: %s", out)
	}
	j, _ := h.m.Job("job-00000001")
	if why := h.m.PendingReason(&j, h.now); !strings.Contains(why, "3 ineligible: min_vram_mib 16384: RTX 4090 has 8192 MiB") || !strings.Contains(why, "no memory estimate") {
		t.Fatalf("pending reason: %s", why)
	}
	if out := h.run("submit vram=8192"); !strings.Contains(out, "provisioning") {
		t.Fatalf("8 GiB job: %s", out)
	}
}

// An invalid report or shape is refused before anything is logged.
func TestHardwareBoundsRefused(t *testing.T) {
	h := newHarness(t)
	r := cpuReport(24576)
	r.Accelerators[0].FreeMiB = 1 << 20
	c := Register{Address: "10.0.0.1:9560", GPUModel: "cpu", VRAMMiB: 24576, Hardware: r}
	c.Auth = h.auth("a", nil)
	c.Sign(h.key("a"), c.SignedBytes())
	if out := h.step(c); !strings.Contains(out, "invalid") || !strings.Contains(out, "free memory") {
		t.Fatalf("free above total: %s", out)
	}
	if out := h.step(SubmitJob{Spec: smallSpec(""), Shape: &hardware.Shape{Params: 1}}); !strings.Contains(out, "invalid model shape") {
		t.Fatalf("bad shape: %s", out)
	}
}

// Every job file in examples/ parses and starts on nodes that meet it:
// examples/job.yaml (16 GiB, the go engine) on nodes reporting 24 GiB, the
// built-in ones with the built-in base's shape known, so their memory
// estimate is checked too. A node short of it keeps the job pending with
// the numbers.
func TestExamplesSchedulable(t *testing.T) {
	cfg, err := fs.ReadFile(basemodel.BuiltinFS(), "config.json")
	if err != nil {
		t.Fatal(err)
	}
	builtin, err := jobconf.ShapeFromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := jobspec.ParseFile(path, data, time.UnixMilli(epoch0), nil)
			if err != nil {
				t.Fatal(err)
			}
			s := f.Spec()
			var sh *hardware.Shape
			if s.Model == jobspec.BuiltinModel {
				sh = &builtin
			}
			report := cpuReport(24576)
			if s.TrainingBackend() == "torch" {
				report = gpuReport("NVIDIA RTX 4090", 24564)
			}
			h := newHarness(t)
			small := cpuReport(8192)
			small.Accelerators[0].FreeMiB = 1
			h.registerHW("short", small)
			for i := range s.MaxNodes {
				h.registerHW("n"+itoa(uint64(i)), report)
			}
			out := h.submitSpec(s, sh)
			if !strings.Contains(out, `"to":"provisioning"`) || strings.Contains(out, `"short"`) {
				t.Fatalf("%s did not start on nodes that meet it:\n%s", path, out)
			}
			var sub JobSubmitted
			line := strings.SplitN(out, "\n", 2)[0]
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "job_submitted ")), &sub); err != nil || (sh != nil) != (sub.Shape != nil) {
				t.Fatalf("submitted %s (%v)", line, err)
			}
			// The node short of memory says why, with its numbers.
			j, _ := h.m.Job(sub.Job)
			for _, nf := range h.m.Eligibility(&j, h.now) {
				if h.names[nf.Node] == "short" && (nf.Why == "" || !strings.Contains(nf.Why, "cpu has")) {
					t.Errorf("the short node: %+v", nf)
				}
			}
			h.checkReplay()
		})
	}
}

func itoa(v uint64) string { return strings.TrimSpace(jsonNumber(v)) }

func jsonNumber(v uint64) string { b, _ := json.Marshal(v); return string(b) }

// members reports whether out's provisioning names exactly the nodes
// want, in any order.
func members(out string, want ...string) bool {
	_, rest, ok := strings.Cut(out, `"members":[`)
	if !ok {
		return false
	}
	list, _, _ := strings.Cut(rest, "]")
	got := strings.Split(strings.ReplaceAll(list, `"`, ""), ",")
	slices.Sort(got)
	return slices.Equal(got, want)
}
