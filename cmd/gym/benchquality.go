package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// qualityOptions are gym bench quality's flags.
type qualityOptions struct {
	seeds         int
	seedList      string
	workers       string
	attack        string
	epochs, steps int
	interval      int
	prompts       int
	gym, out      string
	json, reuse   bool
	upArgs        []string
	variant       []string // --variant: a second row per worker count with these gym up flags
	timeout       time.Duration
	parsedSeeds   []uint64
	parsedWorkers []int
	stepsPerEpoch int
}

// qualityRun is one measured run: gym train (workers 1) or gym up.
type qualityRun struct {
	Workers  int      `json:"workers"`
	Attack   string   `json:"attack,omitempty"`
	Seed     uint64   `json:"seed"`
	Accuracy float64  `json:"accuracy"` // held-out accuracy of the final adapter or checkpoint
	Seconds  float64  `json:"seconds"`  // wall time of the command
	Status   string   `json:"status"`
	Args     []string `json:"args"` // the gym command line
}

// qualityRow is one configuration over the seeds.
type qualityRow struct {
	Name    string       `json:"name"`
	Workers int          `json:"workers"`
	Attack  string       `json:"attack,omitempty"`
	Runs    []qualityRun `json:"runs"`
	Mean    float64      `json:"mean"`
	Std     float64      `json:"std"` // sample standard deviation over the seeds
	Min     float64      `json:"min"`
	Max     float64      `json:"max"`
	Gaps    []float64    `json:"gaps,omitempty"` // points against the single worker of the same seed
	MeanGap float64      `json:"mean_gap"`
	GapStd  float64      `json:"gap_std"`
	// A --variant row: its extra gym up flags and, seed by seed, the points
	// it gains over the row of the same workers without them (the same
	// keys and data: a paired difference).
	Variant     []string  `json:"variant,omitempty"`
	VsBase      []float64 `json:"vs_base,omitempty"`
	MeanVsBase  float64   `json:"mean_vs_base,omitempty"`
	VsBaseStd   float64   `json:"vs_base_std,omitempty"`
	base        int       // index of the row it is compared with
	MeanSeconds float64   `json:"mean_seconds"`
}

// qualityReport is gym bench quality's result.
type qualityReport struct {
	Seeds   []uint64     `json:"seeds"`
	Variant []string     `json:"variant,omitempty"`
	Samples int          `json:"samples"` // completions trained on per configuration: steps × 16 prompts × 8
	UpArgs  []string     `json:"up_args,omitempty"`
	Rows    []qualityRow `json:"rows"`
	Load    [3]float64   `json:"load_average"` // at the end of the run (/proc/loadavg)
}

func newBenchQuality() *cobra.Command {
	o := qualityOptions{seeds: 5, workers: "4,8", epochs: 3, steps: 90, prompts: 16, out: "out/bench-quality", timeout: 30 * time.Minute}
	cmd := &cobra.Command{
		Use:   "quality [--seeds 5] [--workers 4,8] [--attack signflip] [--up-arg=--outer-lr=0] [--json]",
		Short: "Held-out accuracy of one worker against N workers at equal samples, over seeds",
		Long: `bench quality measures what decentralizing costs in accuracy: for every seed
it trains one worker alone (gym train --steps STEPS, --prompts prompts per
step) and N workers (gym up --workers N, --prompts/N prompts per step each,
--epochs epochs of STEPS/epochs steps, gym up's profile: by default
synchronous data parallelism, a sync every step; --interval N passes its
own), the
same number of samples (STEPS × prompts × 8 completions) in every run, and
reads the held-out accuracy (500 problems, greedy) of the final adapter or
checkpoint of record. With --attack KIND it also runs the first N of
--workers with one Byzantine worker mounting that attack (median merge).

It prints per configuration and seed the accuracy, the gap to the single
worker of the same seed in points, and over the seeds the mean, the sample
standard deviation, min and max, and the mean wall time of the command.
--up-arg passes a flag to every gym up (e.g. --up-arg=--outer-lr=0 for the
plain average). --variant adds, for every worker count, runs with more gym
up flags and prints their paired difference with the runs without them:
every gym up run derives its workers' keys from the seed (--key-seed), so
the two runs of a seed train each worker on the same data and the
difference is the setting's, not the data's. Every run's result is kept
in --out/runs/ as JSON; with --reuse a result already there (same command
line) is read instead of run again. Runs are sequential: wall times are those of the machine as loaded.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(); err != nil {
				return usageError{err}
			}
			if o.gym == "" {
				self, err := os.Executable()
				if err != nil {
					return err
				}
				o.gym = self
			}
			rep, err := runBenchQuality(cmd.Context(), o, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if o.json {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			printQuality(cmd.OutOrStdout(), rep)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.seeds, "seeds", o.seeds, "seeds 0..N-1")
	f.StringVar(&o.seedList, "seed-list", "", "comma-separated seeds instead of --seeds")
	f.StringVar(&o.workers, "workers", o.workers, "comma-separated worker counts to compare with one worker (each divides --prompts)")
	f.StringVar(&o.attack, "attack", "", "also run the first --workers count with one Byzantine worker mounting this attack (gym up --byzantine 1)")
	f.IntVar(&o.epochs, "epochs", o.epochs, "epochs of the gym up runs")
	f.IntVar(&o.steps, "steps", o.steps, "training steps of every run (a multiple of --epochs × --interval)")
	f.IntVar(&o.interval, "interval", o.interval, "aggregate_interval of the gym up runs (0: gym up's, 1 under its default data parallelism)")
	f.IntVar(&o.prompts, "prompts", o.prompts, "prompts per step in total (the single worker's; split over the workers)")
	f.StringVar(&o.gym, "gym", "", "gym binary to run (default: this one)")
	f.StringVar(&o.out, "out", o.out, "directory for the runs' results (runs/) and scratch")
	f.BoolVar(&o.json, "json", false, "print the report as JSON")
	f.BoolVar(&o.reuse, "reuse", false, "read a run's result from --out/runs/ when it is there instead of running it again")
	f.StringArrayVar(&o.upArgs, "up-arg", nil, "a flag for every gym up run (repeatable), e.g. --up-arg=--outer-lr=0")
	f.StringArrayVar(&o.variant, "variant", nil, "a gym up flag (repeatable) for a second run of every --workers count, compared seed by seed with the run without it, e.g. --variant=--outer-lr=1.25")
	f.DurationVar(&o.timeout, "timeout", o.timeout, "bound on each run (passed to gym up as its own --timeout)")
	return cmd
}

func (o *qualityOptions) check() error {
	o.parsedSeeds = nil
	if o.seedList != "" {
		for _, s := range strings.Split(o.seedList, ",") {
			v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
			if err != nil {
				return fmt.Errorf("--seed-list: %q is not a seed", s)
			}
			o.parsedSeeds = append(o.parsedSeeds, v)
		}
	} else {
		if o.seeds < 1 || o.seeds > 1000 {
			return fmt.Errorf("--seeds %d: want 1..1000", o.seeds)
		}
		for s := range o.seeds {
			o.parsedSeeds = append(o.parsedSeeds, uint64(s))
		}
	}
	o.parsedWorkers = nil
	for _, s := range strings.Split(o.workers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 3 || n > 64 {
			return fmt.Errorf("--workers: %q is not a worker count in 3..64", s)
		}
		if o.prompts%n != 0 {
			return fmt.Errorf("--workers %d does not divide --prompts %d: the runs would not see the same samples", n, o.prompts)
		}
		o.parsedWorkers = append(o.parsedWorkers, n)
	}
	switch {
	case o.epochs < 1 || o.interval < 0 || o.steps < 1 || o.steps%(o.epochs*max(o.interval, 1)) != 0:
		return fmt.Errorf("--steps %d must be a positive multiple of --epochs %d × --interval %d", o.steps, o.epochs, max(o.interval, 1))
	case o.prompts < 1:
		return fmt.Errorf("--prompts %d: want at least 1", o.prompts)
	case o.out == "":
		return errors.New("--out DIR is required")
	}
	o.stepsPerEpoch = o.steps / o.epochs
	return nil
}

// runBenchQuality runs every configuration for every seed.
func runBenchQuality(ctx context.Context, o qualityOptions, progress io.Writer) (*qualityReport, error) {
	rep := &qualityReport{Seeds: o.parsedSeeds, Samples: o.steps * o.prompts * 8, UpArgs: o.upArgs, Variant: o.variant}
	single := qualityRow{Name: fmt.Sprintf("1 worker (gym train, %d prompts/step)", o.prompts), Workers: 1}
	var rows []qualityRow
	for _, n := range o.parsedWorkers {
		rows = append(rows, qualityRow{Name: fmt.Sprintf("%d workers (gym up, %d prompts/step each)", n, o.prompts/n), Workers: n})
		if len(o.variant) > 0 {
			rows = append(rows, qualityRow{Name: fmt.Sprintf("%d workers, %s", n, strings.Join(o.variant, " ")), Workers: n,
				Variant: o.variant, base: len(rows) - 1})
		}
	}
	if o.attack != "" {
		n := o.parsedWorkers[0]
		rows = append(rows, qualityRow{Name: fmt.Sprintf("%d workers, 1 Byzantine (%s), median", n, o.attack), Workers: n, Attack: o.attack})
	}
	for _, seed := range o.parsedSeeds {
		args := []string{"train", "--steps", strconv.Itoa(o.steps), "--prompts", strconv.Itoa(o.prompts), "--seed", strconv.FormatUint(seed, 10),
			"--eval-every", strconv.Itoa(o.steps), "--json"}
		r, err := o.run(ctx, progress, 1, "", seed, args)
		if err != nil {
			return nil, err
		}
		single.Runs = append(single.Runs, r)
		for i := range rows {
			row := &rows[i]
			args := []string{"up", "--workers", strconv.Itoa(row.Workers), "--prompts", strconv.Itoa(o.prompts / row.Workers),
				"--epochs", strconv.Itoa(o.epochs), "--steps-per-epoch", strconv.Itoa(o.stepsPerEpoch)}
			if o.interval > 0 {
				args = append(args, "--interval", strconv.Itoa(o.interval))
			}
			args = append(args, "--seed", strconv.FormatUint(seed, 10), "--key-seed", strconv.FormatUint(seed, 10), "--json")
			if row.Attack != "" {
				args = append(args, "--byzantine", "1", "--attack", row.Attack)
			}
			args = append(args, o.upArgs...)
			args = append(args, row.Variant...)
			r, err := o.run(ctx, progress, row.Workers, row.Attack, seed, args)
			if err != nil {
				return nil, err
			}
			row.Runs = append(row.Runs, r)
		}
	}
	single.summarise(nil)
	rep.Rows = append(rep.Rows, single)
	for _, row := range rows {
		row.summarise(single.Runs)
		if row.Variant != nil {
			row.compare(rows[row.base].Runs)
		}
		rep.Rows = append(rep.Rows, row)
	}
	rep.Load = loadAverage()
	return rep, nil
}

// run runs (or, with --reuse, reads back) one gym command and returns its
// accuracy and wall time.
func (o qualityOptions) run(ctx context.Context, progress io.Writer, workers int, attack string, seed uint64, args []string) (qualityRun, error) {
	h := sha256.Sum256([]byte(strings.Join(args, "\x00")))
	name := fmt.Sprintf("%s-w%d-s%d-%s", args[0], workers, seed, hex.EncodeToString(h[:6]))
	if attack != "" {
		name = fmt.Sprintf("%s-w%d-%s-s%d-%s", args[0], workers, attack, seed, hex.EncodeToString(h[:6]))
	}
	result := filepath.Join(o.out, "runs", name+".json")
	if o.reuse {
		if b, err := os.ReadFile(result); err == nil {
			var r qualityRun
			if err := json.Unmarshal(b, &r); err != nil {
				return qualityRun{}, fmt.Errorf("bench quality: %s: %w", result, err)
			}
			fmt.Fprintf(progress, "bench quality: %s: %.3f in %.1f s (reused %s)\n", strings.Join(args, " "), r.Accuracy, r.Seconds, result)
			return r, nil
		}
	}
	scratch := filepath.Join(o.out, "scratch", name)
	if err := os.RemoveAll(scratch); err != nil {
		return qualityRun{}, err
	}
	if err := os.MkdirAll(filepath.Dir(result), 0o755); err != nil {
		return qualityRun{}, err
	}
	full := append(append([]string(nil), args...), "--out", scratch)
	if args[0] == "up" {
		// gym up's own bound (15 minutes by default) would end a slow run
		// before --timeout does; like --out it is not part of the run's
		// name, so results kept under either bound are reused.
		full = append(full, "--timeout", o.timeout.String())
	}
	cctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	c := exec.CommandContext(cctx, o.gym, full...)
	var stderr strings.Builder
	c.Stderr = &stderr
	t0 := time.Now()
	out, err := c.Output()
	secs := time.Since(t0).Seconds()
	r := qualityRun{Workers: workers, Attack: attack, Seed: seed, Seconds: secs, Args: args}
	acc, status, perr := lastSummary(out)
	if err != nil && perr != nil {
		tail := stderr.String()
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return qualityRun{}, fmt.Errorf("bench quality: gym %s: %w\n%s", strings.Join(full, " "), err, tail)
	}
	if perr != nil {
		return qualityRun{}, fmt.Errorf("bench quality: gym %s: %w", strings.Join(full, " "), perr)
	}
	r.Accuracy, r.Status = acc, status
	b, _ := json.MarshalIndent(r, "", "  ")
	if err := os.WriteFile(result, append(b, '\n'), 0o644); err != nil {
		return qualityRun{}, err
	}
	os.RemoveAll(scratch)
	fmt.Fprintf(progress, "bench quality: %s: %.3f in %.1f s (%s)\n", strings.Join(args, " "), acc, secs, status)
	return r, nil
}

// lastSummary reads the held-out accuracy and status from the last JSON
// line a gym train or gym up --json printed.
func lastSummary(out []byte) (float64, string, error) {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) == 0 || lines[len(lines)-1] == "" {
		return 0, "", errors.New("no JSON summary on stdout")
	}
	var s struct {
		EvalAfter *float64 `json:"eval_after"`
		Status    string   `json:"status"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		return 0, "", fmt.Errorf("summary: %w", err)
	}
	if s.EvalAfter == nil {
		return 0, "", errors.New("summary without eval_after")
	}
	if s.Status == "" {
		s.Status = "done"
	}
	return *s.EvalAfter, s.Status, nil
}

// summarise fills in the row's statistics; single (nil for the single
// worker's row) gives the gaps, seed by seed.
func (r *qualityRow) summarise(single []qualityRun) {
	var acc, secs []float64
	for i, run := range r.Runs {
		acc = append(acc, run.Accuracy)
		secs = append(secs, run.Seconds)
		if single != nil {
			r.Gaps = append(r.Gaps, 100*(run.Accuracy-single[i].Accuracy))
		}
	}
	r.Mean, r.Std = meanStd(acc)
	r.Min, r.Max = minMax(acc)
	r.MeanSeconds, _ = meanStd(secs)
	if single != nil {
		r.MeanGap, r.GapStd = meanStd(r.Gaps)
	}
}

// compare fills in a variant row's paired differences with its base row.
func (r *qualityRow) compare(base []qualityRun) {
	for i, run := range r.Runs {
		r.VsBase = append(r.VsBase, 100*(run.Accuracy-base[i].Accuracy))
	}
	r.MeanVsBase, r.VsBaseStd = meanStd(r.VsBase)
}

func meanStd(v []float64) (float64, float64) {
	if len(v) == 0 {
		return 0, 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	m := s / float64(len(v))
	if len(v) < 2 {
		return m, 0
	}
	var ss float64
	for _, x := range v {
		ss += (x - m) * (x - m)
	}
	return m, math.Sqrt(ss / float64(len(v)-1))
}

func minMax(v []float64) (float64, float64) {
	if len(v) == 0 {
		return 0, 0
	}
	lo, hi := v[0], v[0]
	for _, x := range v[1:] {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

// loadAverage reads /proc/loadavg (zeros where it cannot).
func loadAverage() [3]float64 {
	var l [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	fs := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(fs); i++ {
		l[i], _ = strconv.ParseFloat(fs[i], 64)
	}
	return l
}

// printQuality writes the report as Markdown tables: accuracy and gap per
// seed, then the statistics per configuration.
func printQuality(w io.Writer, rep *qualityReport) {
	fmt.Fprintf(w, "Held-out accuracy at equal samples (%d completions per run)", rep.Samples)
	if len(rep.UpArgs) > 0 {
		fmt.Fprintf(w, "; gym up %s", strings.Join(rep.UpArgs, " "))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	fmt.Fprint(w, "| seed |")
	sep := "|---|"
	for i, r := range rep.Rows {
		fmt.Fprintf(w, " %s |", r.Name)
		sep += "---|"
		if i > 0 {
			fmt.Fprint(w, " gap |")
			sep += "---|"
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, sep)
	for si, seed := range rep.Seeds {
		fmt.Fprintf(w, "| %d |", seed)
		for i, r := range rep.Rows {
			fmt.Fprintf(w, " %.3f |", r.Runs[si].Accuracy)
			if i > 0 {
				fmt.Fprintf(w, " %+.1f |", r.Gaps[si])
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| configuration | mean | std | min–max | mean gap (points) | gap std | mean wall s |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for i, r := range rep.Rows {
		gap, gs := "—", "—"
		if i > 0 {
			gap, gs = fmt.Sprintf("%+.2f", r.MeanGap), fmt.Sprintf("%.2f", r.GapStd)
		}
		fmt.Fprintf(w, "| %s | %.4f | %.4f | %.3f–%.3f | %s | %s | %.1f |\n", r.Name, r.Mean, r.Std, r.Min, r.Max, gap, gs, r.MeanSeconds)
	}
	for _, r := range rep.Rows {
		if r.Variant == nil {
			continue
		}
		// A paired difference's standard error is its std over √seeds.
		se := r.VsBaseStd / math.Sqrt(float64(max(len(r.VsBase), 1)))
		fmt.Fprintf(w, "\n%s against the same workers without it, seed by seed (same keys and data):", r.Name)
		for _, d := range r.VsBase {
			fmt.Fprintf(w, " %+.1f", d)
		}
		fmt.Fprintf(w, "; mean %+.2f points, std %.2f, standard error %.2f\n", r.MeanVsBase, r.VsBaseStd, se)
	}
	fmt.Fprintf(w, "\nload average at the end: %.2f %.2f %.2f\n", rep.Load[0], rep.Load[1], rep.Load[2])
}
