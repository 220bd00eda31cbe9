package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
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
	"github.com/zooai/gym/internal/plot"
	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/peft"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/model/trainer"
	"github.com/zooai/gym/protocol/delta"
)

// trainOptions are gym train's flags beyond the training config itself.
type trainOptions struct {
	out, keyPath, configPath, modelDir string
	json                               bool
	threads, evalEvery                 int
	worker                             uint64
}

func newTrain() *cobra.Command {
	var o trainOptions
	cfg := trainer.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "train [--task NAME] [--steps N] [--group-size G] [--seed S] [--out DIR] [--json]",
		Short: "Train a LoRA adapter with GSPO on a built-in task, on this machine",
		Long: `train runs GSPO on one node: it starts from the built-in base model (a small
Llama-family model shipped with gym) or the Hugging Face model directory of
--model, samples group-size completions per prompt,
rewards them by checking the answers, and trains a LoRA adapter. It shows
a progress bar with the live reward (or, with --json, prints one JSON object
per step and a final summary) and writes to DIR:

  adapter.delta        the adapter as a signed delta (key: --key, else DIR/node.key,
                       made if missing)
  checkpoint/          the adapter in the Hugging Face PEFT layout
  reward.png           sample reward and held-out accuracy per step

Tasks: ` + strings.Join(task.Names(), ", ") + `. Runs are deterministic: the same seed and
config give the same adapter (adapter_sha3) on any number of threads.
--config FILE reads a JSON object with the GSPOConfig keys
(importance_sampling_level, beta, group_size, lora_rank, learning_rate, ...);
flags given explicitly override it. use_4bit is accepted and has no effect
here: gym train runs the Go engine, which keeps the base in its own dtype
and computes in float32; 4-bit NF4 is the torch backend's (gym worker
--backend torch on CUDA, or gym up --backend torch --use-4bit).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.configPath != "" {
				raw, err := os.ReadFile(o.configPath)
				if err != nil {
					return err
				}
				fileCfg := trainer.DefaultConfig()
				dec := json.NewDecoder(bytes.NewReader(raw))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&fileCfg); err != nil {
					return usageError{fmt.Errorf("--config %s: %w", o.configPath, err)}
				}
				// Flags set on the command line win over the file.
				flagCfg := cfg
				cfg = fileCfg
				for _, name := range []string{"task", "steps", "group-size", "seed", "level", "beta", "lr"} {
					if cmd.Flags().Changed(name) {
						applyTrainFlag(&cfg, flagCfg, name)
					}
				}
			}
			if o.evalEvery < 1 {
				return usageError{errors.New("--eval-every must be >= 1")}
			}
			return runTrain(cmd.Context(), cfg, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Task, "task", cfg.Task, "task: "+strings.Join(task.Names(), ", "))
	f.IntVar(&cfg.Steps, "steps", cfg.Steps, "optimiser steps")
	f.IntVar(&cfg.GroupSize, "group-size", cfg.GroupSize, "completions per prompt (G)")
	f.IntVar(&cfg.PromptsPerStep, "prompts", cfg.PromptsPerStep, "prompts per step")
	f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "job seed (data, sampling, adapter initialisation)")
	f.StringVar(&cfg.ImportanceSamplingLevel, "level", cfg.ImportanceSamplingLevel, "importance sampling level: sequence (GSPO) or token (GRPO)")
	f.Float64Var(&cfg.Beta, "beta", cfg.Beta, "KL weight to the base model")
	f.Float64Var(&cfg.LearningRate, "lr", cfg.LearningRate, "learning rate")
	f.StringVar(&o.out, "out", "gym-train", "output directory")
	f.BoolVar(&o.json, "json", false, "print one JSON object per step and a final summary")
	f.StringVar(&o.keyPath, "key", "", "node key signing the delta (default DIR/node.key, made if missing)")
	f.StringVar(&o.configPath, "config", "", "JSON file with training config keys")
	f.StringVar(&o.modelDir, "model", "", "base model: a Hugging Face model directory (default: the built-in base model)")
	f.IntVar(&o.threads, "threads", runtime.GOMAXPROCS(0), "goroutines for matrix products (results do not depend on it)")
	f.IntVar(&o.evalEvery, "eval-every", 10, "held-out evaluation every N steps")
	f.Uint64Var(&o.worker, "worker", 0, "worker index (selects this worker's data)")
	return cmd
}

// applyTrainFlag copies the field behind flag name from src to dst.
func applyTrainFlag(dst *trainer.Config, src trainer.Config, name string) {
	switch name {
	case "task":
		dst.Task = src.Task
	case "steps":
		dst.Steps = src.Steps
	case "group-size":
		dst.GroupSize = src.GroupSize
	case "prompts":
		dst.PromptsPerStep = src.PromptsPerStep
	case "seed":
		dst.Seed = src.Seed
	case "level":
		dst.ImportanceSamplingLevel = src.ImportanceSamplingLevel
	case "beta":
		dst.Beta = src.Beta
	case "lr":
		dst.LearningRate = src.LearningRate
	}
}

// trainStepLine is the --json object printed after every step.
type trainStepLine struct {
	trainer.StepStats
	TokensPerS   float64  `json:"tokens_per_s"`
	StepSeconds  float64  `json:"step_s"`
	EvalAccuracy *float64 `json:"eval_accuracy,omitempty"`
}

// trainSummary is the final --json object.
type trainSummary struct {
	EvalBefore    float64         `json:"eval_before"`
	EvalAfter     float64         `json:"eval_after"`
	RewardBefore  float64         `json:"eval_reward_before"`
	RewardAfter   float64         `json:"eval_reward_after"`
	AdapterSHA3   string          `json:"adapter_sha3"`
	Steps         int             `json:"steps"`
	TrainSeconds  float64         `json:"train_s"` // wall time of the steps, evaluation excluded
	TotalSeconds  float64         `json:"total_s"`
	TokensPerS    float64         `json:"tokens_per_s"`
	Threads       int             `json:"threads"`
	BaseSHA3      string          `json:"base_sha3"`
	Files         []string        `json:"files"`
	Notes         []string        `json:"notes,omitempty"`
	Config        trainer.Config  `json:"config"`
	AdapterParams int             `json:"adapter_params"`
	Curve         []trainEvalMark `json:"eval_curve"`
}

type trainEvalMark struct {
	Step     int     `json:"step"`
	Accuracy float64 `json:"accuracy"`
	Seconds  float64 `json:"train_s"`
}

func runTrain(ctx context.Context, cfg trainer.Config, o trainOptions, stdout, stderr io.Writer) error {
	start := time.Now()
	base, err := loadBase(o.modelDir)
	if err != nil {
		return err
	}
	baseHash := base.SHA3
	if err := cfg.Validate(base.Weights.Cfg, base.Tokenizer); err != nil {
		return usageError{err}
	}
	notes := cfg.Notes()
	for _, n := range notes {
		fmt.Fprintln(stderr, "gym train: note:", n)
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	key, err := trainKey(o, stderr)
	if err != nil {
		return err
	}
	tr, err := trainer.New(base.Weights, base.Tokenizer, cfg, o.worker, o.threads)
	if err != nil {
		return err
	}
	before, err := tr.Evaluate()
	if err != nil {
		return err
	}
	sum := trainSummary{EvalBefore: before.Accuracy, RewardBefore: before.Reward, Steps: cfg.Steps,
		Threads: o.threads, BaseSHA3: baseHash, Notes: notes, Config: cfg, AdapterParams: tr.Adapter().NumParams()}
	sum.Curve = append(sum.Curve, trainEvalMark{Step: 0, Accuracy: before.Accuracy})
	var rewardX, rewardY []float64
	enc := json.NewEncoder(stdout)
	var trainDur time.Duration
	var tokens int
	var last trainer.StepStats
	acc := before.Accuracy
	for s := 1; s <= cfg.Steps; s++ {
		t0 := time.Now()
		st, err := tr.Step(ctx)
		if err != nil {
			if !o.json {
				fmt.Fprintln(stderr)
			}
			return err
		}
		dt := time.Since(t0)
		trainDur += dt
		tokens += st.GenTokens + st.TrainTokens
		last = st
		line := trainStepLine{StepStats: st, StepSeconds: dt.Seconds(), TokensPerS: float64(st.GenTokens+st.TrainTokens) / dt.Seconds()}
		rewardX, rewardY = append(rewardX, float64(s)), append(rewardY, st.RewardMean)
		if s%o.evalEvery == 0 || s == cfg.Steps {
			sc, err := tr.Evaluate()
			if err != nil {
				return err
			}
			acc = sc.Accuracy
			line.EvalAccuracy = &acc
			sum.Curve = append(sum.Curve, trainEvalMark{Step: s, Accuracy: acc, Seconds: trainDur.Seconds()})
			if s == cfg.Steps {
				sum.EvalAfter, sum.RewardAfter = sc.Accuracy, sc.Reward
			}
		}
		if o.json {
			if err := enc.Encode(line); err != nil {
				return err
			}
		} else {
			trainProgress(stderr, s, cfg.Steps, st.RewardMean, acc, trainDur)
		}
	}
	if !o.json {
		fmt.Fprintln(stderr)
	}
	sum.TrainSeconds, sum.TokensPerS = trainDur.Seconds(), float64(tokens)/trainDur.Seconds()
	ad := tr.Adapter()
	h := llama.Digest(ad.Views())
	sum.AdapterSHA3 = hex.EncodeToString(h[:])

	files, err := trainWriteOutputs(ctx, o.out, key, ad, cfg, last, base, sum.AdapterSHA3, rewardX, rewardY, sum.Curve)
	if err != nil {
		return err
	}
	sum.Files = files
	sum.TotalSeconds = time.Since(start).Seconds()
	if o.json {
		return enc.Encode(sum)
	}
	fmt.Fprintf(stdout, "held-out accuracy %.1f%% -> %.1f%% (%s, %d steps, %.1f s training, %.0f tokens/s, %d threads)\n",
		100*sum.EvalBefore, 100*sum.EvalAfter, cfg.Task, cfg.Steps, sum.TrainSeconds, sum.TokensPerS, o.threads)
	fmt.Fprintf(stdout, "adapter_sha3 %s\n", sum.AdapterSHA3)
	for _, f := range files {
		fmt.Fprintln(stdout, "wrote", f)
	}
	return nil
}

// loadBase is the base model of --model DIR: a Hugging Face model
// directory (basemodel.Open), or the built-in one when dir is empty.
func loadBase(dir string) (*basemodel.Base, error) {
	if dir == "" {
		return basemodel.Builtin()
	}
	b, err := basemodel.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("--model %s: %w", dir, err)
	}
	return b, nil
}

// trainKey loads --key, or DIR/node.key, making the latter if it is missing.
func trainKey(o trainOptions, stderr io.Writer) (ed25519.PrivateKey, error) {
	if o.keyPath != "" {
		return nodekey.Load(o.keyPath)
	}
	p := filepath.Join(o.out, "node.key")
	key, err := nodekey.Load(p)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	if key, err = nodekey.Generate(nil); err != nil {
		return nil, err
	}
	if err := nodekey.Save(p, key, false); err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "gym train: made node key %s (public %s)\n", p, nodekey.PublicHex(key))
	return key, nil
}

func trainProgress(w io.Writer, step, total int, reward, acc float64, d time.Duration) {
	const width = 30
	done := width * step / total
	bar := strings.Repeat("█", done) + strings.Repeat("░", width-done)
	fmt.Fprintf(w, "\r%s %3d/%d  reward %.3f  held-out %.1f%%  %5.1fs", bar, step, total, reward, 100*acc, d.Seconds())
}

func trainWriteOutputs(ctx context.Context, dir string, priv ed25519.PrivateKey, ad *llama.Adapter, cfg trainer.Config, last trainer.StepStats,
	base *basemodel.Base, adapterHash string, rx, ry []float64, curve []trainEvalMark) ([]string, error) {
	var files []string
	write := func(name string, data []byte) error {
		p := filepath.Join(dir, name)
		files = append(files, p)
		return os.WriteFile(p, data, 0o644)
	}
	baseHash := base.SHA3
	ckpt := filepath.Join(dir, "checkpoint")
	if err := os.RemoveAll(ckpt); err != nil {
		return nil, err
	}
	card := peft.Card{BaseModel: base.Name, BaseSHA3: baseHash, Job: "local-" + cfg.Task, Epoch: 1,
		Extra: map[string]string{peft.ExtraTask: cfg.Task, "seed": fmt.Sprint(cfg.Seed)}}
	if err := peft.Write(ckpt, ad, card); err != nil {
		return nil, err
	}
	files = append(files, ckpt)

	var tensors []delta.Tensor
	for _, t := range ad.Views() {
		shape := make([]uint64, len(t.Shape))
		for i, d := range t.Shape {
			shape[i] = uint64(d)
		}
		tensors = append(tensors, delta.Tensor{Name: t.Name, DType: delta.FP32, Shape: shape, Data: llama.Float32Bytes(t.Data)})
	}
	meta := delta.NewMetadata(delta.MetadataFields{
		Job: "local-" + cfg.Task, Step: uint64(last.Step), Node: nodekey.PublicHex(priv), Sequence: uint64(last.Step),
		BaseCheckpoint: baseHash, ClaimedLoss: last.Loss, Samples: uint64(cfg.Steps * cfg.PromptsPerStep * cfg.GroupSize),
		Time: time.Now(),
	})
	for k, v := range map[string]any{"task": cfg.Task, "adapter_sha3": adapterHash, "importance_sampling_level": cfg.ImportanceSamplingLevel,
		"lora_rank": cfg.LoRARank, "lora_alpha": cfg.LoRAAlpha, "seed": cfg.Seed} {
		if err := meta.Set(k, v); err != nil {
			return nil, err
		}
	}
	var dbuf bytes.Buffer
	if _, err := delta.Write(ctx, &dbuf, priv, tensors, delta.WriteOptions{Compression: delta.Zstd, Flags: delta.FlagLoRA, Metadata: meta}); err != nil {
		return nil, err
	}
	if err := write("adapter.delta", dbuf.Bytes()); err != nil {
		return nil, err
	}

	ax, ay := make([]float64, len(curve)), make([]float64, len(curve))
	for i, m := range curve {
		ax[i], ay[i] = float64(m.Step), m.Accuracy
	}
	chart := plot.Chart{Title: fmt.Sprintf("gym train %s: %s level, G=%d, seed %d", cfg.Task, cfg.ImportanceSamplingLevel, cfg.GroupSize, cfg.Seed),
		YMin: 0, YMax: 1, Series: []plot.Series{
			{Name: "sample reward", X: rx, Y: ry, Color: plot.Palette[0]},
			{Name: "held-out accuracy", X: ax, Y: ay, Color: plot.Palette[1]},
		}}
	var img bytes.Buffer
	if err := chart.WritePNG(&img); err != nil {
		return nil, err
	}
	if err := write("reward.png", img.Bytes()); err != nil {
		return nil, err
	}
	return files, nil
}
