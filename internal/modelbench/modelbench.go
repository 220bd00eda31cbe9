// Package modelbench measures the Go engine (package llama) against PyTorch
// on this machine: prefill tokens/s, KV-cached decode tokens/s for a group
// of sequences, one LoRA training step (forward + backward into the
// adapter) tokens/s, and the peak resident memory of each. It backs `gym
// bench model`; docs/models.md records its figures.
//
// Both engines run in child processes, one after the other, with the same
// number of threads, on the same checkpoint directory (written once by
// Run for the generated models), so each child's peak RSS (VmHWM) is its
// own. The PyTorch side is bench_torch.py, embedded in the binary.
package modelbench

import (
	"bytes"
	"context"
	_ "embed" // for //go:embed
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zooai/gym/internal/deltabench"
	"github.com/zooai/gym/internal/pyenv"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/prng"
)

// TorchScript is bench_torch.py, the PyTorch side of the benchmark:
//
//	bench_torch.py --dir MODEL --threads N --seq L --iters I [--group 8 --prompt 16 --steps 32 --rank 8 --alpha 16 --targets q_proj,v_proj]
//
// It prints one JSON object with the fields of Figures.
//
//go:embed bench_torch.py
var TorchScript string

// Decode shape: a group of Group sequences, Prompt tokens each prefilled
// (not timed), then Steps single-token steps (timed). LoRA of the training
// step: rank Rank, alpha Alpha on q_proj and v_proj (PEFT's default
// targets for Llama).
const (
	Group  = 8
	Prompt = 16
	Steps  = 32
	Rank   = 8
	Alpha  = 16
)

// Targets are the modules the training step's adapter adapts.
var Targets = []llama.Module{llama.QProj, llama.VProj}

// Config says what to measure.
type Config struct {
	ModelDir string // a Hugging Face directory; empty: the generated models
	Baseline string // "torch", or "" for the Go engine alone
	Threads  int    // goroutines of the Go engine and torch's intra-op threads
	Seq      int    // tokens of the prefill and of the training sequence
	Iters    int    // timed repetitions of each figure; the best counts
	Python   string // interpreter for the torch side; empty: pyenv.Find
	Dir      string // scratch directory; empty: the system's temporary directory
	// GoCmd is run as GoCmd... --dir MODEL --threads N --seq L --iters I in
	// a child process that calls MeasureGo and prints its Figures as JSON
	// (gym passes itself with its hidden subcommand).
	GoCmd    []string
	Progress io.Writer // human progress lines; nil for none
}

// DefaultConfig is what `gym bench model` measures without flags.
func DefaultConfig() Config {
	return Config{Baseline: "torch", Threads: runtime.NumCPU(), Seq: 128, Iters: 3}
}

// Validate checks the configuration before anything is measured.
func (c Config) Validate() error {
	switch {
	case c.Baseline != "" && c.Baseline != "torch":
		return fmt.Errorf("modelbench: baseline %q: only torch is supported", c.Baseline)
	case c.Threads < 1 || c.Threads > 1024:
		return fmt.Errorf("modelbench: threads %d outside [1, 1024]", c.Threads)
	case c.Seq < 2 || c.Seq > 8192:
		return fmt.Errorf("modelbench: seq %d outside [2, 8192]", c.Seq)
	case c.Iters < 1 || c.Iters > 100:
		return fmt.Errorf("modelbench: iters %d outside [1, 100]", c.Iters)
	case len(c.GoCmd) == 0:
		return errors.New("modelbench: no command for the Go side")
	}
	return nil
}

// Figures are one engine's measurements on one model.
type Figures struct {
	PrefillTPS float64 `json:"prefill_tokens_per_s"`
	DecodeTPS  float64 `json:"decode_tokens_per_s"`
	TrainTPS   float64 `json:"train_tokens_per_s"`
	// Tokens per second of CPU time (all threads): less sensitive than
	// wall-clock to other jobs on a shared machine.
	PrefillCPU   float64 `json:"prefill_tokens_per_cpu_s"`
	DecodeCPU    float64 `json:"decode_tokens_per_cpu_s"`
	TrainCPU     float64 `json:"train_tokens_per_cpu_s"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	Threads      int     `json:"threads"`
	TorchVersion string  `json:"torch,omitempty"` // the torch side's version
}

// ModelResult is both engines' figures on one model.
type ModelResult struct {
	Name   string   `json:"name"`
	Params int64    `json:"params"`
	Go     Figures  `json:"go"`
	Torch  *Figures `json:"torch,omitempty"`
	// TorchSkipped says why there are no torch figures.
	TorchSkipped string `json:"torch_skipped,omitempty"`
}

// Result is a whole run.
type Result struct {
	CPUs    int           `json:"cpus"`
	Threads int           `json:"threads"`
	Seq     int           `json:"seq"`
	Models  []ModelResult `json:"models"`
}

// SmolShape is a model shaped like SmolLM2-135M.
func SmolShape() llama.Config {
	return llama.Config{Arch: llama.Llama, Vocab: 49152, Hidden: 576, Intermediate: 1536, Layers: 30, Heads: 9, KVHeads: 3,
		HeadDim: 64, MaxPositions: 8192, NormEps: 1e-5, RopeTheta: 100000, Tied: true, BOS: -1, PAD: -1}
}

// TinyShape is a tiny Llama of the built-in base's size: hidden 64, 2
// layers, 4 heads, MLP 256, vocabulary 16.
func TinyShape() llama.Config {
	return llama.Config{Arch: llama.Llama, Vocab: 16, Hidden: 64, Intermediate: 256, Layers: 2, Heads: 4, KVHeads: 4,
		HeadDim: 16, MaxPositions: 1024, NormEps: 1e-5, RopeTheta: 10000, Tied: true, BOS: -1, PAD: -1}
}

// RandomWeights returns weights of shape c drawn from seed: matrices with
// standard deviation 1/sqrt(fan-in) (embeddings 1), norms near 1.
func RandomWeights(c llama.Config, seed uint64) (*llama.Weights, error) {
	w, err := llama.NewWeights(c)
	if err != nil {
		return nil, err
	}
	r := prng.New(seed, 0x62656e6368)
	fill := func(d []float32, mean, std float64) {
		for i := range d {
			d[i] = float32(mean + std*r.Norm())
		}
	}
	fill(w.Embed.F32, 0, 1)
	for l := range w.Layers {
		L := &w.Layers[l]
		fill(L.InputNorm, 1, 0.1)
		fill(L.PostNorm, 1, 0.1)
		fill(L.QNorm, 1, 0.1)
		fill(L.KNorm, 1, 0.1)
		for m := range llama.NumModules {
			in, _ := c.Dims(m)
			fill(L.W[m].F32, 0, 1/math.Sqrt(float64(in)))
			fill(L.Bias[m], 0, 0.1)
		}
	}
	fill(w.Norm, 1, 0.1)
	if !c.Tied {
		fill(w.Head.F32, 0, 1/math.Sqrt(float64(c.Hidden)))
	}
	return w, nil
}

// benchTokens are the token ids both sides feed (bench_torch.py's tokens).
func benchTokens(n, vocab, salt int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = (i*7919 + salt*104729 + 13) % vocab
	}
	return ids
}

// span is the wall-clock and CPU time (user + system, all threads) of a
// piece of work.
type span struct{ wall, cpu time.Duration }

// cpuTime is the CPU time this process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// start returns a function that returns the span since start was called.
func start() func() span {
	w, c := time.Now(), cpuTime()
	return func() span { return span{time.Since(w), cpuTime() - c} }
}

// best runs fn once to warm up, then iters times, and returns the shortest
// wall-clock and the smallest CPU time fn reports (each the best of its
// own).
func best(iters int, fn func() (span, error)) (span, error) {
	if _, err := fn(); err != nil {
		return span{}, err
	}
	var b span
	for i := range iters {
		d, err := fn()
		if err != nil {
			return span{}, err
		}
		if i == 0 || d.wall < b.wall {
			b.wall = d.wall
		}
		if i == 0 || d.cpu < b.cpu {
			b.cpu = d.cpu
		}
	}
	return b, nil
}

func timed(fn func() error) func() (span, error) {
	return func() (span, error) {
		stop := start()
		err := fn()
		return stop(), err
	}
}

// MeasureGo measures the Go engine on the checkpoint in dir with threads
// goroutines: prefill of seq tokens, decode of a group, a LoRA training
// step on seq tokens. PeakRSSBytes is this process's VmHWM afterwards.
func MeasureGo(dir string, threads, seq, iters int) (Figures, error) {
	w, err := llama.Load(dir)
	if err != nil {
		return Figures{}, err
	}
	c := w.Cfg
	if seq > c.MaxPositions || Prompt+Steps > c.MaxPositions {
		return Figures{}, fmt.Errorf("modelbench: seq %d beyond the model's context of %d", seq, c.MaxPositions)
	}
	md, err := llama.New(w, nil, threads)
	if err != nil {
		return Figures{}, err
	}
	f := Figures{Threads: threads}

	ids := benchTokens(seq, c.Vocab, 0)
	d, err := best(iters, timed(func() error {
		ch, err := md.NewCache(1, seq)
		if err != nil {
			return err
		}
		_, err = md.PrefillLast(ch, ids, seq)
		return err
	}))
	if err != nil {
		return f, err
	}
	f.PrefillTPS, f.PrefillCPU = perSecond(seq, d)

	prompt, step := benchTokens(Group*Prompt, c.Vocab, 1), benchTokens(Group, c.Vocab, 2)
	d, err = best(iters, func() (span, error) {
		ch, err := md.NewCache(Group, Prompt+Steps)
		if err != nil {
			return span{}, err
		}
		if _, err := md.PrefillLast(ch, prompt, Prompt); err != nil {
			return span{}, err
		}
		stop := start()
		for range Steps {
			if _, err := md.Step(ch, step); err != nil {
				return span{}, err
			}
		}
		return stop(), nil
	})
	if err != nil {
		return f, err
	}
	f.DecodeTPS, f.DecodeCPU = perSecond(Group*Steps, d)

	a, err := benchAdapter(c)
	if err != nil {
		return f, err
	}
	mdA, err := llama.New(w, a, threads)
	if err != nil {
		return f, err
	}
	g := a.Zeroed()
	tids := benchTokens(seq, c.Vocab, 3)
	targets := append(append([]int(nil), tids[1:]...), tids[0])
	dLogP := make([]float32, seq)
	for i := range dLogP {
		dLogP[i] = -1 / float32(seq)
	}
	d, err = best(iters, timed(func() error {
		act, err := mdA.Forward(tids, 1, seq)
		if err != nil {
			return err
		}
		if _, err := llama.TokenLogProbs(threads, act.Logits, c.Vocab, targets); err != nil {
			return err
		}
		dl, err := llama.TokenLogProbsBackward(threads, act.Logits, c.Vocab, targets, dLogP)
		if err != nil {
			return err
		}
		return mdA.Backward(act, dl, g)
	}))
	if err != nil {
		return f, err
	}
	f.TrainTPS, f.TrainCPU = perSecond(seq, d)
	f.PeakRSSBytes, err = deltabench.PeakRSS()
	return f, err
}

// perSecond is tokens per second of wall-clock and per second of CPU time.
func perSecond(tokens int, d span) (wall, cpu float64) {
	return float64(tokens) / d.wall.Seconds(), float64(tokens) / d.cpu.Seconds()
}

// model is one checkpoint to measure.
type model struct {
	name, dir string
	params    int64
}

// Run writes the generated models (or takes cfg.ModelDir) and measures
// each with the Go engine and, with Baseline "torch", with PyTorch.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	var py string
	var pyErr error
	if cfg.Baseline == "torch" {
		py = cfg.Python
		if py == "" {
			py, pyErr = pyenv.Find()
		}
	}
	scratch, err := os.MkdirTemp(cfg.Dir, "gym-bench-model-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)

	var models []model
	if cfg.ModelDir != "" {
		b, err := os.ReadFile(filepath.Join(cfg.ModelDir, llama.ConfigFile))
		if err != nil {
			return nil, err
		}
		c, err := llama.ParseConfig(b)
		if err != nil {
			return nil, err
		}
		models = append(models, model{filepath.Base(cfg.ModelDir), cfg.ModelDir, c.NumParams()})
	} else {
		for _, s := range []struct {
			name string
			c    llama.Config
		}{{"smollm2-135m-shape", SmolShape()}, {"tiny-llama (built-in size)", TinyShape()}} {
			fmt.Fprintf(progress, "writing a random %s model\n", s.name)
			w, err := RandomWeights(s.c, 1)
			if err != nil {
				return nil, err
			}
			dir := filepath.Join(scratch, strconv.Itoa(len(models)))
			if err := llama.Save(dir, w); err != nil {
				return nil, err
			}
			models = append(models, model{s.name, dir, s.c.NumParams()})
		}
		runtime.GC()
	}

	res := &Result{CPUs: runtime.NumCPU(), Threads: cfg.Threads, Seq: cfg.Seq}
	args := func(dir string) []string {
		return []string{"--dir", dir, "--threads", strconv.Itoa(cfg.Threads), "--seq", strconv.Itoa(cfg.Seq), "--iters", strconv.Itoa(cfg.Iters)}
	}
	script := filepath.Join(scratch, "bench_torch.py")
	if err := os.WriteFile(script, []byte(TorchScript), 0o644); err != nil {
		return nil, err
	}
	for _, m := range models {
		mr := ModelResult{Name: m.name, Params: m.params}
		fmt.Fprintf(progress, "%s: Go engine\n", m.name)
		if err := runJSON(ctx, append(append([]string(nil), cfg.GoCmd...), args(m.dir)...), &mr.Go); err != nil {
			return nil, fmt.Errorf("modelbench: Go side on %s: %w", m.name, err)
		}
		switch {
		case cfg.Baseline == "":
			mr.TorchSkipped = "no baseline asked for"
		case pyErr != nil:
			mr.TorchSkipped = pyErr.Error()
		default:
			fmt.Fprintf(progress, "%s: PyTorch\n", m.name)
			var tf Figures
			if err := runJSON(ctx, append([]string{py, script}, args(m.dir)...), &tf, torchEnv...); err != nil {
				return nil, fmt.Errorf("modelbench: torch side on %s: %w", m.name, err)
			}
			mr.Torch = &tf
		}
		res.Models = append(res.Models, mr)
	}
	return res, nil
}

// torchEnv is added to the torch side's environment unless already set:
// OpenMP threads that sleep rather than spin while waiting, so that torch
// does not collapse when the machine is shared (a spinning thread holds a
// core another thread of the same operation needs); on an idle machine it
// changes little.
var torchEnv = []string{"OMP_WAIT_POLICY=PASSIVE"}

// runJSON runs argv (with env added to the environment where not already
// set) and decodes its standard output, one JSON object, into v.
func runJSON(ctx context.Context, argv []string, v any, env ...string) error {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = os.Environ()
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); os.Getenv(k) == "" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 2000 {
			msg = "…" + msg[len(msg)-2000:]
		}
		return fmt.Errorf("%s: %w\n%s", filepath.Base(argv[0]), err, msg)
	}
	d := json.NewDecoder(&stdout)
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// ratio is a/b, or NaN when b is not positive.
func ratio(a, b float64) float64 {
	if b <= 0 {
		return math.NaN()
	}
	return a / b
}

// Print writes r as a table per model: figure, Go, torch, Go/torch.
func Print(w io.Writer, r *Result) {
	fmt.Fprintf(w, "%d CPUs; both engines on %d threads; prefill and training on %d tokens; decode: %d sequences × %d steps after a %d-token prompt; LoRA r=%d on q_proj,v_proj\n",
		r.CPUs, r.Threads, r.Seq, Group, Steps, Prompt, Rank)
	for _, m := range r.Models {
		fmt.Fprintf(w, "\n%s (%.1fM parameters)\n", m.Name, float64(m.Params)/1e6)
		fmt.Fprintf(w, "%-26s %12s %12s %9s\n", "figure", "Go", "torch", "Go/torch")
		row := func(name string, g, t float64, format func(float64) string) {
			ts, rs := "-", "-"
			if m.Torch != nil {
				ts, rs = format(t), fmt.Sprintf("%.2f", ratio(g, t))
			}
			fmt.Fprintf(w, "%-26s %12s %12s %9s\n", name, format(g), ts, rs)
		}
		tps := func(v float64) string { return fmt.Sprintf("%.1f", v) }
		mib := func(v float64) string { return fmt.Sprintf("%.0f MiB", v/(1<<20)) }
		var t Figures
		if m.Torch != nil {
			t = *m.Torch
		}
		row("prefill tokens/s", m.Go.PrefillTPS, t.PrefillTPS, tps)
		row("decode tokens/s", m.Go.DecodeTPS, t.DecodeTPS, tps)
		row("LoRA train step tokens/s", m.Go.TrainTPS, t.TrainTPS, tps)
		row("prefill tokens/CPU-s", m.Go.PrefillCPU, t.PrefillCPU, tps)
		row("decode tokens/CPU-s", m.Go.DecodeCPU, t.DecodeCPU, tps)
		row("LoRA train tokens/CPU-s", m.Go.TrainCPU, t.TrainCPU, tps)
		row("peak RSS", float64(m.Go.PeakRSSBytes), float64(t.PeakRSSBytes), mib)
		if m.TorchSkipped != "" {
			fmt.Fprintf(w, "torch: skipped (%s)\n", m.TorchSkipped)
		}
	}
}

// benchAdapter is the benchmarks' LoRA adapter of c: PEFT's
// initialisation shape, A random (seeded), B zero.
func benchAdapter(c llama.Config) (*llama.Adapter, error) {
	a, err := llama.NewAdapter(c, Rank, Alpha, Targets)
	if err != nil {
		return nil, err
	}
	r := prng.New(7, 0x6c6f7261)
	for _, t := range a.Tensors(c) {
		if strings.HasSuffix(t.Name, "lora_A.weight") {
			for i := range t.Data {
				t.Data[i] = float32(0.01 * r.Norm())
			}
		}
	}
	return a, nil
}
