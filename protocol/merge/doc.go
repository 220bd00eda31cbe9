// Package merge combines the LoRA deltas that the members of a job submit
// for one epoch into the checkpoint of record, and scores each delta's
// quality.
//
// Inside an epoch the ring averages pseudo-gradients optimistically; a
// member that poisons the ring can only do damage until the epoch ends,
// because the orchestrator then merges the validated deltas itself and the
// next epoch starts from that merge (docs: "How the ring and the
// orchestrator fit together"). This package is that merge:
//
//   - Every contribution is first norm-clipped to ClipFactor × the median
//     norm of the batch, so no single delta can dominate by size.
//   - Mean is a quality-weighted mean with a cap on any single weight
//     (water-filling). It is fast and uses all the data but defends against
//     no Byzantine contributor at all.
//   - Median (coordinate-wise) and TrimmedMean (drop k values from each end
//     of every coordinate) tolerate f Byzantine contributors when 3f < n;
//     CheckDefensible refuses a job that declares more than its rule and
//     ring size can survive.
//
// Quality scores a delta as q = α·ΔL + β·S + γ·C (loss improvement on a
// held-out shard, norm stability against the running mean of norms, and
// agreement with the last merged update); the scores become the weights of
// Mean and feed the quality share of the epoch's rewards.
//
// Determinism: Merge is a pure function of its inputs, and its result is
// bit-identical for any order of the inputs, so any replica of the
// orchestrator that replays the same accepted deltas derives the same
// checkpoint. Inputs are sorted by node id before anything else; every sum
// is accumulated in float64 in that fixed order, and each product is
// rounded explicitly before it is added so that no compiler may fuse it
// into a multiply-add that another machine would round differently.
package merge
