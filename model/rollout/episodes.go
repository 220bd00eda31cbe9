package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/zooai/gym/model/episode"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/prng"
	"github.com/zooai/gym/model/task"
)

// Sampler is an episode.Policy on a model: it samples each turn's tokens
// with the temperature and top-k of Config from rng, recording each
// token's log-probability as Generate does, one sequence at a time (the
// conversation so far prefilled, then decoded with the KV cache).
type Sampler struct {
	Model *llama.Model
	Cfg   Config
	RNG   *prng.Source
}

// Generate implements episode.Policy.
func (s *Sampler) Generate(ctx context.Context, prompt []int, maxNew int) ([]int, []float32, error) {
	if err := s.Cfg.Validate(); err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	md := s.Model
	if len(prompt) == 0 {
		return nil, nil, errors.New("rollout: an empty prompt")
	}
	maxNew = min(maxNew, md.W.Cfg.MaxPositions-len(prompt))
	if maxNew < 1 {
		return nil, nil, fmt.Errorf("rollout: a prompt of %d tokens leaves no room in the model's context of %d", len(prompt), md.W.Cfg.MaxPositions)
	}
	ch, err := md.NewCache(1, len(prompt)+maxNew)
	if err != nil {
		return nil, nil, err
	}
	logits, err := md.PrefillLast(ch, prompt, len(prompt))
	if err != nil {
		return nil, nil, err
	}
	V := md.W.Cfg.Vocab
	lp, scaled := make([]float32, V), make([]float32, V)
	inv := float32(1 / s.Cfg.Temperature)
	var logp []float32
	out, err := decode(md, ch, logits, maxNew, func(_ int, row []float32) int {
		for j, v := range row {
			scaled[j] = v * inv
		}
		llama.LogSoftmax(lp, scaled)
		t := sample(lp, s.Cfg.TopK, s.RNG)
		logp = append(logp, lp[t])
		return t
	})
	if err != nil {
		return nil, nil, err
	}
	return out[0], logp, nil
}

// FromEpisodes lays out G episodes of each problem as rollouts for the
// trainer: sequence p·G+g is episode p·G+g, its prompt the tokens before
// its first turn (the same for the episodes of a problem: the environment
// states a task the same way in every session), its completion everything
// after, masked to the model's tokens, its reward the episode's. A group
// with an episode that ended through the environment's fault
// (Episode.EnvFault) is left out of the update: its rewards are all set to
// 0, a group without variance, which gives no policy gradient; excluded
// says which groups.
func FromEpisodes(problems []task.Problem, G int, eps []*episode.Episode) (ro *Rollouts, excluded []bool, err error) {
	if G < 1 || len(eps) != len(problems)*G {
		return nil, nil, fmt.Errorf("rollout: %d episodes for %d problems of %d", len(eps), len(problems), G)
	}
	N := len(eps)
	ro = &Rollouts{Problems: problems, G: G, Prompts: make([][]int, len(problems)), Completions: make([][]int, N),
		OldLogP: make([][]float32, N), Texts: make([]string, N), Rewards: make([]float64, N), Mask: make([][]bool, N), Episodes: eps}
	excluded = make([]bool, len(problems))
	for i, e := range eps {
		p := i / G
		if e.EnvFault() {
			excluded[p] = true
		}
		if len(e.Turns) == 0 || e.Turns[0].Start == 0 {
			if e.EnvFault() {
				continue // nothing was played; the group is out
			}
			return nil, nil, fmt.Errorf("rollout: episode %d has no turn", i)
		}
		start := e.Turns[0].Start
		prompt := e.Tokens[:start]
		if ro.Prompts[p] == nil {
			ro.Prompts[p] = prompt
		} else if !slices.Equal(ro.Prompts[p], prompt) {
			return nil, nil, fmt.Errorf("rollout: the episodes of problem %d start from different prompts (the environment stated the task differently per session)", p)
		}
		ro.Completions[i] = e.Tokens[start:]
		ro.Mask[i] = e.Model[start:]
		ro.OldLogP[i] = e.LogP[start:]
		ro.Rewards[i] = e.Reward
		for _, tn := range e.Turns {
			ro.Texts[i] += tn.Text
		}
	}
	for p, out := range excluded {
		if !out {
			continue
		}
		for g := range G {
			ro.Rewards[p*G+g] = 0
		}
		if ro.Prompts[p] == nil {
			return nil, nil, fmt.Errorf("rollout: no episode of problem %d was played (the environment failed every one): leave the problem out", p)
		}
		for g := range G {
			if ro.Completions[p*G+g] == nil {
				// An episode that never started: one masked-out token of context.
				ro.Completions[p*G+g], ro.Mask[p*G+g], ro.OldLogP[p*G+g] = ro.Prompts[p][len(ro.Prompts[p])-1:], []bool{false}, []float32{0}
			}
		}
	}
	return ro, excluded, nil
}
