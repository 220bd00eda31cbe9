package judge

import (
	"context"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/orchestrator/judge/epoch"
	"github.com/zooai/gym/protocol/checkpkg"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/trace"
)

// traceChecker is epoch e of job's epoch.TraceChecker: it reads the node's
// trace bundles from the blob store and replays them with the Go engine
// on the plan's base (checkpkg.Sync, the check validators run too), within the tolerances of the
// delta's backend and dtype. A bundle that is gone from the store is the judge's
// failure (an error), not the node's.
func (j *Judge) traceChecker(job string, plan jobconf.Plan, e int) epoch.TraceChecker {
	return func(ctx context.Context, node string, cids []string, starts []*llama.Adapter, d epoch.Delta) (epoch.TraceCheck, error) {
		out := epoch.TraceCheck{Backend: d.Backend, DType: d.DType}
		sets := make([][]*trace.Set, len(cids))
		for i, c := range cids {
			var err error
			if sets[i], err = j.loadTraces(ctx, job, c); err != nil {
				return out, err
			}
		}
		// An accepted delta has a known dtype (refused at submission
		// otherwise): an error here is the judge's.
		r, err := checkpkg.Sync(ctx, plan, checkpkg.SyncArgs{Node: node, Epoch: e, Starts: starts, Traces: sets, Delta: d.Adapter,
			ClaimedLoss: d.ClaimedLoss, Backend: d.Backend, DType: d.DType}, j.cfg.Threads)
		if err != nil {
			return out, err
		}
		out.Failed, out.Detail = r.Failed, r.Detail
		out.Unverifiable, out.EnvFailed, out.CheckerEnvFailed = r.Unverifiable, r.EnvFailed, r.CheckerEnvFailed
		setFigures(&out, checkpkg.FiguresOf(r))
		return out, nil
	}
}

// setFigures copies a check's measured differences into its report entry.
func setFigures(tc *epoch.TraceCheck, f checkpkg.Figures) {
	tc.Steps, tc.Tokens, tc.LogProbMax, tc.RelL2, tc.Cosine, tc.LossDiff, tc.Scale = f.Steps, f.Tokens, f.LogProbMax, f.RelL2, f.Cosine, f.LossDiff, f.Scale
}
