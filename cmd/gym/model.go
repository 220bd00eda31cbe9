package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"

	"github.com/spf13/cobra"
	"github.com/zooai/gym/model/modelprobe"
)

func newModel() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "model",
		Short: "What the Go engine computes on a Hugging Face model directory",
	}
	cmd.AddCommand(newModelLogits())
	return cmd
}

func newModelLogits() *cobra.Command {
	var o modelprobe.Options
	var asJSON, compare bool
	var python string
	var tolerance float64
	cmd := &cobra.Command{
		Use:   "logits --model DIR [--adapter DIR] --prompt TEXT [--top K] [--json] [--compare-transformers [--python PY] [--tolerance 1e-3]]",
		Short: "Print the next-token top K the engine computes for a prompt, and its difference from transformers",
		Long: `model logits loads DIR (config.json, the safetensors weights, tokenizer.json)
with the Go engine, and a PEFT LoRA adapter with --adapter, encodes the
prompt with DIR's tokenizer (special tokens added as transformers'
tokenizer adds them) and prints the next token's top K: ids, text,
logits and probabilities (for a Mixture-of-Experts model also the experts
the last position was routed to in every sparse layer).

--compare-transformers runs the same token ids through transformers
(AutoModelForCausalLM in float32, PeftModel with --adapter) with --python
($GYM_PYTHON, else python3) and prints the largest |difference| of the
logits over every position and id; above --tolerance the command fails.
This is the check to run before trusting a checkpoint with the engine.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Model == "" || o.Prompt == "" {
				return usageError{fmt.Errorf("--model and --prompt are required")}
			}
			r, err := modelprobe.Run(o)
			if err != nil {
				return err
			}
			if compare {
				if python == "" {
					python = os.Getenv("GYM_PYTHON")
				}
				if python == "" {
					python = "python3"
				}
				if err := modelprobe.Compare(cmd.Context(), python, r); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(r); err != nil {
					return err
				}
			} else {
				r.WriteText(out)
			}
			if c := r.Compare; c != nil && !(c.MaxAbsDiff <= tolerance) {
				return fmt.Errorf("the engine's logits differ from transformers' by %.3g > --tolerance %g", c.MaxAbsDiff, tolerance)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Model, "model", "", "a Hugging Face model directory")
	f.StringVar(&o.Adapter, "adapter", "", "a PEFT LoRA adapter directory")
	f.StringVar(&o.Prompt, "prompt", "", "the prompt text")
	f.IntVar(&o.TopK, "top", 10, "how many next tokens to print")
	f.IntVar(&o.Threads, "threads", runtime.NumCPU(), "the engine's threads")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.BoolVar(&compare, "compare-transformers", false, "compare with transformers' logits on the same ids")
	f.StringVar(&python, "python", "", "the Python with transformers (default $GYM_PYTHON, else python3)")
	f.Float64Var(&tolerance, "tolerance", 1e-3, "with --compare-transformers, fail above this max |Δlogit|")
	return cmd
}
