package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ipfs/go-cid"
	"github.com/spf13/pflag"
	"github.com/zooai/gym/artifact/basecache"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/dataset"
	"github.com/zooai/gym/model/reward"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/protocol/jobspec"
)

// dataFlags are the flags that name where prompts come from outside a job
// (gym eval, gym rollout): a built-in task, or a dataset file or directory
// with the mapping and reward a job file would give (docs/datasets.md).
type dataFlags struct {
	dataset    string // a built-in task's name or a path
	data       jobspec.Data
	rewardJSON string
}

// defaultAnswerField is --answer-field's default.
const defaultAnswerField = "answer"

// mappingGiven says whether a mapping flag was set (a built-in task takes
// none).
func (d *dataFlags) mappingGiven() bool { return d.data != (jobspec.Data{Answer: defaultAnswerField}) }

// bind adds the flags; usage says what --dataset takes.
func (d *dataFlags) bind(f *pflag.FlagSet, usage string) {
	f.StringVar(&d.dataset, "dataset", d.dataset, usage)
	f.StringVar(&d.data.Prompt, "prompt-field", "", "--dataset: the field holding the prompt (or give --template)")
	f.StringVar(&d.data.Template, "template", "", `--dataset: the prompt template, {field} substituted, e.g. "^{question}="`)
	f.StringVar(&d.data.Answer, "answer-field", defaultAnswerField, "--dataset: the field holding the reference answer")
	f.StringVar(&d.data.Extract, "extract", "", "--dataset: numeric keeps only the answer's final number (after ####, in \\boxed{}, or the last)")
	f.StringVar(&d.data.Split, "split", "", "--dataset: the training split (default train)")
	f.StringVar(&d.data.HeldOut, "held-out", "", "--dataset: the held-out split, e.g. test (default: --hold-out-bp of the training split)")
	f.IntVar(&d.data.HoldOutBP, "hold-out-bp", 0, "--dataset: basis points of the training split held out when there is no --held-out (default 1000)")
	f.StringVar(&d.rewardJSON, "reward", "", `the reward as JSON, as a job file's reward list, e.g. '[{"verifier":"numeric","weight":1},{"verifier":"format","pattern":"^[0-9]+$","weight":0.2}]' (default: partial credit on a task, exact match on a dataset)`)
}

// dataSource is what dataFlags resolve to.
type dataSource struct {
	name   string // the task's name, or the dataset's CID
	task   task.Task
	data   *task.Data // rows of a dataset; nil for a task
	scorer reward.Scorer
}

// resolve resolves --dataset: a built-in task's name, or a dataset file
// or directory (staged under tmp and named by its CID), with the reward.
func (d *dataFlags) resolve(ctx context.Context, tmp string) (*dataSource, error) {
	return d.resolveNamed(ctx, d.dataset, tmp)
}

// resolveNamed is resolve for an explicit name (a task or a path) in
// place of --dataset: gym eval's default is the checkpoint's task.
func (d *dataFlags) resolveNamed(ctx context.Context, name, tmp string) (*dataSource, error) {
	rewards, err := parseRewardJSON(d.rewardJSON)
	if err != nil {
		return nil, err
	}
	if t, err := task.Lookup(name); err == nil {
		if d.mappingGiven() {
			return nil, usageError{errors.New("--prompt-field, --template, --extract, --split, --held-out and --hold-out-bp map a dataset file; " + name + " is a built-in task")}
		}
		src := &dataSource{name: name, task: t}
		if rewards != "" {
			rs, err := (jobspec.Spec{Dataset: name, Reward: rewards}).RewardSet()
			if err != nil {
				return nil, usageError{fmt.Errorf("--reward: %w", err)}
			}
			src.scorer = rs
		}
		return src, nil
	}
	if _, err := os.Stat(name); err != nil {
		return nil, usageError{fmt.Errorf("--dataset %s: neither a built-in task (%s) nor a file or directory: %w", name, strings.Join(task.Names(), ", "), err)}
	}
	data, err := mappingWithDefaults(d.data)
	if err != nil {
		return nil, usageError{err}
	}
	st, err := stageDataset(ctx, name, data, tmp)
	if err != nil {
		return nil, err
	}
	rs, err := (jobspec.Spec{Dataset: st.root.String(), Data: data, Reward: rewards}).RewardSet()
	if err != nil {
		return nil, usageError{fmt.Errorf("--reward: %w", err)}
	}
	return &dataSource{name: st.root.String(), data: st.rows, scorer: rs}, nil
}

// parseRewardJSON reads --reward (a job file's reward list as JSON; ""
// for the default) and checks it.
func parseRewardJSON(js string) (jobspec.Rewards, error) {
	if js == "" {
		return "", nil
	}
	var r jobspec.Rewards
	if err := r.UnmarshalJSON([]byte(js)); err != nil {
		return "", usageError{fmt.Errorf("--reward: want a JSON list of verifiers: %w", err)}
	}
	terms, err := r.Terms()
	if err == nil {
		_, err = reward.New(terms)
	}
	if err != nil {
		return "", usageError{fmt.Errorf("--reward: %w", err)}
	}
	return r, nil
}

// mappingWithDefaults is a dataset mapping from flags with the default
// hold-out (1000 basis points of the training split when no held-out
// split is named), checked.
func mappingWithDefaults(data jobspec.Data) (jobspec.Data, error) {
	if data.HeldOut == "" && data.HoldOutBP == 0 {
		data.HoldOutBP = 1000
	}
	if err := data.Config().Validate(); err != nil {
		return data, fmt.Errorf("--dataset: %w", err)
	}
	return data, nil
}

// stagedDataset is a dataset file or directory made ready to publish.
type stagedDataset struct {
	dir  string     // absolute; in the datasets layout
	root cid.Cid    // what a job names
	rows *task.Data // read with the mapping
}

// stageDataset stages path under tmp (a single file becomes the train
// split of a directory), reads it with the mapping (one that does not fit
// the data is refused here, before anything starts) and names it by CID.
func stageDataset(ctx context.Context, path string, data jobspec.Data, tmp string) (stagedDataset, error) {
	dir, err := dataset.Stage(path, tmp)
	if err != nil {
		return stagedDataset{}, fmt.Errorf("--dataset: %w", err)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return stagedDataset{}, err
	}
	rows, err := dataset.Load(dir, data.Config())
	if err != nil {
		return stagedDataset{}, fmt.Errorf("--dataset %s: %w", path, err)
	}
	root, err := basecache.DirCID(ctx, dir)
	if err != nil {
		return stagedDataset{}, fmt.Errorf("--dataset %s: %w", path, err)
	}
	return stagedDataset{dir: dir, root: root, rows: rows}, nil
}

// renderChat renders the rows whose prompt is a conversation with base's
// chat template (as a job's plan does: jobconf.FromSpecData).
func (s *dataSource) renderChat(base *basemodel.Base) error {
	if s.data == nil || !s.data.Chat() {
		return nil
	}
	if err := s.data.RenderChat(base.RenderChat); err != nil {
		return fmt.Errorf("--dataset: %w", err)
	}
	return nil
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
