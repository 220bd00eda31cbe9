package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/zooai/gym/artifact/basecache"
	"github.com/zooai/gym/internal/atomicfile"
	"github.com/zooai/gym/model/heldout"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/prng"
	"github.com/zooai/gym/model/rollout"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/model/trainer"
	"github.com/zooai/gym/protocol/trace"
)

type rolloutOptions struct {
	modelDir, checkpoint, out       string
	data                            dataFlags
	heldOut                         bool
	n, group, topK, maxNew, threads int
	seed                            uint64
	temperature                     float64
}

// rolloutStream labels gym rollout's sampler streams, apart from the
// trainer's: prompts are sampled rolloutBatch at a time, batch b from
// prng.New(seed, rolloutStream, b) (recorded in the trace header).
const (
	rolloutStream = 0x726f6c6c // "roll"
	rolloutBatch  = 16
)

func newRollout() *cobra.Command {
	o := rolloutOptions{data: dataFlags{dataset: "addition"}, group: 8, temperature: 1, threads: runtime.GOMAXPROCS(0)}
	cmd := &cobra.Command{
		Use:   "rollout [--model DIR] [--checkpoint PATH] [--dataset NAME|FILE [mapping]] [--eval] --n K [--group G] --out FILE",
		Short: "Sample completions and write them as rollout traces (token ids, log-probabilities, rewards)",
		Long: `rollout samples G completions for each of K prompts with the Go engine and
writes them as a trace file (JSON Lines, docs/traces.md): per completion the
prompt and completion text and token ids, the log-probability of every
sampled token under the sampling policy, and its reward; the header records
the model, the adapter's digest, the sampler's seed and settings. The same
seed, model, checkpoint and flags give the same file on any machine and any
--threads.

Traces are synthetic data (filter them by reward for supervised fine-tuning),
a record for offline analysis, and the format workers' deltas reference for
verification across hardware.

The model is the built-in base or --model DIR (a Hugging Face model
directory); --checkpoint adds a trained LoRA adapter (a PEFT directory or an
adapter.delta, as gym eval takes). Prompts come from --dataset: a built-in
task (` + strings.Join(task.Names(), ", ") + `) or a JSONL/Parquet file or datasets directory
with the mapping flags gym up takes (--template or --prompt-field,
--answer-field, --extract, --split, --held-out, --hold-out-bp; the header
names it by CID); --reward scores it as a job's reward list would (default:
partial credit on a task, exact match on a dataset). K training problems
are drawn from --seed as a job's trainer draws them; --eval takes the first
K held-out problems instead. --out FILE.parquet writes Parquet (a row per
completion, the header in the file's metadata, docs/traces.md), any other
name JSON Lines; --out - writes JSON Lines to standard output. Progress
goes to standard error.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case o.out == "":
				return usageError{errors.New("--out is required: a file for the traces, or - for standard output")}
			case o.n < 1 || o.n > 1<<16:
				return usageError{fmt.Errorf("--n %d: want 1 to 65536 prompts", o.n)}
			case o.group < 1 || o.group > 256:
				return usageError{fmt.Errorf("--group %d: want 1 to 256 completions per prompt", o.group)}
			case o.heldOut && o.n > heldout.MaxN:
				return usageError{fmt.Errorf("--eval --n %d: at most %d held-out problems", o.n, heldout.MaxN)}
			}
			if err := (rollout.Config{Temperature: o.temperature, TopK: o.topK, MaxNew: o.maxNew}).Validate(); err != nil {
				return usageError{err}
			}
			return runRollout(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.modelDir, "model", "", "base model: a Hugging Face model directory (default: the built-in base model)")
	f.StringVar(&o.checkpoint, "checkpoint", "", "a trained adapter: checkpoint directory (PEFT layout) or adapter.delta (default: the base alone)")
	o.data.bind(f, "prompts: a built-in task ("+strings.Join(task.Names(), ", ")+") or a .jsonl/.parquet file or datasets directory")
	f.BoolVar(&o.heldOut, "eval", false, "the held-out problems instead of training draws")
	f.IntVar(&o.n, "n", 0, "prompts")
	f.IntVar(&o.group, "group", o.group, "completions per prompt")
	f.Uint64Var(&o.seed, "seed", 0, "seed of the prompts (train split) and of the sampler")
	f.Float64Var(&o.temperature, "temperature", o.temperature, "sampling temperature")
	f.IntVar(&o.topK, "top-k", 0, "sample among the K most likely tokens (0: all)")
	f.IntVar(&o.maxNew, "max-new-tokens", 0, "longest completion in tokens (0: the batch's longest reference answer)")
	f.StringVar(&o.out, "out", "", "trace file to write: .parquet for Parquet, else JSON Lines (- for standard output)")
	f.IntVar(&o.threads, "threads", o.threads, "goroutines for matrix products (results do not depend on it)")
	return cmd
}

func runRollout(ctx context.Context, o rolloutOptions, stdout, stderr io.Writer) error {
	start := time.Now()
	base, err := loadBase(o.modelDir)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "gym-rollout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	src, err := o.data.resolve(ctx, tmp)
	if err != nil {
		return err
	}
	if err := src.renderChat(base); err != nil {
		return err
	}
	h := trace.Header{Model: "builtin", Dataset: src.name, Seed: o.seed, Stream: []uint64{rolloutStream}, Batch: rolloutBatch,
		Temperature: o.temperature, TopK: o.topK, MaxNew: o.maxNew, Vocab: base.Weights.Cfg.Vocab}
	if o.modelDir != "" {
		root, err := basecache.DirCID(ctx, o.modelDir)
		if err != nil {
			return fmt.Errorf("--model %s: %w", o.modelDir, err)
		}
		h.Model = root.String()
	}
	var adapter *llama.Adapter
	if o.checkpoint != "" {
		ck, err := loadEvalCheckpoint(ctx, o.checkpoint, base.Weights.Cfg)
		if err != nil {
			return err
		}
		if ck.baseSHA3 != "" && ck.baseSHA3 != base.SHA3 {
			return fmt.Errorf("%s was trained on base model %.16s…, not this one (%.16s…): pass --model with the base model it was trained on",
				o.checkpoint, ck.baseSHA3, base.SHA3)
		}
		adapter = ck.adapter
		h.Policy = fmt.Sprintf("%x", llama.Digest(adapter.Views()))
	}
	md, err := llama.New(base.Weights, adapter, o.threads)
	if err != nil {
		return err
	}
	var probs []task.Problem
	if o.heldOut {
		if probs = src.heldOut(o.n); len(probs) < o.n {
			return fmt.Errorf("--eval --n %d: %s holds out %d problems", o.n, o.data.dataset, len(probs))
		}
	} else {
		probs = src.train(o.seed, o.n, trainer.DefaultConfig().EvalSize)
	}
	c := rollout.Config{Temperature: o.temperature, TopK: o.topK, MaxNew: o.maxNew, Reward: src.scorer}
	all := &rollout.Rollouts{G: o.group}
	for i := 0; i < len(probs); i += rolloutBatch {
		if err := ctx.Err(); err != nil {
			return err
		}
		rng := prng.New(o.seed, rolloutStream, uint64(i/rolloutBatch))
		ro, err := rollout.Generate(md, base.Tokenizer, probs[i:min(i+rolloutBatch, len(probs))], o.group, c, rng)
		if err != nil {
			return err
		}
		all.Problems = append(all.Problems, ro.Problems...)
		all.Prompts = append(all.Prompts, ro.Prompts...)
		all.Completions = append(all.Completions, ro.Completions...)
		all.OldLogP = append(all.OldLogP, ro.OldLogP...)
		all.Texts = append(all.Texts, ro.Texts...)
		all.Rewards = append(all.Rewards, ro.Rewards...)
		all.Exact = append(all.Exact, ro.Exact...)
		fmt.Fprintf(stderr, "\rsampled %d/%d prompts × %d", len(all.Problems), len(probs), o.group)
	}
	fmt.Fprintln(stderr)
	set := trace.FromRollouts(h, all)
	if o.out == "-" {
		bw := bufio.NewWriter(stdout)
		if err := trace.Write(bw, set); err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
	} else if err := atomicfile.Write(o.out, 0o644, true, func(w io.Writer) error {
		if strings.HasSuffix(o.out, ".parquet") {
			return trace.WriteParquet(w, set)
		}
		return trace.Write(w, set)
	}); err != nil {
		return err
	}
	exact := 0
	for _, e := range all.Exact {
		if e {
			exact++
		}
	}
	fmt.Fprintf(stderr, "%d completions, %d tokens, mean reward %.3f, exact %.1f%%, %.1f s; wrote %s\n",
		len(set.Seqs), set.Tokens(), set.MeanReward(), 100*float64(exact)/float64(len(set.Seqs)), time.Since(start).Seconds(), o.out)
	return nil
}
