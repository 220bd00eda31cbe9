package envserver

import (
	"context"
	"crypto/sha256"
	"sync"

	"github.com/zooai/gym/model/reward"
)

// maxMemo is how many recent results a Scorer remembers.
const maxMemo = 4096

// Scorer is a reward.Scorer backed by an environment server's /score.
//
// Score cannot return an error: a failed call (any Kind) scores the
// declared reward_min and Correct is false; the failure is counted in the
// Client's Stats under "/score" by Kind, for export as metrics. Result
// gives the error to callers that can handle one. The Scorer remembers up
// to 4096 recent results by SHA-256 of the sample (failures too), so Score
// then Correct on one sample is one call.
type Scorer struct {
	c   *Client
	ctx context.Context

	mu   sync.Mutex
	memo map[[32]byte]memoEntry
}

type memoEntry struct {
	r   ScoreResult
	err error
}

var _ reward.Scorer = (*Scorer)(nil)

// NewScorer scores through c; ctx bounds every call (its end fails the
// calls still to come as canceled).
func NewScorer(ctx context.Context, c *Client) *Scorer {
	return &Scorer{c: c, ctx: ctx, memo: map[[32]byte]memoEntry{}}
}

func key(s reward.Sample) [32]byte {
	h := sha256.New()
	for _, f := range []string{s.Prompt, s.Answer, s.Completion} {
		var n [8]byte
		for i := range n {
			n[i] = byte(uint64(len(f)) >> (8 * i))
		}
		h.Write(n[:])
		h.Write([]byte(f))
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// Result scores s, or says why the server could not.
func (sc *Scorer) Result(s reward.Sample) (ScoreResult, error) {
	k := key(s)
	sc.mu.Lock()
	e, ok := sc.memo[k]
	sc.mu.Unlock()
	if ok {
		return e.r, e.err
	}
	r, err := sc.c.Score(sc.ctx, s)
	sc.mu.Lock()
	if len(sc.memo) >= maxMemo {
		clear(sc.memo)
	}
	sc.memo[k] = memoEntry{r, err}
	sc.mu.Unlock()
	return r, err
}

// Score implements reward.Scorer: the server's reward, or the declared
// minimum when the call failed.
func (sc *Scorer) Score(s reward.Sample) float64 {
	r, err := sc.Result(s)
	if err != nil {
		return sc.c.health.RewardMin
	}
	return r.Reward
}

// Correct implements reward.Scorer: false when the call failed.
func (sc *Scorer) Correct(s reward.Sample) bool {
	r, err := sc.Result(s)
	return err == nil && r.Correct
}

// Range is the server's declared reward range.
func (sc *Scorer) Range() (lo, hi float64) { return sc.c.health.RewardMin, sc.c.health.RewardMax }
