// Command mkbase regenerates the shipped base model: it runs
// basemodel.Recipe with package sft and writes the weights as safetensors,
// printing the loss and the held-out greedy accuracy of every task as it goes.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"time"

	"github.com/zooai/gym/basemodel"
	"github.com/zooai/gym/model"
	"github.com/zooai/gym/rollout"
	"github.com/zooai/gym/sft"
	"github.com/zooai/gym/task"
)

func main() {
	out := flag.String("out", "base.safetensors", "output file")
	steps := flag.Int("steps", 0, "override the recipe's step count (for exploring; the result will not load)")
	bugFrac := flag.Float64("bug-frac", -1, "override the recipe's bug fraction (for exploring; the result will not load)")
	every := flag.Int("eval-every", 100, "evaluate every N steps")
	threads := flag.Int("threads", runtime.GOMAXPROCS(0), "goroutines for matrix products")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *out, *steps, *bugFrac, *every, *threads); err != nil {
		fmt.Fprintln(os.Stderr, "mkbase:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out string, steps int, bugFrac float64, every, threads int) error {
	rc := basemodel.Recipe()
	if steps > 0 {
		rc.Steps = steps
	}
	if bugFrac >= 0 {
		rc.BugFrac = bugFrac
	}
	start := time.Now()
	var splits []*task.Split
	for _, n := range rc.Tasks {
		t, err := task.Lookup(n)
		if err != nil {
			return err
		}
		splits = append(splits, task.NewSplit(t, sft.EvalSize))
	}
	evaluate := func(w *model.Weights) string {
		md := &model.Model{W: w, Threads: threads}
		line := ""
		for _, s := range splits {
			sc, err := rollout.Evaluate(md, s.Eval)
			if err != nil {
				return err.Error()
			}
			line += fmt.Sprintf("  %s exact %.3f reward %.3f", s.Task.Name(), sc.Accuracy, sc.Reward)
		}
		return line
	}
	w, err := sft.Run(ctx, rc, threads, func(p sft.Progress) {
		if p.Step%every == 0 || p.Step == rc.Steps {
			fmt.Printf("step %5d loss %.4f %s  %.0fs\n", p.Step, p.Loss, evaluate(p.Weights), time.Since(start).Seconds())
		}
	})
	if err != nil {
		return err
	}
	recipe, _ := json.Marshal(rc)
	var buf bytes.Buffer
	if err := model.WriteWeights(&buf, w, map[string]string{
		basemodel.MetaRecipe: string(recipe), basemodel.MetaRecipeHash: basemodel.RecipeHash(rc),
	}); err != nil {
		return err
	}
	fmt.Printf("wrote %s (%d bytes, %d params) in %.0fs\n", out, buf.Len(), w.NumParams(), time.Since(start).Seconds())
	return os.WriteFile(out, buf.Bytes(), 0o644)
}
