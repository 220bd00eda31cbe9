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
	"github.com/zooai/gym/delta"
	"github.com/zooai/gym/heldout"
	"github.com/zooai/gym/jobconf"
	"github.com/zooai/gym/model"
	"github.com/zooai/gym/peft"
	"github.com/zooai/gym/task"
	"github.com/zooai/gym/trainer"
)

type evalOptions struct {
	checkpoint, task, basePath string
	n, threads                 int
	json                       bool
}

// maxCheckpointFile caps the adapter.safetensors or .delta file gym eval reads.
const maxCheckpointFile = 1 << 30

func newEval() *cobra.Command {
	o := evalOptions{n: trainer.DefaultConfig().EvalSize}
	cmd := &cobra.Command{
		Use:   "eval --checkpoint PATH [--task NAME] [--n N] [--json]",
		Short: "Evaluate a trained LoRA adapter and the base model on a task's held-out problems",
		Long: `eval loads a LoRA adapter and scores it, and the base model it was trained on,
on the first N held-out problems of a task (the set gym train evaluates on
and never trains on). PATH is one of:

  a directory   a checkpoint in the Hugging Face PEFT layout, as gym up and
                hanzod publish it (adapter_model.safetensors, adapter_config.json)
  *.safetensors the adapter.safetensors that gym train writes
  *.delta       a signed LoRA delta whose tensors are the adapter (gym train's
                adapter.delta); its signature is verified

It prints accuracy (exact answers, greedy decoding), reward (partial
credit) and loss (mean negative log-likelihood per answer token of the
correct answer, teacher-forced, in nats) before and after, or with --json one
object: task, n, accuracy, reward, loss, base_accuracy, base_reward,
base_loss, seconds.

The task defaults to the one recorded in the checkpoint, else addition.
Tasks: ` + strings.Join(task.Names(), ", ") + `. A checkpoint that records the SHA3 of
its base model is refused with a different base (--base).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.checkpoint == "" {
				return usageError{errors.New("--checkpoint is required: pass a checkpoint directory, an adapter.safetensors or an adapter.delta")}
			}
			if o.n < 1 || o.n > heldout.MaxN {
				return usageError{fmt.Errorf("--n %d: want 1 to %d held-out problems", o.n, heldout.MaxN)}
			}
			if o.task != "" {
				if _, err := task.Lookup(o.task); err != nil {
					return usageError{fmt.Errorf("--task: %w", err)}
				}
			}
			return runEval(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.checkpoint, "checkpoint", "", "checkpoint directory, adapter.safetensors or adapter.delta")
	f.StringVar(&o.task, "task", "", "task (default: the checkpoint's, else addition): "+strings.Join(task.Names(), ", "))
	f.IntVar(&o.n, "n", o.n, "held-out problems to evaluate on")
	f.BoolVar(&o.json, "json", false, "print one JSON object")
	f.StringVar(&o.basePath, "base", "", "base weights (safetensors written by gym) instead of the built-in base model")
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
	Seconds      float64 `json:"seconds"`
	Checkpoint   string  `json:"checkpoint"`
	Format       string  `json:"format"` // peft, safetensors or delta
	AdapterSHA3  string  `json:"adapter_sha3"`
	BaseSHA3     string  `json:"base_sha3"`
}

// evalCheckpoint is what gym eval learns from the checkpoint.
type evalCheckpoint struct {
	adapter  *model.Adapter
	format   string
	task     string // "" when not recorded
	baseSHA3 string // "" when not recorded
}

func runEval(ctx context.Context, o evalOptions, stdout io.Writer) error {
	start := time.Now()
	base, baseHash, err := trainLoadBase(o.basePath)
	if err != nil {
		return err
	}
	ck, err := loadEvalCheckpoint(ctx, o.checkpoint, base.Cfg)
	if err != nil {
		return err
	}
	if ck.baseSHA3 != "" && ck.baseSHA3 != baseHash {
		which := "the built-in base model"
		if o.basePath != "" {
			which = o.basePath
		}
		return fmt.Errorf("%s was trained on base model %.16s…, %s is %.16s…: pass --base with the base weights it was trained on",
			o.checkpoint, ck.baseSHA3, which, baseHash)
	}
	if ck.adapter.Model != base.Cfg {
		return fmt.Errorf("%s is an adapter for a model of shape %+v, the base model is %+v: pass --base with the base weights it was trained on",
			o.checkpoint, ck.adapter.Model, base.Cfg)
	}
	taskName := o.task
	if taskName == "" {
		taskName = ck.task
	}
	if taskName == "" {
		taskName = "addition"
	}
	if _, err := task.Lookup(taskName); err != nil {
		return fmt.Errorf("%s records task %q, which this gym does not know: pass --task NAME: %w", o.checkpoint, taskName, err)
	}
	after, err := heldout.Evaluate(base, ck.adapter, taskName, o.n, o.threads)
	if err != nil {
		return err
	}
	before, err := heldout.Evaluate(base, nil, taskName, o.n, o.threads)
	if err != nil {
		return err
	}
	h := model.Digest(ck.adapter.Tensors())
	sum := evalSummary{Task: taskName, N: o.n, Accuracy: after.Accuracy, Reward: after.Reward, Loss: after.Loss,
		BaseAccuracy: before.Accuracy, BaseReward: before.Reward, BaseLoss: before.Loss,
		Seconds: time.Since(start).Seconds(), Checkpoint: o.checkpoint, Format: ck.format,
		AdapterSHA3: fmt.Sprintf("%x", h), BaseSHA3: baseHash}
	if o.json {
		return json.NewEncoder(stdout).Encode(sum)
	}
	fmt.Fprintf(stdout, "%s (%s), %s, %d held-out problems: base -> adapter\n", o.checkpoint, ck.format, taskName, o.n)
	fmt.Fprintf(stdout, "  accuracy %6.1f%% -> %.1f%%\n", 100*sum.BaseAccuracy, 100*sum.Accuracy)
	fmt.Fprintf(stdout, "  reward   %6.3f  -> %.3f\n", sum.BaseReward, sum.Reward)
	fmt.Fprintf(stdout, "  loss     %6.3f  -> %.3f nats/token\n", sum.BaseLoss, sum.Loss)
	fmt.Fprintf(stdout, "  %.1f s, %d threads\n", sum.Seconds, o.threads)
	return nil
}

// loadEvalCheckpoint reads a PEFT directory, an adapter.safetensors or a
// signed .delta. mc is the base model's shape, which a delta does not carry.
func loadEvalCheckpoint(ctx context.Context, path string, mc model.Config) (*evalCheckpoint, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--checkpoint: %w", err)
	}
	if st.IsDir() {
		if _, err := os.Stat(filepath.Join(path, peft.WeightsFile)); errors.Is(err, fs.ErrNotExist) {
			for _, f := range []string{"adapter.safetensors", "adapter.delta"} {
				if _, err := os.Stat(filepath.Join(path, f)); err == nil {
					return nil, fmt.Errorf("%s has no %s but has %s (gym train's output): pass --checkpoint %s", path, peft.WeightsFile, f, filepath.Join(path, f))
				}
			}
			return nil, fmt.Errorf("%s has no %s: pass the directory gym up/hanzod published, or an adapter.safetensors or adapter.delta file", path, peft.WeightsFile)
		}
		a, cfg, err := peft.Read(path)
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
	if bytes.HasPrefix(raw, []byte("DELTA")) {
		return evalFromDelta(ctx, path, raw, mc)
	}
	a, meta, err := model.ReadAdapter(raw)
	if err != nil {
		return nil, fmt.Errorf("%s is neither a signed delta nor an adapter.safetensors from gym train (%w): pass a checkpoint directory, an adapter.safetensors or an adapter.delta", path, err)
	}
	ck := &evalCheckpoint{adapter: a, format: "safetensors", baseSHA3: meta["gym.base_sha3"]}
	if tc, ok := meta["gym.train_config"]; ok {
		var c struct {
			Task string `json:"task"`
		}
		if err := json.Unmarshal([]byte(tc), &c); err != nil {
			return nil, fmt.Errorf("%s: metadata gym.train_config: %w", path, err)
		}
		ck.task = c.Task
	}
	return ck, nil
}

// evalFromDelta rebuilds the adapter carried by a signed LoRA delta (tensors
// lora.<module>.<A|B>.weight, lora_alpha in the metadata) for a model of
// shape mc.
func evalFromDelta(ctx context.Context, path string, raw []byte, mc model.Config) (*evalCheckpoint, error) {
	d, err := delta.Read(ctx, bytes.NewReader(raw), delta.Limits{MaxTotalBytes: maxCheckpointFile})
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
