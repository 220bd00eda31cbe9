package modelbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/zooai/gym/internal/deltabench"
	"github.com/zooai/gym/model/llama"
)

// The two ways MeasureLoad reads a base: ModeFloat32 widens every tensor
// to float32 at load (Checkpoint.ReadFloat32, the engine before weights
// kept their dtype), ModeKept keeps BF16/F16 matrices 16-bit and
// memory-mapped (Checkpoint.Read, what Load does).
const (
	ModeFloat32 = "float32"
	ModeKept    = "kept"
)

// LoadConfig says what RunLoad measures.
type LoadConfig struct {
	ModelDir string // a Hugging Face directory; empty: a generated BF16 Qwen3-shaped model
	Layers   int    // layers of the generated model (QwenShape)
	Threads  int
	Seq      int    // tokens of the training step
	Dir      string // scratch directory; empty: the system's temporary directory
	// GoCmd is run as GoCmd... --dir MODEL --mode MODE --threads N --seq L
	// in a child process that calls MeasureLoad and prints its LoadFigures
	// as JSON (gym passes itself with its hidden subcommand).
	GoCmd    []string
	Progress io.Writer
}

// DefaultLoadConfig is what `gym bench load` measures without flags: a
// Qwen3-0.6B-shaped model cut to 22 layers (0.50 B parameters, 1.0 GB in
// BF16).
func DefaultLoadConfig() LoadConfig {
	return LoadConfig{Layers: 22, Threads: runtime.NumCPU(), Seq: 64}
}

// Validate checks the configuration before anything is written.
func (c LoadConfig) Validate() error {
	switch {
	case c.ModelDir == "" && (c.Layers < 1 || c.Layers > 64):
		return fmt.Errorf("modelbench: layers %d outside [1, 64]", c.Layers)
	case c.Threads < 1 || c.Threads > 1024:
		return fmt.Errorf("modelbench: threads %d outside [1, 1024]", c.Threads)
	case c.Seq < 2 || c.Seq > 8192:
		return fmt.Errorf("modelbench: seq %d outside [2, 8192]", c.Seq)
	case len(c.GoCmd) == 0:
		return errors.New("modelbench: no command for the Go side")
	}
	return nil
}

// QwenShape is Qwen3-0.6B's shape (hidden 1024, 16 heads of 128, 8 KV
// heads, MLP 3072, vocabulary 151936, q/k norm, tied embeddings) with the
// given number of layers (28 in the real one).
func QwenShape(layers int) llama.Config {
	return llama.Config{Arch: llama.Qwen3, Vocab: 151936, Hidden: 1024, Intermediate: 3072, Layers: layers, Heads: 16, KVHeads: 8,
		HeadDim: 128, MaxPositions: 40960, NormEps: 1e-6, RopeTheta: 1000000, QKNorm: true, Tied: true, BOS: -1, PAD: -1}
}

// LoadFigures are one child's measurements.
type LoadFigures struct {
	Mode         string  `json:"mode"`
	WeightsBytes int64   `json:"weights_bytes"` // Weights.Bytes: the values as the engine holds them
	LoadSeconds  float64 `json:"load_s"`
	// LoadRSSBytes is the peak RSS (VmHWM) once loaded; PeakRSSBytes after
	// a LoRA training step too, the figure a Go-engine worker sees.
	LoadRSSBytes int64   `json:"load_peak_rss_bytes"`
	StepSeconds  float64 `json:"step_s"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	// RSS at the end, anonymous (the Go heap) and file-backed (mapped
	// weights: page cache, shared with every process mapping the file).
	RSSAnonBytes int64 `json:"rss_anon_bytes"`
	RSSFileBytes int64 `json:"rss_file_bytes"`
}

// LoadResult is a whole run: both modes on one model.
type LoadResult struct {
	Model     string      `json:"model"`
	Params    int64       `json:"params"`
	FileBytes int64       `json:"file_bytes"` // the safetensors files
	Threads   int         `json:"threads"`
	Seq       int         `json:"seq"`
	Float32   LoadFigures `json:"float32"`
	Kept      LoadFigures `json:"kept"`
}

// MeasureLoad reads the checkpoint in dir as mode says, then runs one LoRA
// training step on seq tokens (forward with the full logits, per-token
// log-probabilities, the backward pass into a rank-8 adapter on q_proj and
// v_proj) with threads goroutines, reporting this process's peak RSS
// after each.
func MeasureLoad(dir, mode string, threads, seq int) (LoadFigures, error) {
	f := LoadFigures{Mode: mode}
	ck, err := llama.Open(dir)
	if err != nil {
		return f, err
	}
	defer ck.Close()
	t0 := time.Now()
	var w *llama.Weights
	switch mode {
	case ModeFloat32:
		w, err = ck.ReadFloat32()
	case ModeKept:
		w, err = ck.Read()
	default:
		err = fmt.Errorf("modelbench: mode %q (want %s or %s)", mode, ModeFloat32, ModeKept)
	}
	if err != nil {
		return f, err
	}
	f.LoadSeconds = time.Since(t0).Seconds()
	f.WeightsBytes = w.Bytes()
	if f.LoadRSSBytes, err = deltabench.PeakRSS(); err != nil {
		return f, err
	}
	c := w.Cfg
	if seq > c.MaxPositions {
		return f, fmt.Errorf("modelbench: seq %d beyond the model's context of %d", seq, c.MaxPositions)
	}
	a, err := benchAdapter(c)
	if err != nil {
		return f, err
	}
	md, err := llama.New(w, a, threads)
	if err != nil {
		return f, err
	}
	ids := benchTokens(seq, c.Vocab, 3)
	targets := append(append([]int(nil), ids[1:]...), ids[0])
	dLogP := make([]float32, seq)
	for i := range dLogP {
		dLogP[i] = -1 / float32(seq)
	}
	t0 = time.Now()
	act, err := md.Forward(ids, 1, seq)
	if err != nil {
		return f, err
	}
	if _, err := llama.TokenLogProbs(threads, act.Logits, c.Vocab, targets); err != nil {
		return f, err
	}
	dl, err := llama.TokenLogProbsBackward(threads, act.Logits, c.Vocab, targets, dLogP)
	if err != nil {
		return f, err
	}
	if err := md.Backward(act, dl, a.Zeroed()); err != nil {
		return f, err
	}
	f.StepSeconds = time.Since(t0).Seconds()
	if f.PeakRSSBytes, err = deltabench.PeakRSS(); err != nil {
		return f, err
	}
	f.RSSAnonBytes, f.RSSFileBytes = statusKB("RssAnon:"), statusKB("RssFile:")
	runtime.KeepAlive(w)
	return f, nil
}

// statusKB is a field of /proc/self/status in bytes, or -1.
func statusKB(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return -1
			}
			return kb * 1024
		}
	}
	return -1
}

// RunLoad writes the generated BF16 model (or takes cfg.ModelDir) and
// measures it in two child processes, one after the other: read widened
// to float32, and read with its dtype kept.
func RunLoad(ctx context.Context, cfg LoadConfig) (*LoadResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	dir, name := cfg.ModelDir, filepath.Base(cfg.ModelDir)
	if dir == "" {
		scratch, err := os.MkdirTemp(cfg.Dir, "gym-bench-load-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(scratch)
		c := QwenShape(cfg.Layers)
		name = fmt.Sprintf("qwen3-0.6b-shape, %d layers, bf16", cfg.Layers)
		fmt.Fprintf(progress, "writing a random %s model (%.2f B parameters)\n", name, float64(c.NumParams())/1e9)
		if err := writeRandomBF16(scratch, c); err != nil {
			return nil, err
		}
		dir = scratch
	}
	ck, err := llama.Open(dir)
	if err != nil {
		return nil, err
	}
	res := &LoadResult{Model: name, Params: ck.Cfg.NumParams(), Threads: cfg.Threads, Seq: cfg.Seq}
	ck.Close()
	if res.FileBytes, err = safetensorsBytes(dir); err != nil {
		return nil, err
	}
	for _, mode := range []string{ModeFloat32, ModeKept} {
		fmt.Fprintf(progress, "%s: %s\n", name, mode)
		argv := append(append([]string(nil), cfg.GoCmd...), "--dir", dir, "--mode", mode,
			"--threads", strconv.Itoa(cfg.Threads), "--seq", strconv.Itoa(cfg.Seq))
		var f LoadFigures
		if err := runJSON(ctx, argv, &f); err != nil {
			return nil, fmt.Errorf("modelbench: %s on %s: %w", mode, name, err)
		}
		if mode == ModeFloat32 {
			res.Float32 = f
		} else {
			res.Kept = f
		}
	}
	return res, nil
}

// writeRandomBF16 saves a random model of shape c in BF16 to dir and
// gives the float32 weights' memory back to the operating system, so the
// children measured next have the machine's memory.
func writeRandomBF16(dir string, c llama.Config) error {
	w, err := RandomWeights(c, 1)
	if err != nil {
		return err
	}
	err = llama.SaveAs(dir, w, llama.BF16)
	runtime.KeepAlive(w) // until here; then its memory goes back
	debug.FreeOSMemory()
	return err
}

// safetensorsBytes is the size of the .safetensors files in dir.
func safetensorsBytes(dir string) (int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".safetensors") {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return 0, err
		}
		n += fi.Size()
	}
	return n, nil
}

// PrintLoad writes r as a table: figure, float32, kept, kept/float32, and
// each peak RSS against the file size.
func PrintLoad(w io.Writer, r *LoadResult) {
	mib := func(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
	x := func(a, b float64) string {
		if b <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	fmt.Fprintf(w, "%s: %.3f B parameters, safetensors %s; LoRA step on %d tokens, %d threads\n",
		r.Model, float64(r.Params)/1e9, mib(r.FileBytes), r.Seq, r.Threads)
	fmt.Fprintf(w, "%-30s %12s %12s %9s\n", "figure", "float32", "kept", "kept/f32")
	row := func(name string, a, b int64) {
		fmt.Fprintf(w, "%-30s %12s %12s %9s\n", name, mib(a), mib(b), x(float64(b), float64(a)))
	}
	row("weights in memory", r.Float32.WeightsBytes, r.Kept.WeightsBytes)
	row("peak RSS after load", r.Float32.LoadRSSBytes, r.Kept.LoadRSSBytes)
	row("peak RSS after a LoRA step", r.Float32.PeakRSSBytes, r.Kept.PeakRSSBytes)
	row("RSS anonymous (end)", r.Float32.RSSAnonBytes, r.Kept.RSSAnonBytes)
	row("RSS file-backed (end)", r.Float32.RSSFileBytes, r.Kept.RSSFileBytes)
	fmt.Fprintf(w, "%-30s %12.1f %12.1f %9s\n", "load s", r.Float32.LoadSeconds, r.Kept.LoadSeconds, x(r.Kept.LoadSeconds, r.Float32.LoadSeconds))
	fmt.Fprintf(w, "%-30s %12.1f %12.1f %9s\n", "LoRA step s", r.Float32.StepSeconds, r.Kept.StepSeconds, x(r.Kept.StepSeconds, r.Float32.StepSeconds))
	fb := float64(r.FileBytes)
	fmt.Fprintf(w, "peak RSS / file size: float32 %s, kept %s (after load: %s, %s)\n",
		x(float64(r.Float32.PeakRSSBytes), fb), x(float64(r.Kept.PeakRSSBytes), fb),
		x(float64(r.Float32.LoadRSSBytes), fb), x(float64(r.Kept.LoadRSSBytes), fb))
}
