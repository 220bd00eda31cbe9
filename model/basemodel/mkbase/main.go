// Command mkbase regenerates the built-in base model: it runs
// basemodel.Recipe with package sft and writes the Hugging Face directory
// (basemodel.WriteDir), printing the loss and the held-out greedy behaviour
// of every task (exact answers, typical-mistake answers) as it goes, then
// the wall time and the files' sizes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"time"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/basemodel/internal/probe"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/sft"
)

func main() {
	out := flag.String("out", "builtin", "output directory")
	steps := flag.Int("steps", 0, "override the recipe's step count (for exploring; the result will not load as the built-in)")
	bugFrac := flag.Float64("bug-frac", -1, "override the recipe's bug fraction (for exploring; the result will not load as the built-in)")
	lr := flag.Float64("lr", 0, "override the recipe's learning rate (for exploring)")
	batch := flag.Int("batch", 0, "override the recipe's batch (for exploring)")
	every := flag.Int("eval-every", 100, "evaluate every N steps (0: only at the end)")
	threads := flag.Int("threads", runtime.GOMAXPROCS(0), "goroutines for matrix products")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rc := basemodel.Recipe()
	if *lr > 0 {
		rc.LR = *lr
	}
	if *batch > 0 {
		rc.Batch = *batch
	}
	if err := run(ctx, rc, *out, *steps, *bugFrac, *every, *threads); err != nil {
		fmt.Fprintln(os.Stderr, "mkbase:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, rc sft.Config, out string, steps int, bugFrac float64, every, threads int) error {
	if steps > 0 {
		rc.Steps = steps
	}
	if bugFrac >= 0 {
		rc.BugFrac = bugFrac
	}
	tok, err := basemodel.Tokenizer()
	if err != nil {
		return err
	}
	evaluate := func(w *llama.Weights) string {
		line := ""
		for _, n := range rc.Tasks {
			r, err := probe.Measure(w, tok, n, sft.EvalSize, threads)
			if err != nil {
				return err.Error()
			}
			line += "  " + r.String()
		}
		return line
	}
	start := time.Now()
	var train time.Duration
	w, err := sft.Run(ctx, rc, tok, threads, func(p sft.Progress) {
		if (every > 0 && p.Step%every == 0) || p.Step == rc.Steps {
			t := time.Now()
			fmt.Printf("step %5d loss %.4f %s  %.0fs\n", p.Step, p.Loss, evaluate(p.Weights), t.Sub(start).Seconds())
			start = start.Add(time.Since(t)) // evaluation time is not training time
		}
	})
	train = time.Since(start)
	if err != nil {
		return err
	}
	if err := basemodel.WriteDir(out, w, rc); err != nil {
		return err
	}
	fmt.Printf("sft: %d steps in %.0fs (%d threads), %d parameters, recipe %s\n", rc.Steps, train.Seconds(), threads, w.Cfg.NumParams(), basemodel.RecipeHash(rc))
	for _, f := range basemodel.BuiltinFiles {
		st, err := os.Stat(filepath.Join(out, f))
		if err != nil {
			return err
		}
		fmt.Printf("  %-24s %8d bytes\n", f, st.Size())
	}
	return nil
}
