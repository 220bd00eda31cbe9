package modelprobe

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zooai/gym/internal/pyenv"
	"github.com/zooai/gym/model/basemodel"
)

func builtinDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "base")
	if err := basemodel.Export(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRun: the built-in base's top K for a prompt, in order, with
// probabilities that are a softmax's; bad input is refused.
func TestRun(t *testing.T) {
	dir := builtinDir(t)
	r, err := Run(Options{Model: dir, Prompt: "12+34=", TopK: 15, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r.Architecture != "LlamaForCausalLM" || len(r.IDs) != 6 || len(r.Top) != 15 || r.SparseLayers != 0 {
		t.Fatalf("%+v", r)
	}
	var sum float64
	for i, tk := range r.Top {
		if i > 0 && tk.Logit > r.Top[i-1].Logit {
			t.Fatalf("top not sorted: %+v", r.Top)
		}
		sum += tk.Prob
	}
	if sum < 0.999 || sum > 1.001 {
		t.Fatalf("probabilities of the whole vocabulary sum to %v", sum)
	}
	for _, o := range []Options{
		{Model: dir, Prompt: "", TopK: 3},
		{Model: dir, Prompt: "1", TopK: 0},
		{Model: dir, Prompt: "abc", TopK: 3}, // no character of the vocabulary: no tokens
	} {
		if _, err := Run(o); !errors.Is(err, ErrInput) {
			t.Errorf("%+v: %v, want ErrInput", o, err)
		}
	}
	if _, err := Run(Options{Model: t.TempDir(), Prompt: "1", TopK: 1}); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("empty directory: %v", err)
	}
}

// TestCompareTransformers: on the built-in base and on random Qwen3-MoE,
// Qwen2-MoE and Mixtral models with a PEFT adapter on their attention and
// experts, the engine's logits are transformers' (PeftModel's) within
// 1e-4 at every position, and a perturbed logit shows as the difference.
func TestCompareTransformers(t *testing.T) {
	py := pyenv.Require(t, "torch", "transformers", "peft", "numpy")
	type tc struct{ name, model, adapter string }
	cases := []tc{{"builtin", builtinDir(t), ""}}
	tok := cases[0].model
	script, _ := filepath.Abs(filepath.Join("testdata", "make_moe.py"))
	archs := []string{"qwen3_moe", "qwen2_moe", "mixtral"}
	d := t.TempDir()
	cmd := exec.Command(py, append([]string{script, d}, archs...)...)
	cmd.Dir = d
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, arch := range archs {
		model, adapter := filepath.Join(d, arch, "model"), filepath.Join(d, arch, "adapter")
		for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
			b, err := os.ReadFile(filepath.Join(tok, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(model, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cases = append(cases, tc{arch, model, adapter})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := Run(Options{Model: c.model, Adapter: c.adapter, Prompt: "3+45=9:", TopK: 5, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			if c.adapter != "" && (r.SparseLayers != 2 || len(r.Routes) != 2 || len(r.Targets) != 4) {
				t.Fatalf("MoE report: %+v", r)
			}
			if err := Compare(context.Background(), py, r); err != nil {
				t.Fatal(err)
			}
			cmp := r.Compare
			var b strings.Builder
			r.WriteText(&b)
			t.Log(b.String())
			if cmp.MaxAbsDiff > 1e-4 || !cmp.TopSame || cmp.Positions != len(r.IDs) || cmp.MaxAbsLogit == 0 {
				t.Fatalf("%+v", cmp)
			}
			if c.adapter != "" && cmp.PEFT == "" {
				t.Fatal("the adapter was not loaded with PEFT")
			}
		})
	}
}

// TestCompareLogits: the comparison finds the largest difference where it
// is, and a changed top K.
func TestCompareLogits(t *testing.T) {
	r, err := Run(Options{Model: builtinDir(t), Prompt: "12+34=", TopK: 3, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	theirs := append([]float32(nil), r.logits...)
	var c Comparison
	if err := r.compareLogits(&c, theirs); err != nil || c.MaxAbsDiff != 0 || !c.TopSame {
		t.Fatalf("%+v %v", c, err)
	}
	last := (len(r.IDs) - 1) * r.vocab
	theirs[last+r.Top[2].ID] += 100 // third becomes first
	theirs[3] -= 0.25
	c = Comparison{}
	if err := r.compareLogits(&c, theirs); err != nil {
		t.Fatal(err)
	}
	if math.Abs(c.MaxAbsDiff-100) > 1e-3 || c.WorstPos != len(r.IDs)-1 || c.WorstID != r.Top[2].ID || c.TopSame || c.TheirTop[0] != r.Top[2].ID {
		t.Fatalf("%+v", c)
	}
	if err := r.compareLogits(&c, theirs[1:]); err == nil {
		t.Fatal("a short logits array was accepted")
	}
}
