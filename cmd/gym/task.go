package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/zooai/gym/internal/atomicfile"
	"github.com/zooai/gym/model/task"
)

func newTask() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "task",
		Short: "The built-in tasks: write one out as a dataset",
	}
	cmd.AddCommand(newTaskExport())
	return cmd
}

func newTaskExport() *cobra.Command {
	var train, test int
	var seed uint64
	cmd := &cobra.Command{
		Use:   "export NAME DIR [--train N] [--test N] [--seed S]",
		Short: "Write a built-in task's problems as a JSONL dataset (train and test splits)",
		Long: `task export re-expresses a built-in task (` + strings.Join(task.Names(), ", ") + `) as a dataset in the
Hugging Face datasets layout: DIR/train.jsonl holds --train problems drawn
from --seed, DIR/test.jsonl the task's first --test held-out problems (the
set a job on the built-in task evaluates on), one {"prompt", "answer"}
object a line. A job on it reproduces the task with the task's own reward,
the partial verifier (docs/datasets.md):

  gym up --dataset DIR --prompt-field prompt --held-out test \
         --reward '[{"verifier":"partial","weight":1}]'

DIR is created and must not hold train.jsonl or test.jsonl already.`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := task.Lookup(args[0])
			if err != nil {
				return usageError{err}
			}
			if train < 1 || train > 1_000_000 || test < 1 || test > 5000 {
				return usageError{fmt.Errorf("--train %d, --test %d: want 1 to 1000000 training and 1 to 5000 test problems", train, test)}
			}
			dir := args[1]
			for _, f := range []string{"train.jsonl", "test.jsonl"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
					return fmt.Errorf("%s already holds %s: choose an empty directory", dir, f)
				} else if !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			trainRows, testRows := task.Export(t, train, test, seed)
			for _, split := range []struct {
				name string
				rows []task.Problem
			}{{"train.jsonl", trainRows}, {"test.jsonl", testRows}} {
				if err := atomicfile.Write(filepath.Join(dir, split.name), 0o644, true, func(w io.Writer) error {
					return writeProblems(w, split.rows)
				}); err != nil {
					return err
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %d training and %d test problems of %s (prompt and answer fields)\n", dir, train, test, args[0])
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&train, "train", 3000, "training problems")
	f.IntVar(&test, "test", 500, "held-out problems (the task's own held-out set)")
	f.Uint64Var(&seed, "seed", 0, "seed of the training draws")
	return cmd
}

// writeProblems writes rows as JSON Lines {"prompt": …, "answer": …}.
func writeProblems(w io.Writer, rows []task.Problem) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for _, p := range rows {
		if err := enc.Encode(struct {
			Prompt string `json:"prompt"`
			Answer string `json:"answer"`
		}{p.Prompt, p.Answer}); err != nil {
			return err
		}
	}
	return bw.Flush()
}
