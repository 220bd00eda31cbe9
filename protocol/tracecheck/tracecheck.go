// Package tracecheck verifies rollout traces (package trace) against a
// model: the log-probabilities a trace records for its sampled tokens are
// recomputed teacher-forced under the policy the trace claims and compared
// (LogProbs), and a worker's delta is checked from its sync's traces
// (CheckSync: prompts, rewards, log-probabilities, the GSPO update and the
// loss, replayed with the Go engine from the traces instead of sampling).
//
// This is check (3) of SPEC.md's "Verification that survives different
// hardware". The Go engine's logits over a whole prefix equal its cached
// decoding's bit for bit (llama.Model.Prefill), so traces the Go engine
// sampled recompute exactly (difference 0); traces from another engine
// (PyTorch, a GPU, bf16) differ by that engine's rounding, which is what a
// tolerance calibrated per dtype and backend must admit — and a trace whose
// tokens were not sampled from the claimed policy (another adapter, edited
// log-probabilities, another temperature) differs by far more, unless the
// engine's own rounding is as large: bf16's hides a policy still near the
// claimed one (docs/traces.md).
package tracecheck

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/protocol/trace"
)

// LogProbReport summarises the recomputed log-probabilities of a trace set.
type LogProbReport struct {
	Tokens int // completion tokens compared
	// MaxAbs and MeanAbs are the largest and mean |recorded − recomputed|,
	// in nats.
	MaxAbs, MeanAbs float64
	// Worst locates MaxAbs: sequence and token index.
	WorstSeq, WorstTok int
	// SeqMaxAbs is the largest |Σ recorded − Σ recomputed| over a
	// sequence's tokens: the sequence log-likelihood GSPO's ratio uses.
	SeqMaxAbs float64
}

// ErrMismatch reports traces whose shape does not fit the model.
var ErrMismatch = errors.New("tracecheck: the traces do not fit the model")

// LogProbs recomputes every sampled token's log-probability, log
// softmax(logits/T) as the sampler computed it (rollout.Generate), under
// md, which must be the policy the traces claim (base plus adapter).
// Sequences of equal length are run together, batch at a time.
func LogProbs(md *llama.Model, s *trace.Set, batch int) (LogProbReport, error) {
	r, _, err := logProbs(md, s, batch, false)
	return r, err
}

// logProbs is LogProbs, and with keep the recomputed log-probabilities of
// every sequence's completion tokens (nil for a sequence without).
func logProbs(md *llama.Model, s *trace.Set, batch int, keep bool) (LogProbReport, [][]float32, error) {
	V := md.W.Cfg.Vocab
	if s.Header.Vocab != V {
		return LogProbReport{}, nil, fmt.Errorf("%w: traces over a vocabulary of %d, the model has %d", ErrMismatch, s.Header.Vocab, V)
	}
	var kept [][]float32
	if keep {
		kept = make([][]float32, len(s.Seqs))
	}
	batch = max(batch, 1)
	// Sequences by total length, in a fixed order.
	byLen := map[int][]int{}
	for i := range s.Seqs {
		q := &s.Seqs[i]
		if len(q.CompletionIDs) == 0 {
			continue
		}
		n := len(q.PromptIDs) + len(q.CompletionIDs)
		byLen[n] = append(byLen[n], i)
	}
	lens := make([]int, 0, len(byLen))
	for n := range byLen {
		lens = append(lens, n)
	}
	sort.Ints(lens)
	inv := float32(1 / s.Header.Temperature)
	scaled := make([]float32, V)
	lp := make([]float32, V)
	var r LogProbReport
	var sum float64
	for _, T := range lens {
		idx := byLen[T]
		for lo := 0; lo < len(idx); lo += batch {
			part := idx[lo:min(lo+batch, len(idx))]
			tokens := make([]int, 0, len(part)*T)
			for _, i := range part {
				tokens = append(tokens, s.Seqs[i].PromptIDs...)
				tokens = append(tokens, s.Seqs[i].CompletionIDs...)
			}
			logits, err := md.Logits(tokens, len(part), T)
			if err != nil {
				return LogProbReport{}, nil, fmt.Errorf("%w: %v", ErrMismatch, err)
			}
			for b, i := range part {
				q := &s.Seqs[i]
				P := len(q.PromptIDs)
				if keep {
					kept[i] = make([]float32, len(q.CompletionIDs))
				}
				var seqDiff float64
				for k, id := range q.CompletionIDs {
					// The logits at position P+k−1 predict token P+k.
					row := logits[(b*T+P+k-1)*V : (b*T+P+k)*V]
					for j, v := range row {
						scaled[j] = v * inv
					}
					llama.LogSoftmax(lp, scaled)
					if keep {
						kept[i][k] = lp[id]
					}
					d := float64(q.LogProbs[k]) - float64(lp[id])
					seqDiff += d
					a := math.Abs(d)
					sum += a
					r.Tokens++
					if a > r.MaxAbs || math.IsNaN(a) {
						r.MaxAbs, r.WorstSeq, r.WorstTok = a, i, k
					}
				}
				r.SeqMaxAbs = max(r.SeqMaxAbs, math.Abs(seqDiff))
			}
		}
	}
	if r.Tokens > 0 {
		r.MeanAbs = sum / float64(r.Tokens)
	}
	return r, kept, nil
}
