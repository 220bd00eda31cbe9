package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/zooai/gym/model/heldout"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/model/trainer"
	"github.com/zooai/gym/protocol/delta"
	"github.com/zooai/gym/protocol/jobconf"
)

type evalOptions struct {
	checkpoint, task, modelDir string
	data                       dataFlags
	n, threads, k              int
	seed                       uint64
	json                       bool
}

// maxCheckpointFile caps the .delta file gym eval reads.
const maxCheckpointFile = 1 << 30

func newEval() *cobra.Command {
	o := evalOptions{n: trainer.DefaultConfig().EvalSize, k: 1}
	cmd := &cobra.Command{
		Use:   "eval [--model DIR] --checkpoint PATH [--task NAME | --dataset FILE [mapping]] [--n N] [--json]",
		Short: "Evaluate a trained LoRA adapter and the base model on a task's held-out problems",
		Long: `eval loads a LoRA adapter and scores it, and the base model it was trained on,
on the first N held-out problems of a task (the set gym train evaluates on
and never trains on). PATH is one of:

  a directory   a checkpoint in the Hugging Face PEFT layout, as gym up,
                hanzod and gym train (DIR/checkpoint) write it
                (adapter_model.safetensors, adapter_config.json)
  *.delta       a signed LoRA delta whose tensors are the adapter (gym train's
                adapter.delta); its signature is verified

It prints accuracy (exact answers, greedy decoding), reward (partial
credit) and loss (mean negative log-likelihood per answer token of the
correct answer, teacher-forced, in nats) before and after, or with --json one
object: task, n, accuracy, reward, loss, base_accuracy, base_reward,
base_loss, seconds.

The task defaults to the one recorded in the checkpoint, else addition.
Tasks: ` + strings.Join(task.Names(), ", ") + `. --dataset FILE evaluates on a dataset's held-out
rows instead (a JSONL/Parquet file or datasets directory, with the mapping
flags gym up takes: --template or --prompt-field, --answer-field, --extract,
--split, --held-out, --hold-out-bp), scored with --reward (default: exact
match), as hanzod evaluates a job on that dataset; task is then the
dataset's CID. The base model is the built-in one, or the
Hugging Face model directory of --model; a checkpoint that records the SHA3
of its base model is refused with a different base.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.checkpoint == "" {
				return usageError{errors.New("--checkpoint is required: pass a checkpoint directory or an adapter.delta")}
			}
			if o.n < 1 || o.n > heldout.MaxN {
				return usageError{fmt.Errorf("--n %d: want 1 to %d held-out problems", o.n, heldout.MaxN)}
			}
			if o.k < 1 || o.k > heldout.MaxK {
				return usageError{fmt.Errorf("--k %d: want 1 to %d samples a problem", o.k, heldout.MaxK)}
			}
			if o.task != "" && o.data.dataset != "" {
				return usageError{errors.New("give --task or --dataset, not both")}
			}
			if o.task != "" {
				if _, err := task.Lookup(o.task); err != nil {
					return usageError{fmt.Errorf("--task: %w", err)}
				}
			}
			return runEval(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.checkpoint, "checkpoint", "", "checkpoint directory (PEFT layout) or adapter.delta")
	f.StringVar(&o.task, "task", "", "task (default: the checkpoint's, else addition): "+strings.Join(task.Names(), ", "))
	f.IntVar(&o.n, "n", o.n, "held-out problems to evaluate on")
	f.BoolVar(&o.json, "json", false, "print one JSON object")
	f.IntVar(&o.k, "k", o.k, "also report pass@k: k completions a problem sampled at temperature 1 (1: greedy accuracy only)")
	f.Uint64Var(&o.seed, "seed", 0, "the sampling seed of --k")
	o.data.bind(f, "prompts: a built-in task ("+strings.Join(task.Names(), ", ")+") or a .jsonl/.parquet file or datasets directory")
	f.StringVar(&o.modelDir, "model", "", "base model: a Hugging Face model directory (default: the built-in base model)")
	f.IntVar(&o.threads, "threads", runtime.GOMAXPROCS(0), "goroutines for matrix products (results do not depend on it)")
	return cmd
}

// evalSummary is the --json object.
type evalSummary struct {
	Task         string  `json:"task"`
	N            int     `json:"n"`
	Accuracy     float64 `json:"accuracy"`
	Reward       float64 `json:"reward"`
	Loss         float64 `json:"loss"`
	BaseAccuracy float64 `json:"base_accuracy"`
	BaseReward   float64 `json:"base_reward"`
	BaseLoss     float64 `json:"base_loss"`
	// K > 1: pass@k of k samples a problem (temperature 1, Seed).
	K           int     `json:"k,omitempty"`
	PassAtK     float64 `json:"pass_at_k,omitempty"`
	BasePassAtK float64 `json:"base_pass_at_k,omitempty"`
	Seed        uint64  `json:"seed,omitempty"`
	Seconds     float64 `json:"seconds"`
	Checkpoint  string  `json:"checkpoint"`
	Format      string  `json:"format"` // peft or delta
	AdapterSHA3 string  `json:"adapter_sha3"`
	BaseSHA3    string  `json:"base_sha3"`
}

// evalCheckpoint is what gym eval learns from the checkpoint.
type evalCheckpoint struct {
	adapter  *llama.Adapter
	format   string
	task     string // "" when not recorded
	baseSHA3 string // "" when not recorded
}

func runEval(ctx context.Context, o evalOptions, stdout, progress io.Writer) error {
	start := time.Now()
	base, err := loadBase(o.modelDir)
	if err != nil {
		return err
	}
	baseHash := base.SHA3
	which := "the built-in base model"
	if o.modelDir != "" {
		which = o.modelDir
	}
	ck, err := loadEvalCheckpoint(ctx, o.checkpoint, base.Weights.Cfg)
	if err != nil {
		return fmt.Errorf("%w (is it an adapter for %s? pass --model with the base model it was trained on)", err, which)
	}
	if ck.baseSHA3 != "" && ck.baseSHA3 != baseHash {
		return fmt.Errorf("%s was trained on base model %.16s…, %s is %.16s…: pass --model with the base model it was trained on",
			o.checkpoint, ck.baseSHA3, which, baseHash)
	}
	taskName := o.task
	if taskName == "" {
		taskName = o.data.dataset
	}
	if taskName == "" {
		taskName = ck.task
	}
	if taskName == "" {
		taskName = "addition"
	}
	if _, err := task.Lookup(taskName); err != nil && o.data.dataset == "" {
		return fmt.Errorf("%s records task %q, which this gym does not know: pass --task NAME or --dataset FILE: %w", o.checkpoint, taskName, err)
	}
	tmp, err := os.MkdirTemp("", "gym-eval-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	src, err := o.data.resolveNamed(ctx, taskName, tmp)
	if err != nil {
		return err
	}
	if err := src.renderChat(base); err != nil {
		return err
	}
	taskName = src.name
	problems := src.heldOut(o.n)
	fmt.Fprintf(progress, "gym eval: %d held-out problems of %s: greedy decoding and loss, adapter then base\n", len(problems), taskName)
	after, err := heldout.EvaluateOn(base.Weights, base.Tokenizer, ck.adapter, taskName, problems, src.scorer, o.threads)
	if err != nil {
		return err
	}
	before, err := heldout.EvaluateOn(base.Weights, base.Tokenizer, nil, taskName, problems, src.scorer, o.threads)
	if err != nil {
		return err
	}
	var passAfter, passBefore float64
	if o.k > 1 {
		for _, x := range []struct {
			name string
			a    *llama.Adapter
			out  *float64
		}{{"adapter", ck.adapter, &passAfter}, {"base", nil, &passBefore}} {
			t0 := time.Now()
			tty := isTerminal(progress)
			*x.out, err = heldout.PassAtK(base.Weights, base.Tokenizer, x.a, problems, o.k, src.scorer, o.seed, o.threads, func(done, total int) {
				if !tty && done < total {
					return // a log gets the last line alone
				}
				el := time.Since(t0)
				cr := map[bool]string{true: "\r"}[tty]
				fmt.Fprintf(progress, "%sgym eval: pass@%d, %s: %d/%d problems, %.0f s, about %.0f s left ", cr, o.k, x.name, done, total,
					el.Seconds(), el.Seconds()*float64(total-done)/float64(done))
			})
			fmt.Fprintln(progress)
			if err != nil {
				return err
			}
		}
	}
	o.n = len(problems)
	h := llama.Digest(ck.adapter.Views())
	sum := evalSummary{Task: taskName, N: o.n, Accuracy: after.Accuracy, Reward: after.Reward, Loss: after.Loss,
		BaseAccuracy: before.Accuracy, BaseReward: before.Reward, BaseLoss: before.Loss,
		Seconds: time.Since(start).Seconds(), Checkpoint: o.checkpoint, Format: ck.format,
		AdapterSHA3: fmt.Sprintf("%x", h), BaseSHA3: baseHash}
	if o.k > 1 {
		sum.K, sum.PassAtK, sum.BasePassAtK, sum.Seed = o.k, passAfter, passBefore, o.seed
	}
	if o.json {
		return json.NewEncoder(stdout).Encode(sum)
	}
	fmt.Fprintf(stdout, "%s (%s), %s, %d held-out problems: base -> adapter\n", o.checkpoint, ck.format, taskName, o.n)
	fmt.Fprintf(stdout, "  accuracy %6.1f%% -> %.1f%%\n", 100*sum.BaseAccuracy, 100*sum.Accuracy)
	fmt.Fprintf(stdout, "  reward   %6.3f  -> %.3f\n", sum.BaseReward, sum.Reward)
	fmt.Fprintf(stdout, "  loss     %6.3f  -> %.3f nats/token\n", sum.BaseLoss, sum.Loss)
	if sum.K > 1 {
		fmt.Fprintf(stdout, "  pass@%-3d %6.1f%% -> %.1f%%   (%d samples a problem, temperature 1, seed %d)\n", sum.K, 100*sum.BasePassAtK, 100*sum.PassAtK, sum.K, sum.Seed)
	}
	fmt.Fprintf(stdout, "  %.1f s, %d threads\n", sum.Seconds, o.threads)
	return nil
}

// loadEvalCheckpoint reads a PEFT directory or a signed .delta for a base
// model of shape mc.
func loadEvalCheckpoint(ctx context.Context, path string, mc llama.Config) (*evalCheckpoint, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--checkpoint: %w", err)
	}
	if st.IsDir() {
		if _, err := os.Stat(filepath.Join(path, peft.WeightsFile)); errors.Is(err, fs.ErrNotExist) {
			for _, f := range []string{"checkpoint", "adapter.delta"} {
				if _, err := os.Stat(filepath.Join(path, f)); err == nil {
					return nil, fmt.Errorf("%s has no %s but has %s (gym train's output): pass --checkpoint %s", path, peft.WeightsFile, f, filepath.Join(path, f))
				}
			}
			return nil, fmt.Errorf("%s has no %s: pass the directory gym up/hanzod published, or an adapter.delta file", path, peft.WeightsFile)
		}
		a, cfg, err := peft.Read(path, mc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return &evalCheckpoint{adapter: a, format: "peft", task: cfg.Extra[peft.ExtraTask], baseSHA3: cfg.BaseSHA3}, nil
	}
	if st.Size() > maxCheckpointFile {
		return nil, fmt.Errorf("%s is %d bytes, more than an adapter can be (%d)", path, st.Size(), maxCheckpointFile)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(raw, []byte("DELTA")) {
		return nil, fmt.Errorf("%s is not a signed delta: pass a checkpoint directory or an adapter.delta", path)
	}
	return evalFromDelta(ctx, path, raw, mc)
}

// evalFromDelta rebuilds the adapter carried by a signed LoRA delta (tensors
// under PEFT's names, lora_alpha in the metadata) for a model of shape mc.
func evalFromDelta(ctx context.Context, path string, raw []byte, mc llama.Config) (*evalCheckpoint, error) {
	// The tools' ratio bound: from memory, Read refuses a compression bomb
	// at its declaration, before allocating what it declares.
	d, err := delta.Read(ctx, bytes.NewReader(raw), delta.Limits{MaxTotalBytes: maxCheckpointFile, MaxRatio: toolLimits().MaxRatio})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if d.Info.Header.Flags&delta.FlagLoRA == 0 || d.Info.Metadata == nil {
		return nil, fmt.Errorf("%s is not a LoRA delta with metadata: pass the adapter.delta gym train writes, or a checkpoint directory", path)
	}
	md := d.Info.Metadata
	meta := func(k string, v any) error {
		r, ok := md.Get(k)
		if !ok {
			return fmt.Errorf("%s: the delta's metadata has no %s: pass the adapter.safetensors or checkpoint directory instead", path, k)
		}
		if err := json.Unmarshal(r, v); err != nil {
			return fmt.Errorf("%s: metadata %s: %w", path, k, err)
		}
		return nil
	}
	var alpha float64
	if err := meta("lora_alpha", &alpha); err != nil {
		return nil, err
	}
	ck := &evalCheckpoint{format: "delta"}
	if _, ok := md.Get("task"); ok {
		if err := meta("task", &ck.task); err != nil {
			return nil, err
		}
	}
	ck.baseSHA3, _ = md.BaseCheckpoint()
	a, err := jobconf.DecodeAny(d.Tensors, mc, alpha)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ck.adapter = a
	return ck, nil
}
