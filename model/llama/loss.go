package llama

import (
	"fmt"
	"math"
)

// checkLogProbs validates the shapes of TokenLogProbs' arguments.
func checkLogProbs(logits []float32, V int, targets []int) error {
	if V < 1 || len(logits) != len(targets)*V {
		return fmt.Errorf("llama: %d logits for %d targets over a vocabulary of %d", len(logits), len(targets), V)
	}
	for _, t := range targets {
		if t >= V {
			return fmt.Errorf("llama: target id %d outside the vocabulary of %d", t, V)
		}
	}
	return nil
}

// rowLSE is the log-sum-exp of one row of logits, summed in float64.
func rowLSE(row []float32) float64 {
	mx := row[0]
	for _, v := range row[1:] {
		mx = max(mx, v)
	}
	var s float64
	for _, v := range row {
		s += math.Exp(float64(v - mx))
	}
	return float64(mx) + math.Log(s)
}

// TokenLogProbs returns, for each row n of logits [len(targets), V], the
// log-probability of token targets[n]: log_softmax(logits[n])[targets[n]],
// as torch's log_softmax followed by gather computes it. A negative target
// marks a row without one (a prompt position, padding): its log-probability
// is 0. Rows are independent; threads goroutines share them.
func TokenLogProbs(threads int, logits []float32, V int, targets []int) ([]float32, error) {
	if err := checkLogProbs(logits, V, targets); err != nil {
		return nil, err
	}
	lp := make([]float32, len(targets))
	parallel(threads, len(targets), len(logits)*8, func(lo, hi int) {
		for n := lo; n < hi; n++ {
			if t := targets[n]; t >= 0 {
				row := logits[n*V : (n+1)*V]
				lp[n] = float32(float64(row[t]) - rowLSE(row))
			}
		}
	})
	return lp, nil
}

// TokenLogProbsBackward returns dLogits [len(targets), V], the gradient of
// a loss with respect to the logits given dLogP, its gradient with respect
// to TokenLogProbs' results: dLogits[n,v] = dLogP[n]·(1[v = targets[n]] −
// softmax(logits[n])[v]); rows without a target get zeros.
func TokenLogProbsBackward(threads int, logits []float32, V int, targets []int, dLogP []float32) ([]float32, error) {
	if err := checkLogProbs(logits, V, targets); err != nil {
		return nil, err
	}
	if len(dLogP) != len(targets) {
		return nil, fmt.Errorf("llama: %d log-probability gradients for %d targets", len(dLogP), len(targets))
	}
	d := make([]float32, len(logits))
	parallel(threads, len(targets), len(logits)*8, func(lo, hi int) {
		e := make([]float64, V) // exp(x − max) of a row, computed once
		for n := lo; n < hi; n++ {
			t, g := targets[n], dLogP[n]
			if t < 0 || g == 0 {
				continue
			}
			row, dr := logits[n*V:(n+1)*V], d[n*V:(n+1)*V]
			mx := row[0]
			for _, x := range row[1:] {
				mx = max(mx, x)
			}
			var s float64
			for v, x := range row {
				e[v] = math.Exp(float64(x - mx))
				s += e[v]
			}
			for v := range row {
				dr[v] = -float32(g * float32(e[v]/s))
			}
			dr[t] += g
		}
	})
	return d, nil
}
