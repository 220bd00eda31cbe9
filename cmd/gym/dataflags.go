package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
	"github.com/zooai/gym/basecache"
	"github.com/zooai/gym/dataset"
	"github.com/zooai/gym/jobspec"
	"github.com/zooai/gym/reward"
	"github.com/zooai/gym/task"
)

// dataFlags are the flags that name where prompts come from outside a job
// (gym eval, gym rollout): a built-in task, or a dataset file or directory
// with the mapping and reward a job file would give (docs/datasets.md).
type dataFlags struct {
	dataset    string // a built-in task's name or a path
	data       jobspec.Data
	rewardJSON string
}

func (d *dataFlags) bind(f *pflag.FlagSet) {
	f.StringVar(&d.dataset, "dataset", d.dataset, "prompts: a built-in task ("+strings.Join(task.Names(), ", ")+") or a .jsonl/.parquet file or datasets directory")
	f.StringVar(&d.data.Prompt, "prompt-field", "", "--dataset file: the field holding the prompt (or give --template)")
	f.StringVar(&d.data.Template, "template", "", `--dataset file: the prompt template, {field} substituted, e.g. "^{question}="`)
	f.StringVar(&d.data.Answer, "answer-field", "answer", "--dataset file: the field holding the reference answer")
	f.StringVar(&d.data.Extract, "extract", "", "--dataset file: numeric keeps only the answer's final number (after ####, in \\boxed{}, or the last)")
	f.StringVar(&d.data.Split, "split", "", "--dataset file: the training split (default train)")
	f.StringVar(&d.data.HeldOut, "held-out", "", "--dataset file: the held-out split, e.g. test (default: --hold-out-bp of the training split)")
	f.IntVar(&d.data.HoldOutBP, "hold-out-bp", 0, "--dataset file: basis points of the training split held out when there is no --held-out (default 1000, as gym up)")
	f.StringVar(&d.rewardJSON, "reward", "", `the reward as JSON, as a job file's reward list (default: partial credit on a task, exact match on a dataset)`)
}

// dataSource is what dataFlags resolve to.
type dataSource struct {
	name   string // the task's name, or the dataset's CID
	task   task.Task
	data   *task.Data // rows of a dataset; nil for a task
	scorer reward.Scorer
}

// resolve reads the dataset (a file or directory is staged under tmp and
// named by its CID) and builds the reward; a task needs no mapping.
func (d *dataFlags) resolve(ctx context.Context, tmp string) (*dataSource, error) {
	if t, err := task.Lookup(d.dataset); err == nil {
		if d.data != (jobspec.Data{Answer: "answer"}) {
			return nil, usageError{errors.New("--prompt-field, --template, --extract, --split, --held-out and --hold-out-bp map a dataset file; --dataset " + d.dataset + " is a built-in task")}
		}
		src := &dataSource{name: d.dataset, task: t}
		if d.rewardJSON != "" {
			spec := jobspec.Spec{Dataset: d.dataset}
			if err := spec.Reward.UnmarshalJSON([]byte(d.rewardJSON)); err != nil {
				return nil, usageError{fmt.Errorf("--reward: want a JSON list of verifiers: %w", err)}
			}
			rs, err := spec.RewardSet()
			if err != nil {
				return nil, usageError{fmt.Errorf("--reward: %w", err)}
			}
			src.scorer = rs
		}
		return src, nil
	}
	if _, err := os.Stat(d.dataset); err != nil {
		return nil, usageError{fmt.Errorf("--dataset %s: neither a built-in task (%s) nor a file or directory: %w", d.dataset, strings.Join(task.Names(), ", "), err)}
	}
	data := d.data
	if data.HeldOut == "" && data.HoldOutBP == 0 {
		data.HoldOutBP = 1000
	}
	if err := data.Config().Validate(); err != nil {
		return nil, usageError{fmt.Errorf("--dataset: %w", err)}
	}
	dir, err := dataset.Stage(d.dataset, tmp)
	if err != nil {
		return nil, fmt.Errorf("--dataset: %w", err)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	rows, err := dataset.Load(dir, data.Config())
	if err != nil {
		return nil, fmt.Errorf("--dataset %s: %w", d.dataset, err)
	}
	root, err := basecache.DirCID(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("--dataset %s: %w", d.dataset, err)
	}
	spec := jobspec.Spec{Dataset: root.String(), Data: data}
	if d.rewardJSON != "" {
		if err := spec.Reward.UnmarshalJSON([]byte(d.rewardJSON)); err != nil {
			return nil, usageError{fmt.Errorf("--reward: want a JSON list of verifiers: %w", err)}
		}
	}
	rs, err := spec.RewardSet()
	if err != nil {
		return nil, usageError{fmt.Errorf("--reward: %w", err)}
	}
	return &dataSource{name: root.String(), data: rows, scorer: rs}, nil
}

// heldOut returns the first n held-out problems (all a dataset has when
// fewer).
func (s *dataSource) heldOut(n int) []task.Problem {
	if s.data != nil {
		return task.FromData(s.data, n).Eval
	}
	return task.NewSplit(s.task, n).Eval
}

// train returns n training problems drawn from seed (worker 0, step 0),
// as a job's trainer draws them; evalSize is the task's held-out set that
// training draws avoid.
func (s *dataSource) train(seed uint64, n, evalSize int) []task.Problem {
	if s.data != nil {
		return task.FromData(s.data, evalSize).Batch(seed, 0, 0, n)
	}
	return task.NewSplit(s.task, evalSize).Batch(seed, 0, 0, n)
}
