package judge

import (
	"context"
	"math"

	"github.com/zooai/gym/jobconf"
	"github.com/zooai/gym/llama"
	"github.com/zooai/gym/orchestrator/judge/epoch"
	"github.com/zooai/gym/trace"
	"github.com/zooai/gym/tracecheck"
)

// traceChecker is epoch e of job's epoch.TraceChecker: it reads the node's
// trace bundles from the blob store and replays them with the Go engine
// on the plan's base (tracecheck.CheckSync), within the tolerances of the
// delta's backend and dtype. A bundle that is gone from the store is the judge's
// failure (an error), not the node's.
func (j *Judge) traceChecker(job string, plan jobconf.Plan, e int) epoch.TraceChecker {
	return func(ctx context.Context, node string, cids []string, starts []*llama.Adapter, d epoch.Delta) (epoch.TraceCheck, error) {
		out := epoch.TraceCheck{Backend: d.Backend, DType: d.DType}
		worker, err := jobconf.Worker(node)
		if err != nil {
			out.Failed, out.Detail = tracecheck.CheckShape, err.Error()
			return out, nil
		}
		sets := make([][]*trace.Set, len(cids))
		for i, c := range cids {
			if sets[i], err = j.loadTraces(ctx, job, c); err != nil {
				return out, err
			}
		}
		in := tracecheck.SyncInput{Weights: plan.Base.Weights, Tokenizer: plan.Base.Tokenizer, Config: plan.Trainer, Worker: worker,
			FirstStep: plan.FirstStep(e), Interval: plan.Interval, Starts: starts, Traces: sets, Delta: d.Adapter,
			ClipNorm: plan.ClipNorm(d.Adapter.NumParams()), ClaimedLoss: d.ClaimedLoss, Threads: j.cfg.Threads}
		tol, err := tracecheck.Tolerances(d.Backend, d.DType)
		if err != nil {
			return out, err // refused at submission: an accepted delta has a known dtype
		}
		r, err := tracecheck.CheckSync(ctx, in, tol)
		if err != nil {
			return out, err
		}
		out.Failed, out.Detail, out.Steps, out.Tokens = r.Failed, r.Detail, r.Steps, r.Tokens
		out.Unverifiable, out.EnvFailed, out.CheckerEnvFailed = r.Unverifiable, r.EnvFailed, r.CheckerEnvFailed
		out.LogProbMax, out.RelL2, out.Cosine, out.LossDiff = finite(r.LogProbMax), finite(r.RelL2), finite(r.Cosine), finite(r.LossDiff)
		return out, nil
	}
}

// finite is x, or −1 for a value JSON cannot hold (an update compared
// with a zero one has an infinite relative error).
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return -1
	}
	return x
}
