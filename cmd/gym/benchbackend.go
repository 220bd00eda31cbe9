package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/zooai/gym/model/trainer"
	"github.com/zooai/gym/node/backend"
	"github.com/zooai/gym/node/backend/torch"
)

// benchBackendResult is what gym bench backend measures: seconds per
// full GSPO step (sample a group per prompt, score, train) for each
// backend, medians over the timed steps.
type benchBackendResult struct {
	Model      string  `json:"model"`
	Params     int64   `json:"params"`
	Threads    int     `json:"threads"`
	Steps      int     `json:"steps"`
	Prompts    int     `json:"prompts"`
	Group      int     `json:"group"`
	GoStep     float64 `json:"go_step_seconds"`
	TorchStep  float64 `json:"torch_step_seconds"`
	TorchGen   float64 `json:"torch_generate_seconds"` // in the process
	TorchTrain float64 `json:"torch_train_seconds"`    // in the process
	Seam       float64 `json:"seam_seconds"`           // neither engine: calls, files, checks, scoring
	SeamShare  float64 `json:"seam_share"`             // Seam / TorchStep
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func newBenchBackend() *cobra.Command {
	var modelDir, python, device, dtype string
	var steps, threads, prompts, group int
	var asJSON, skipGo bool
	cmd := &cobra.Command{
		Use:   "backend [--model DIR] [--steps 5] [--threads N] [--prompts 16] [--group 8] [--python PY] [--json]",
		Short: "One GSPO step in the go and the torch backend, and the seam's overhead",
		Long: `bench backend runs full GSPO steps (sample --group completions for each of
--prompts prompts, score them, the reference pass and the optimiser passes of
the built-in profile) on the same base model (the built-in one, or --model
DIR) with the same threads, first in the go backend, then in the torch
backend (python -m gym_protocol.backend with --python, $GYM_PYTHON or
python3), and reports the median seconds per step of each, the torch
process's own time sampling and training, and the seam's overhead: the
torch step's time spent in neither engine (the gRPC calls, the traces and
adapter files written, read and checked, and scoring in Go). The first step
of each backend is a warm-up and is not timed.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if steps < 1 || threads < 1 || prompts < 1 || group < 2 {
				return usageError{fmt.Errorf("--steps, --threads, --prompts must be at least 1 and --group at least 2")}
			}
			ctx := cmd.Context()
			base, err := loadBase(modelDir)
			if err != nil {
				return err
			}
			c := trainer.DefaultConfig()
			c.PromptsPerStep, c.GroupSize, c.Steps, c.EvalSize = prompts, group, steps+1, 20
			a, err := trainer.InitialAdapter(base.Weights.Cfg, c)
			if err != nil {
				return err
			}
			job := backend.Job{Base: base, Config: c, Threads: threads, Adapter: a}
			res := benchBackendResult{Model: base.Name, Params: base.Weights.Cfg.NumParams(), Threads: threads, Steps: steps, Prompts: prompts, Group: group}
			progress := cmd.ErrOrStderr()
			run := func(tr backend.Trainer, each func()) ([]float64, error) {
				var ts []float64
				for i := 0; i <= steps; i++ {
					t0 := time.Now()
					if _, err := tr.Step(ctx); err != nil {
						return nil, err
					}
					if i > 0 {
						ts = append(ts, time.Since(t0).Seconds())
						if each != nil {
							each()
						}
					}
					fmt.Fprintf(progress, ".")
				}
				return ts, nil
			}
			if !skipGo {
				fmt.Fprintf(progress, "go backend ")
				gt, err := backend.GoBackend{}.Start(ctx, job)
				if err != nil {
					return err
				}
				gts, err := run(gt, nil)
				if err != nil {
					return err
				}
				res.GoStep = median(gts)
			}
			fmt.Fprintf(progress, "\ntorch backend ")
			tb, err := torch.New(ctx, torch.Options{Python: python, Device: device, DType: dtype, BaseDir: modelDir})
			if err != nil {
				return err
			}
			defer tb.Close()
			tt, err := tb.StartTrainer(ctx, job)
			if err != nil {
				return err
			}
			var gen, train, seam []float64
			tts, err := run(tt, func() {
				tm := tt.LastTiming()
				gen, train, seam = append(gen, tm.Generate), append(train, tm.Train), append(seam, tm.Seam())
			})
			if err != nil {
				return err
			}
			fmt.Fprintln(progress)
			res.TorchStep, res.TorchGen, res.TorchTrain, res.Seam = median(tts), median(gen), median(train), median(seam)
			res.SeamShare = res.Seam / res.TorchStep
			out := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(out).Encode(res)
			}
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "model %s (%d parameters), %d threads, %d prompts × %d, median of %d steps\n", res.Model, res.Params, threads, prompts, group, steps)
			if !skipGo {
				fmt.Fprintf(w, "go backend\t%.3f s/step\n", res.GoStep)
			}
			fmt.Fprintf(w, "torch backend\t%.3f s/step\t(sampling %.3f s, training %.3f s in the process)\n", res.TorchStep, res.TorchGen, res.TorchTrain)
			fmt.Fprintf(w, "seam overhead\t%.3f s/step\t(%.1f%% of the torch step)\n", res.Seam, 100*res.SeamShare)
			return w.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&modelDir, "model", "", "base model: a Hugging Face model directory (default: the built-in base model)")
	f.IntVar(&steps, "steps", 5, "timed steps per backend (after one warm-up step)")
	f.IntVar(&threads, "threads", runtime.NumCPU(), "threads of either engine")
	f.IntVar(&prompts, "prompts", 16, "prompts per step")
	f.IntVar(&group, "group", 8, "completions per prompt")
	f.StringVar(&python, "python", "", "the torch backend's Python interpreter (default $GYM_PYTHON, else python3)")
	f.StringVar(&device, "torch-device", "cpu", "cpu, cuda or cuda:N")
	f.StringVar(&dtype, "torch-dtype", "float32", "float32 or bfloat16")
	f.BoolVar(&asJSON, "json", false, "print the result as one JSON object")
	f.BoolVar(&skipGo, "skip-go", false, "measure the torch backend only (a model too large for the go engine's patience)")
	return cmd
}
