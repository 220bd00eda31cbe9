package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/zooai/gym/delta"
	"github.com/zooai/gym/internal/deltabench"
)

func newBench() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure this machine: delta packing and verification",
	}
	cmd.AddCommand(newBenchDelta(), newBenchVerifyRSS())
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
