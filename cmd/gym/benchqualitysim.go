package main

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/spf13/cobra"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/heldout"
	"github.com/zooai/gym/model/trainer"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/merge"
	"github.com/zooai/gym/protocol/ring"
)

// newBenchQualitySim is the screen gym bench quality's settings were chosen
// with: gym up's training in this process, without hanzod, the network or
// the judge — N trainers of the job's plan, the ring's mean by
// ring.Reference stepped by the job's outer rule, each sync merged by
// merge.Merge with equal weights (the judge weighs by quality) into the
// checkpoint of record, held-out accuracy after every epoch. Worker data
// indices are drawn from the seed, so two settings see the same data: a
// paired comparison, about three times cheaper than a gym up run.
func newBenchQualitySim() *cobra.Command {
	var workers, interval, threads, iters int
	var seed uint64
	var lr, olr, mu, maxGrad float64
	var resetMoments, keepMoments, innerSGD, outerAdam, freshOuter bool
	cmd := &cobra.Command{
		Use:    "quality-sim [--workers 8] [--seed 0] [--outer-lr 1.41] [--outer-momentum 0] [--learning-rate 2e-3] [--interval 5] [--reset-moments] [--keep-moments] [--inner-sgd [--max-grad-norm 30]] [--outer-adam [--fresh-outer]] [--num-iterations 2]",
		Short:  "Screen a setting of gym bench quality in process (no hanzod): gym up's training, 16 prompts a step split over the workers",
		Hidden: true,
		Args:   exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if workers < 1 || 16%workers != 0 {
				return usageError{fmt.Errorf("--workers %d must divide 16", workers)}
			}
			if resetMoments && keepMoments {
				return usageError{fmt.Errorf("--reset-moments and --keep-moments contradict each other")}
			}
			if outerAdam && !(olr > 0) {
				return usageError{fmt.Errorf("--outer-adam needs --outer-lr above 0 (Adam's step, e.g. 2e-3)")}
			}
			ctx := cmd.Context()
			base, err := basemodel.Builtin()
			if err != nil {
				return err
			}
			g := jobconf.BuiltinGSPO(interval)
			g.LearningRate, g.OuterLR, g.OuterMomentum = lr, olr, mu
			if outerAdam {
				g.OuterOptimizer = "adam" // jobconf.Outer's Adam, the job's own rule
			}
			if innerSGD && outerAdam {
				g.InnerOptimizer, g.MaxGradNorm = "sgd", maxGrad
			}
			spec := jobspec.Spec{Model: base.Name, Dataset: "addition", Epochs: 3, MinNodes: max(workers, 3), MaxNodes: max(workers, 3), Aggregation: "mean",
				StepsPerEpoch: 30, PromptsPerStep: 16 / workers, Seed: seed, GSPO: g}
			if err := spec.Normalise(); err != nil {
				return usageError{err}
			}
			plan, err := jobconf.FromSpec("sim", spec, base)
			if err != nil {
				return err
			}
			plan.Trainer.SGD = innerSGD // also without --outer-adam, which a job may not ask for
			if iters > 0 {
				plan.Trainer.NumIterations = iters // not a job field: gym train's --config sets it
			}
			if innerSGD && !outerAdam {
				plan.MaxGradNorm = maxGrad
			}
			rng := rand.New(rand.NewPCG(seed, 12345))
			widx := make([]uint64, workers)
			for i := range widx {
				widx[i] = rng.Uint64()
			}
			T, err := plan.InitialAdapter(base.Weights.Cfg)
			if err != nil {
				return err
			}
			t0 := time.Now()
			var accs []float64
			var carried *jobconf.Outer // the checkpoint's outer state at the last epoch's end (carried under Adam)
			clipped := 0               // contributions the norm bound scaled down
			var largest, bound float64 // the largest contribution's norm before the clip, and the bound
			trs := make([]*trainer.Trainer, workers)
			for e := 1; e <= plan.Epochs; e++ {
				for i := range trs {
					st := trainer.State{Step: plan.FirstStep(e), Adapter: T}
					if keepMoments && trs[i] != nil {
						prev := trs[i].State()
						st.M, st.V, st.Updates = prev.M, prev.V, prev.Updates
					}
					if trs[i], err = trainer.Resume(base.Weights, base.Tokenizer, plan.Trainer, widx[i], threads, st); err != nil {
						return err
					}
				}
				S := T.Clone()
				outer, outerT := plan.NewOuter(), plan.NewOuter()
				if plan.CarriesOuter() && !freshOuter && carried != nil {
					outer, outerT = carried.Clone(), carried.Clone()
				}
				clip := plan.ClipNorm(T.NumParams()) // as gym up's workers clip
				for k := 1; k <= plan.Syncs(); k++ {
					var flats [][]float32
					var mi []merge.Input
					for i, tr := range trs {
						for range plan.Interval {
							if _, err := tr.Step(ctx); err != nil {
								return err
							}
						}
						d := jobconf.Sub(tr.Adapter(), S)
						largest, bound = max(largest, jobconf.Norm(d)), clip
						if jobconf.Clip(d, clip) != 1 {
							clipped++
						}
						flats = append(flats, jobconf.Flatten(d))
						mi = append(mi, merge.Input{Node: fmt.Sprintf("w%03d", i), Vec: flats[i], Quality: 1})
					}
					u, _, err := merge.Merge(merge.Config{Rule: merge.Mean}, mi)
					if err != nil {
						return err
					}
					if err := outerT.Apply(T, u); err != nil {
						return err
					}
					if k == plan.Syncs() {
						break
					}
					mean, err := ring.Reference(flats, ring.Mean)
					if err != nil {
						return err
					}
					if err := outer.Apply(S, mean); err != nil {
						return err
					}
					for i, tr := range trs {
						st := tr.State()
						st.Adapter = S.Clone()
						if resetMoments {
							st.M, st.V, st.Updates = nil, nil, 0
						}
						if trs[i], err = trainer.Resume(base.Weights, base.Tokenizer, plan.Trainer, widx[i], threads, st); err != nil {
							return err
						}
					}
				}
				carried = outerT
				ev, err := heldout.Evaluate(base.Weights, base.Tokenizer, T, "addition", 500, threads)
				if err != nil {
					return err
				}
				accs = append(accs, ev.Accuracy)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "workers %d seed %d outer-lr %v outer-momentum %v learning-rate %v interval %d reset-moments %v keep-moments %v fresh-outer %v inner-sgd %v outer-adam %v max-grad-norm %v num-iterations %d: accuracy by epoch %v, %d contributions clipped, largest contribution %.3g of the bound %.3g, %.0f s\n",
				workers, seed, olr, mu, lr, interval, resetMoments, keepMoments, freshOuter, innerSGD, outerAdam, maxGrad, plan.Trainer.NumIterations, accs, clipped, largest, bound, time.Since(t0).Seconds())
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&workers, "workers", 4, "workers (dividing 16 prompts a step)")
	f.Uint64Var(&seed, "seed", 0, "job seed; also draws the workers' data indices")
	f.Float64Var(&olr, "outer-lr", 0, "gspo.outer_learning_rate (0: the plain average)")
	f.Float64Var(&mu, "outer-momentum", 0, "gspo.outer_momentum")
	f.Float64Var(&lr, "learning-rate", 2e-3, "gspo.learning_rate")
	f.IntVar(&interval, "interval", 5, "aggregate_interval (divides 30)")
	f.BoolVar(&resetMoments, "reset-moments", false, "reset every worker's AdamW moments at each sync")
	f.BoolVar(&keepMoments, "keep-moments", false, "carry every worker's AdamW moments across epoch boundaries (gym up's workers start every epoch with fresh ones, as the judge's replays do)")
	f.Float64Var(&maxGrad, "max-grad-norm", 0, "gspo.max_grad_norm with --inner-sgd: the clip bound's G (0: √params)")
	f.BoolVar(&freshOuter, "fresh-outer", false, "start the outer Adam from zero every epoch instead of carrying the checkpoint of record's state (the job's rule before it carried)")
	f.BoolVar(&innerSGD, "inner-sgd", false, "workers train with plain SGD at --learning-rate instead of AdamW")
	f.BoolVar(&outerAdam, "outer-adam", false, "gspo.outer_optimizer adam: the outer step is Adam (β 0.9, 0.99; its state carried across epochs) at --outer-lr on each sync's mean; with --inner-sgd and --interval 1, gspo.inner_optimizer sgd's synchronous data parallelism")
	f.IntVar(&iters, "num-iterations", 0, "optimiser updates per batch (0: the job's, 2)")
	f.IntVar(&threads, "threads", 2, "threads per trainer")
	return cmd
}
