package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/zooai/gym/internal/deltabench"
	"github.com/zooai/gym/internal/modelbench"
	"github.com/zooai/gym/protocol/delta"
)

func newBench() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure this machine: delta packing and verification, the model engine against PyTorch, its memory on a BF16 base",
	}
	cmd.AddCommand(newBenchDelta(), newBenchVerifyRSS(), newBenchModel(), newBenchModelGo(), newBenchBackend(), newBenchQuality(), newBenchQualitySim(),
		newBenchLoad(), newBenchLoadGo(), newBenchOutliers())
	return cmd
}

// newBenchVerifyRSS is the child bench delta runs to measure verify's peak
// memory: what 'gym delta verify FILE' does, then its own VmHWM in bytes.
func newBenchVerifyRSS() *cobra.Command {
	return &cobra.Command{
		Use:    "verify-rss FILE",
		Hidden: true,
		Args:   exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := verifyFile(cmd.Context(), args[0], nil, delta.Limits{}); err != nil {
				return err
			}
			rss, err := deltabench.PeakRSS()
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), rss)
			return nil
		},
	}
}

func newBenchDelta() *cobra.Command {
	var cfg deltabench.Config
	var mib int64
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "delta [--mib 256] [--tensors 64] [--iters 3] [--python] [--json]",
		Short: "Pack+sign and verify+decode throughput against the SHA3-256 bound",
		Long: `bench delta builds a bf16 delta (default 256 MiB in 64 tensors, Gaussian values
like a LoRA update) and measures, in one run on this machine:

  - SHA3-256, SHA-256 and memcpy throughput on one core (the bounds);
  - pack+sign, verify+decode and verify-only MB/s for LZ4, Zstandard and none,
    with their ratio to the bound (pack: two sequential SHA3 passes;
    verify: one pass, both digests computed in parallel);
  - the peak resident memory of 'gym delta verify' on each file, and on an
    empty delta for the runtime's own footprint;
  - with --python, the seed's Python reference writer on the same tensors.

MB are 10^6 bytes of decoded tensor data; each figure is the best of --iters.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Bytes = mib << 20
			if cfg.Tensors <= 0 || cfg.Bytes < int64(cfg.Tensors)*2 {
				return usageError{fmt.Errorf("--mib %d and --tensors %d: need at least one element per tensor", mib, cfg.Tensors)}
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			cfg.VerifyCmd = []string{self, "bench", "verify-rss"}
			cfg.Progress = cmd.ErrOrStderr()
			res, err := deltabench.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
			}
			printBench(cmd.OutOrStdout(), res)
			return nil
		},
	}
	cmd.Flags().Int64Var(&mib, "mib", 256, "size of the delta in MiB (decoded)")
	cmd.Flags().IntVar(&cfg.Tensors, "tensors", 64, "number of tensors")
	cmd.Flags().IntVar(&cfg.Iters, "iters", 3, "repetitions of each measurement (the best counts)")
	cmd.Flags().BoolVar(&cfg.Python, "python", false, "also time the Python reference writer (slow: its payload += is quadratic)")
	cmd.Flags().StringVar(&cfg.Dir, "dir", "", "scratch directory (default: the system's temporary directory)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func printBench(w io.Writer, r *deltabench.Result) {
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	fmt.Fprintf(w, "delta: %s in %d bf16 tensors (largest %s), %d CPUs\n\n", mib(r.Bytes), r.Tensors, mib(r.LargestTensor), r.CPUs)
	fmt.Fprintf(w, "bounds (one core)  SHA3-256 %.0f MB/s   SHA-256 %.0f MB/s   memcpy %.0f MB/s\n", r.SHA3MBps, r.SHA256MBps, r.MemcpyMBps)
	fmt.Fprintf(w, "                   SHA3-256 with two streams at once: %.0f MB/s each\n", r.SHA3ParallelMBps)
	fmt.Fprintf(w, "pack bound         %.0f MB/s (two sequential SHA3 passes)\n\n", r.TwoPassBoundMBps)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "compression\tfile\tpack+sign MB/s\t× bound\tverify+decode MB/s\t× SHA3\t× 2-stream SHA3\tverify MB/s\tverify peak RSS\t")
	for _, c := range r.Codecs {
		rss := "-"
		if c.PeakRSSBytes > 0 {
			rss = mib(c.PeakRSSBytes)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.2f\t%.0f\t%.2f\t%.2f\t%.0f\t%s\t\n", c.Compression, mib(c.FileBytes), c.PackMBps, c.PackRatio, c.VerifyMBps, c.VerifyRatio, c.VerifyParallelRatio, c.VerifyOnlyMBps, rss)
	}
	tw.Flush()
	if r.BaselineRSSBytes > 0 {
		fmt.Fprintf(w, "\n'gym delta verify' on an empty delta: %s peak RSS (the runtime's footprint)\n", mib(r.BaselineRSSBytes))
	}
	if r.PythonMBps > 0 {
		fmt.Fprintf(w, "Python reference writer (LZ4): %.1f MB/s; Go pack+sign (LZ4) is %.0f× faster\n", r.PythonMBps, r.GoVsPythonSpeedup)
	} else {
		fmt.Fprintf(w, "Python reference writer: skipped (%s)\n", r.PythonSkipped)
	}
}

// newBenchModelGo is the child bench model runs for the Go engine's
// figures, so that its peak RSS is its own.
func newBenchModelGo() *cobra.Command {
	var dir string
	var threads, seq, iters int
	cmd := &cobra.Command{
		Use:    "model-go --dir DIR --threads N --seq L --iters I",
		Hidden: true,
		Args:   exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if threads < 1 || seq < 2 || iters < 1 {
				return usageError{fmt.Errorf("--threads %d, --seq %d, --iters %d", threads, seq, iters)}
			}
			runtime.GOMAXPROCS(threads)
			f, err := modelbench.MeasureGo(dir, threads, seq, iters)
			if err != nil {
				return err
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(f)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "model directory")
	cmd.Flags().IntVar(&threads, "threads", 1, "threads")
	cmd.Flags().IntVar(&seq, "seq", 128, "sequence length")
	cmd.Flags().IntVar(&iters, "iters", 3, "repetitions")
	return cmd
}

func newBenchModel() *cobra.Command {
	cfg := modelbench.DefaultConfig()
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "model [--model DIR] --baseline torch [--threads N] [--seq L] [--json]",
		Short: "Prefill, decode and LoRA training speed of the Go engine against PyTorch",
		Long: `bench model measures, in one run on this machine with the same number of
threads, the Go engine and PyTorch (CPU, float32, transformers + PEFT from the
project's virtual environment) on the same checkpoint:

  - prefill tokens/s: one sequence of --seq tokens, logits of the last position;
  - decode tokens/s: 8 sequences, a 16-token prompt, then 32 KV-cached steps;
  - LoRA training step tokens/s: forward, per-token log-probabilities, and the
    backward pass into a rank-8 adapter on q_proj and v_proj, on --seq tokens;
  - the peak resident memory of each engine's process.

Without --model it writes two random models into a temporary directory: one
shaped like SmolLM2-135M and a tiny Llama of the built-in base's size. The
interpreter is --python, else $GYM_PYTHON, else the nearest .venv/bin/python.
Each figure is the best of --iters.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.Baseline == "none" {
				cfg.Baseline = ""
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			cfg.GoCmd = []string{self, "bench", "model-go"}
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			cfg.Progress = cmd.ErrOrStderr()
			res, err := modelbench.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
			}
			modelbench.Print(cmd.OutOrStdout(), res)
			return nil
		},
	}
	cmd.Flags().StringVar(&cfg.ModelDir, "model", "", "a Hugging Face model directory (default: the generated models)")
	cmd.Flags().StringVar(&cfg.Baseline, "baseline", cfg.Baseline, "torch, or none for the Go engine alone")
	cmd.Flags().IntVar(&cfg.Threads, "threads", cfg.Threads, "threads of each engine")
	cmd.Flags().IntVar(&cfg.Seq, "seq", cfg.Seq, "tokens of the prefill and training sequences")
	cmd.Flags().IntVar(&cfg.Iters, "iters", cfg.Iters, "repetitions of each figure (the best counts)")
	cmd.Flags().StringVar(&cfg.Python, "python", "", "Python interpreter with torch, transformers and peft")
	cmd.Flags().StringVar(&cfg.Dir, "dir", "", "scratch directory (default: the system's temporary directory)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// newBenchLoadGo is the child bench load runs for each way of reading the
// base, so that its peak RSS is its own.
func newBenchLoadGo() *cobra.Command {
	var dir, mode string
	var threads, seq int
	cmd := &cobra.Command{
		Use:    "load-go --dir DIR --mode float32|kept --threads N --seq L",
		Hidden: true,
		Args:   exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if threads < 1 || seq < 2 {
				return usageError{fmt.Errorf("--threads %d, --seq %d", threads, seq)}
			}
			runtime.GOMAXPROCS(threads)
			f, err := modelbench.MeasureLoad(dir, mode, threads, seq)
			if err != nil {
				return err
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(f)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "model directory")
	cmd.Flags().StringVar(&mode, "mode", modelbench.ModeKept, "float32 or kept")
	cmd.Flags().IntVar(&threads, "threads", 1, "threads")
	cmd.Flags().IntVar(&seq, "seq", 64, "tokens of the training step")
	return cmd
}

func newBenchLoad() *cobra.Command {
	cfg := modelbench.DefaultLoadConfig()
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "load [--model DIR] [--layers 22] [--threads N] [--seq 64] [--json]",
		Short: "Peak memory of the Go engine on a BF16 base: widened to float32 at load against kept 16-bit",
		Long: `bench load measures what a BF16 base costs the Go engine, in one run: the
same checkpoint read twice, each time in a child process of its own, once
widened to float32 at load (as the engine did before) and once with its
16-bit matrices kept and memory-mapped (what it does now), each followed by
one LoRA training step on --seq tokens. It reports the weights' memory, the
peak resident memory (VmHWM) after the load and after the step, each against
the safetensors files' size, and the load and step times.

Without --model it writes a random model shaped like Qwen3-0.6B, cut to
--layers layers (22: 0.50 B parameters, 1.0 GB), in BF16 into a temporary
directory (--dir).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			cfg.GoCmd = []string{self, "bench", "load-go"}
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			cfg.Progress = cmd.ErrOrStderr()
			res, err := modelbench.RunLoad(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
			}
			modelbench.PrintLoad(cmd.OutOrStdout(), res)
			return nil
		},
	}
	cmd.Flags().StringVar(&cfg.ModelDir, "model", "", "a Hugging Face model directory (default: a generated BF16 Qwen3-shaped model)")
	cmd.Flags().IntVar(&cfg.Layers, "layers", cfg.Layers, "layers of the generated model")
	cmd.Flags().IntVar(&cfg.Threads, "threads", cfg.Threads, "threads of the engine")
	cmd.Flags().IntVar(&cfg.Seq, "seq", cfg.Seq, "tokens of the training step")
	cmd.Flags().StringVar(&cfg.Dir, "dir", "", "scratch directory (default: the system's temporary directory)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}
