package rollout

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/zooai/gym/internal/tinyllama"
	"github.com/zooai/gym/model/chat"
	"github.com/zooai/gym/model/envserver"
	"github.com/zooai/gym/model/episode"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/prng"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/model/toolcall"
)

type echoEnv struct{ task string }

func (e echoEnv) Reset(context.Context, string, string) (string, error) { return e.task, nil }
func (echoEnv) Step(_ context.Context, _ string, a string) (envserver.StepResult, error) {
	return envserver.StepResult{Observation: "you said " + a, Reward: float64(len(a) % 3)}, nil
}

// TestSamplerEpisodes: episodes sampled from a model replay exactly from
// their record with the same seed, and lay out as masked rollouts.
func TestSamplerEpisodes(t *testing.T) {
	mc := tinyllama.ChatConfig()
	w, err := tinyllama.Weights(mc, 3, 0.3)
	if err != nil {
		t.Fatal(err)
	}
	md, err := llama.New(w, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../chat/testdata/templates/Qwen-Qwen2.5-7B-Instruct.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tm, err := chat.Compile(string(src))
	if err != nil {
		t.Fatal(err)
	}
	ec := episode.Config{Template: tm, Tokenizer: tinyllama.ChatTokenizer(), Format: toolcall.Hermes, System: "Hi.", EOS: mc.EOS,
		MaxTurns: 3, MaxTokens: 160, MaxObservationBytes: 1 << 10}
	sampler := func(seed uint64) *Sampler {
		return &Sampler{Model: md, Cfg: Config{Temperature: 1}, RNG: prng.New(seed, 1)}
	}
	var eps []*episode.Episode
	for g := range 4 {
		e, err := episode.Play(context.Background(), ec, sampler(uint64(g)), echoEnv{"Talk."}, "s", "p")
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Tokens) > ec.MaxTokens || e.ModelTokens() == 0 {
			t.Fatalf("episode %d: %d tokens, %d the model's", g, len(e.Tokens), e.ModelTokens())
		}
		if err := episode.Replay(context.Background(), ec, sampler(uint64(g)), e); err != nil {
			t.Fatalf("episode %d (%s): %v", g, e.End, err)
		}
		eps = append(eps, e)
	}
	ro, excluded, err := FromEpisodes([]task.Problem{{Prompt: "p"}}, 4, eps)
	if err != nil || excluded[0] {
		t.Fatal(err, excluded)
	}
	for i, e := range eps {
		start := e.Turns[0].Start
		if len(ro.Completions[i]) != len(e.Tokens)-start || len(ro.Mask[i]) != len(ro.Completions[i]) || !ro.Mask[i][0] {
			t.Fatalf("rollout %d does not lay out its episode", i)
		}
	}
	if ro.Tokens() != eps[0].ModelTokens()+eps[1].ModelTokens()+eps[2].ModelTokens()+eps[3].ModelTokens() {
		t.Fatalf("Tokens() = %d", ro.Tokens())
	}
	// Episodes of one problem must start alike.
	other, err := episode.Play(context.Background(), ec, sampler(9), echoEnv{"Talk differently."}, "s", "p")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := FromEpisodes([]task.Problem{{Prompt: "p"}}, 4, append(eps[:3:3], other)); err == nil || !strings.Contains(err.Error(), "different prompts") {
		t.Fatalf("different prompts: %v", err)
	}
	if _, _, err := FromEpisodes([]task.Problem{{Prompt: "p"}}, 4, eps[:3]); err == nil {
		t.Fatal("3 episodes for a group of 4")
	}
}
