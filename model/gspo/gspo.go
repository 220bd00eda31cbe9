// Package gspo is the policy-optimisation objective: Group Sequence Policy
// Optimization (Zheng et al. 2025) as specified in SPEC.md, with token-level
// GRPO available through Config.Level.
//
// For a batch of groups of G completions of the same prompt, with rewards
// r_i, advantages Â_i = (r_i − mean r)/(std r + ε) within each group (a group
// whose rewards are all equal gets Â = 0 and contributes nothing), and
// per-token log-probabilities under the current policy (log π_θ), the policy
// that generated the samples (log π_old) and the frozen reference (log π_ref):
//
//	sequence level: s_i = exp( mean_t [log π_θ − log π_old] )          (length-normalised)
//	                L_pg = −(1/N) Σ_i min(s_i Â_i, clip(s_i, 1−ε_low, 1+ε_high) Â_i)
//	token level:    r_it = exp(log π_θ − log π_old)
//	                L_pg = −(1/N) Σ_i mean_t min(r_it Â_i, clip(r_it, 1−ε_low, 1+ε_high) Â_i)
//	KL:             k3_it = exp(log π_ref − log π_θ) − (log π_ref − log π_θ) − 1
//	                KL = (1/N) Σ_i mean_t k3_it
//	loss = L_pg + β·KL
//
// N is the number of sequences. Every per-sequence quantity is a mean over its
// tokens, never a sum, and sequence ratios are never combined with token-sum
// normalisation (the TRL traps SPEC.md warns about).
//
// Compute is pure: it returns the loss, statistics and ∂loss/∂log π_θ for
// every token; the trainer back-propagates the latter through the model.
package gspo

import (
	"errors"
	"fmt"
	"math"
)

// Level is where importance sampling ratios are taken.
type Level int

const (
	// Sequence is GSPO: one length-normalised ratio per completion.
	Sequence Level = iota
	// Token is GRPO: one ratio per token.
	Token
)

func (l Level) String() string {
	if l == Token {
		return "token"
	}
	return "sequence"
}

// ParseLevel parses "sequence" or "token" (importance_sampling_level).
func ParseLevel(s string) (Level, error) {
	switch s {
	case "sequence":
		return Sequence, nil
	case "token":
		return Token, nil
	}
	return 0, fmt.Errorf("%w: importance_sampling_level %q (want sequence or token)", ErrConfig, s)
}

// Config holds the objective's hyper-parameters.
type Config struct {
	Level   Level
	EpsLow  float64 // lower clip: ratios below 1−EpsLow are clipped
	EpsHigh float64 // upper clip: ratios above 1+EpsHigh are clipped
	Beta    float64 // weight of the KL penalty to the reference
	AdvEps  float64 // ε in the advantage denominator
}

// DefaultConfig is GSPO with the paper's clipping (3e-4, 4e-4), β = 0.1 (the
// seed's default) and advantage ε = 1e-4.
func DefaultConfig() Config {
	return Config{Level: Sequence, EpsLow: 3e-4, EpsHigh: 4e-4, Beta: 0.1, AdvEps: 1e-4}
}

// ErrConfig reports invalid objective settings; ErrInput a malformed batch.
var (
	ErrConfig = errors.New("gspo: invalid config")
	ErrInput  = errors.New("gspo: invalid input")
)

// Validate reports whether c is usable.
func (c Config) Validate() error {
	if c.Level != Sequence && c.Level != Token {
		return fmt.Errorf("%w: level %d", ErrConfig, c.Level)
	}
	for _, v := range []float64{c.EpsLow, c.EpsHigh, c.Beta, c.AdvEps} {
		if !(v >= 0) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: eps_low %v, eps_high %v, beta %v, adv_eps %v must be finite and >= 0", ErrConfig, c.EpsLow, c.EpsHigh, c.Beta, c.AdvEps)
		}
	}
	if c.EpsLow >= 1 {
		return fmt.Errorf("%w: eps_low %v >= 1", ErrConfig, c.EpsLow)
	}
	return nil
}

// Advantages returns the group-normalised advantages of rewards laid out as
// consecutive groups of G: (r − mean)/(std + eps) with the sample standard
// deviation (n−1), and exactly 0 for every member of a zero-variance group.
func Advantages(rewards []float64, G int, eps float64) ([]float64, error) {
	if G < 2 || len(rewards)%G != 0 {
		return nil, fmt.Errorf("%w: %d rewards in groups of %d (need G >= 2)", ErrInput, len(rewards), G)
	}
	adv := make([]float64, len(rewards))
	for lo := 0; lo < len(rewards); lo += G {
		g := rewards[lo : lo+G]
		var mean float64
		for _, r := range g {
			mean += r
		}
		mean /= float64(G)
		var ss float64
		same := true
		for _, r := range g {
			ss += (r - mean) * (r - mean)
			same = same && r == g[0]
		}
		if same {
			continue
		}
		std := math.Sqrt(ss / float64(G-1))
		for i, r := range g {
			adv[lo+i] = (r - mean) / (std + eps)
		}
	}
	return adv, nil
}

// Batch is the input of one loss evaluation. Sequence i's tokens are
// LogP[i][t]; OldLogP and RefLogP have the same shape (RefLogP may be nil
// when Beta is 0).
type Batch struct {
	G       int
	Rewards []float64
	LogP    [][]float64 // log π_θ of each completion token
	OldLogP [][]float64 // log π_old (recorded at generation)
	RefLogP [][]float64 // log π_ref (frozen reference)
	// Mask, when not nil, marks per token whether it counts: a multi-turn
	// episode's tokens are the model's (true) and the environment's
	// (false, there only as context). Ratios, the KL term and the token
	// counts are over the tokens that count; the others get no gradient.
	// A sequence with none contributes nothing. nil: every token counts.
	Mask [][]bool
}

// Stats describe one loss evaluation.
type Stats struct {
	RewardMean   float64 `json:"reward_mean"`
	Loss         float64 `json:"loss"`
	PolicyLoss   float64 `json:"policy_loss"`
	KL           float64 `json:"kl"`
	ClipFrac     float64 `json:"clip_frac"`      // fraction of ratios whose gradient the clip removed
	ClipLowFrac  float64 `json:"clip_low_frac"`  // ratio < 1−ε_low with Â < 0
	ClipHighFrac float64 `json:"clip_high_frac"` // ratio > 1+ε_high with Â > 0
	RatioMean    float64 `json:"ratio_mean"`
	RatioStd     float64 `json:"ratio_std"`
	RatioMin     float64 `json:"ratio_min"`
	RatioMax     float64 `json:"ratio_max"`
	// TokenRatioStd is the standard deviation of the per-token ratios
	// exp(log π_θ − log π_old) at either level, for comparing the two.
	TokenRatioStd  float64 `json:"token_ratio_std"`
	ZeroVarGroups  int     `json:"zero_var_groups"` // groups that contributed no policy gradient
	AdvantageAbs   float64 `json:"advantage_abs_mean"`
	Sequences      int     `json:"sequences"`
	Tokens         int     `json:"tokens"`
	RatiosMeasured int     `json:"ratios"` // sequences (sequence level) or tokens (token level)
}

// Result is the loss, its statistics and the gradient with respect to every
// entry of Batch.LogP.
type Result struct {
	Loss  float64
	Stats Stats
	DLogP [][]float64
}

// Compute evaluates the objective on b.
func Compute(c Config, b Batch) (*Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	N := len(b.Rewards)
	if N == 0 || len(b.LogP) != N || len(b.OldLogP) != N || (c.Beta > 0 && len(b.RefLogP) != N) {
		return nil, fmt.Errorf("%w: %d rewards, %d/%d/%d log-prob rows", ErrInput, N, len(b.LogP), len(b.OldLogP), len(b.RefLogP))
	}
	if b.Mask != nil && len(b.Mask) != N {
		return nil, fmt.Errorf("%w: %d mask rows for %d sequences", ErrInput, len(b.Mask), N)
	}
	for i := range b.LogP {
		n := len(b.LogP[i])
		if n == 0 || len(b.OldLogP[i]) != n || (c.Beta > 0 && len(b.RefLogP[i]) != n) || (b.Mask != nil && len(b.Mask[i]) != n) {
			return nil, fmt.Errorf("%w: sequence %d has %d tokens and mismatched rows", ErrInput, i, n)
		}
	}
	adv, err := Advantages(b.Rewards, b.G, c.AdvEps)
	if err != nil {
		return nil, err
	}
	res := &Result{DLogP: make([][]float64, N)}
	st := &res.Stats
	st.Sequences = N
	st.RatioMin, st.RatioMax = math.Inf(1), math.Inf(-1)
	var ratioSum, ratioSq float64
	ratio := func(r float64) {
		ratioSum += r
		ratioSq += r * r
		st.RatioMin = math.Min(st.RatioMin, r)
		st.RatioMax = math.Max(st.RatioMax, r)
		st.RatiosMeasured++
	}
	// clipTerm returns min(r·A, clip(r)·A), d/dr of it, and which side clipped.
	lo, hi := 1-c.EpsLow, 1+c.EpsHigh
	clipTerm := func(r, A float64) (val, dr float64, low, high bool) {
		cl := math.Min(math.Max(r, lo), hi)
		if r*A <= cl*A {
			return r * A, A, false, false
		}
		return cl * A, 0, r < lo, r > hi
	}
	var clipped, clipLow, clipHigh float64
	var tokSum, tokSq float64
	invN := 1 / float64(N)
	all := make([]int, 0)
	for i := range b.LogP {
		lp, old := b.LogP[i], b.OldLogP[i]
		// idx are the tokens that count, in order.
		idx := all[:0]
		for t := range lp {
			if b.Mask == nil || b.Mask[i][t] {
				idx = append(idx, t)
			}
		}
		all = idx
		n := float64(len(idx))
		A := adv[i]
		st.RewardMean += b.Rewards[i] * invN
		st.AdvantageAbs += math.Abs(A) * invN
		d := make([]float64, len(lp))
		res.DLogP[i] = d
		if len(idx) == 0 {
			continue
		}
		st.Tokens += len(idx)
		for _, t := range idx {
			r := math.Exp(lp[t] - old[t])
			tokSum += r
			tokSq += r * r
		}
		switch c.Level {
		case Sequence:
			var m float64
			for _, t := range idx {
				m += lp[t] - old[t]
			}
			m /= n
			s := math.Exp(m)
			ratio(s)
			val, dr, l, h := clipTerm(s, A)
			st.PolicyLoss -= val * invN
			if l || h {
				clipped++
			}
			if l {
				clipLow++
			}
			if h {
				clipHigh++
			}
			// ∂s/∂lp_t = s/n
			g := -invN * dr * s / n
			for _, t := range idx {
				d[t] = g
			}
		case Token:
			for _, t := range idx {
				r := math.Exp(lp[t] - old[t])
				ratio(r)
				val, dr, l, h := clipTerm(r, A)
				st.PolicyLoss -= val * invN / n
				if l || h {
					clipped++
				}
				if l {
					clipLow++
				}
				if h {
					clipHigh++
				}
				d[t] = -invN * dr * r / n
			}
		}
		if c.Beta > 0 {
			ref := b.RefLogP[i]
			for _, t := range idx {
				x := ref[t] - lp[t]
				ex := math.Exp(x)
				st.KL += (ex - x - 1) * invN / n
				// ∂k3/∂lp = −eˣ + 1
				d[t] += c.Beta * (1 - ex) * invN / n
			}
		}
	}
	for lo := 0; lo < N; lo += b.G {
		zero := true
		for _, a := range adv[lo : lo+b.G] {
			zero = zero && a == 0
		}
		if zero {
			st.ZeroVarGroups++
		}
	}
	if st.Tokens == 0 {
		return nil, fmt.Errorf("%w: the mask leaves no token", ErrInput)
	}
	m := float64(st.RatiosMeasured)
	st.ClipFrac, st.ClipLowFrac, st.ClipHighFrac = clipped/m, clipLow/m, clipHigh/m
	st.RatioMean = ratioSum / m
	st.RatioStd = math.Sqrt(math.Max(0, ratioSq/m-st.RatioMean*st.RatioMean))
	tm := tokSum / float64(st.Tokens)
	st.TokenRatioStd = math.Sqrt(math.Max(0, tokSq/float64(st.Tokens)-tm*tm))
	st.Loss = st.PolicyLoss + c.Beta*st.KL
	res.Loss = st.Loss
	return res, nil
}
