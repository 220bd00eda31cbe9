package trainer

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/zooai/gym/internal/tinyllama"
	"github.com/zooai/gym/model/chat"
	"github.com/zooai/gym/model/envserver"
	"github.com/zooai/gym/model/episode"
	"github.com/zooai/gym/model/rollout"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/model/toolcall"
)

// scripted writes one reply per call, ending with <|im_end|>.
type scripted struct{ replies []string }

func (s *scripted) Generate(_ context.Context, _ []int, maxNew int) ([]int, []float32, error) {
	ids, err := tinyllama.ChatTokenizer().Encode(s.replies[0], false)
	if err != nil {
		return nil, nil, err
	}
	s.replies = s.replies[1:]
	ids = append(ids, tinyllama.ChatEOS)
	return ids, make([]float32, len(ids)), nil
}

// yesEnv asks a question twice: the reply "yes" to each is worth 1.
type yesEnv struct{ fail bool }

func (yesEnv) Reset(context.Context, string, string) (string, error) { return "Say yes.", nil }
func (e yesEnv) Step(_ context.Context, _ string, action string) (envserver.StepResult, error) {
	if e.fail {
		return envserver.StepResult{}, &envserver.Error{Endpoint: "/step", Kind: envserver.KindStatus5xx, Status: 500}
	}
	r := 0.0
	if action == "yes" {
		r = 1
	}
	return envserver.StepResult{Observation: "Again.", Reward: r, Done: strings.Contains(action, "!")}, nil
}

// TestTrainOnEpisodes: GSPO on two-turn episodes (the model's replies, the
// environment's observation between them, masked) moves the model towards
// the rewarded replies; the environment's tokens are context only (their
// recorded log-probabilities change nothing), and a group with an episode
// the environment failed is left out.
func TestTrainOnEpisodes(t *testing.T) {
	mc := tinyllama.ChatConfig()
	base, err := tinyllama.Weights(mc, 5, 0.3)
	if err != nil {
		t.Fatal(err)
	}
	tok := tinyllama.ChatTokenizer()
	src, err := os.ReadFile("../chat/testdata/templates/Qwen-Qwen2.5-7B-Instruct.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tm, err := chat.Compile(string(src))
	if err != nil {
		t.Fatal(err)
	}
	ec := episode.Config{Template: tm, Tokenizer: tok, Format: toolcall.Hermes, System: "Be brief.", EOS: mc.EOS,
		MaxTurns: 2, MaxTokens: 256, MaxObservationBytes: 256}
	c := tinyConfig()
	c.PromptsPerStep, c.GroupSize, c.GradientAccumulationSteps, c.Beta = 2, 4, 1, 0.01
	tr, err := New(base, tok, c, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	replies := [][]string{{"yes", "yes"}, {"yes", "no"}, {"no", "yes"}, {"no", "no"}}
	play := func(env episode.Env, g int) *episode.Episode {
		e, err := episode.Play(context.Background(), ec, &scripted{replies: append([]string(nil), replies[g]...)}, env, fmt.Sprintf("s%d", g), "q")
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	var eps []*episode.Episode
	for range 2 {
		for g := range 4 {
			eps = append(eps, play(yesEnv{}, g))
		}
	}
	problems := []task.Problem{{Prompt: "q", Answer: "yes"}, {Prompt: "q", Answer: "yes"}}
	ro, excluded, err := rollout.FromEpisodes(problems, 4, eps)
	if err != nil {
		t.Fatal(err)
	}
	if excluded[0] || excluded[1] || ro.Rewards[0] != 2 || ro.Rewards[3] != 0 || eps[0].End != episode.TurnLimit {
		t.Fatalf("excluded %v rewards %v end %s", excluded, ro.Rewards, eps[0].End)
	}
	// π_old is the model's own log-probability of its tokens (ratios start at 1).
	setOld := func(ro *rollout.Rollouts) {
		lb, err := tr.logProbs(tr.policy, ro, 0, ro.N(), false)
		if err != nil {
			t.Fatal(err)
		}
		for i := range ro.OldLogP {
			for k := range ro.OldLogP[i] {
				ro.OldLogP[i][k] = float32(lb.logP[i][k])
			}
		}
	}
	setOld(ro)
	// log π of the reply "yes" in turn 1, summed, for the first episode.
	yes := func() float64 {
		lb, err := tr.logProbs(tr.policy, ro, 0, 1, false)
		if err != nil {
			t.Fatal(err)
		}
		tn := eps[0].Turns[0]
		var s float64
		for k := tn.Start; k < tn.End; k++ {
			s += lb.logP[0][k-len(ro.Prompts[0])]
		}
		return s
	}
	before := yes()
	state := tr.State()
	st, err := tr.Train(context.Background(), ro)
	if err != nil || math.IsNaN(st.Loss) {
		t.Fatalf("%+v %v", st, err)
	}
	gen := 0
	for _, e := range eps {
		gen += e.ModelTokens()
	}
	if st.GenTokens != gen {
		t.Fatalf("generated tokens %d, the episodes' model tokens %d", st.GenTokens, gen)
	}
	after1 := adapterBytes(tr.Adapter())

	// The environment's recorded log-probabilities are not used.
	tr2, err := Resume(base, tok, c, 1, 1, state)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ro.OldLogP {
		for k, m := range ro.Mask[i] {
			if !m {
				ro.OldLogP[i][k] = -7.5
			}
		}
	}
	if _, err := tr2.Train(context.Background(), ro); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(adapterBytes(tr2.Adapter()), after1) {
		t.Fatal("the environment tokens' log-probabilities changed the update")
	}
	for range 5 {
		setOld(ro)
		if _, err := tr.Train(context.Background(), ro); err != nil {
			t.Fatal(err)
		}
	}
	if after := yes(); !(after > before) {
		t.Errorf("log π(yes) went from %.4f to %.4f over 6 updates", before, after)
	} else {
		t.Logf("log π(\"yes\"<|im_end|>) in turn 1: %.4f → %.4f over 6 updates", before, after)
	}

	// A group where the environment failed is left out: its rewards are 0.
	eps[5] = play(yesEnv{fail: true}, 1)
	if !eps[5].EnvFault() {
		t.Fatalf("end %s", eps[5].End)
	}
	ro2, excluded, err := rollout.FromEpisodes(problems, 4, eps)
	if err != nil {
		t.Fatal(err)
	}
	if excluded[0] || !excluded[1] || ro2.Rewards[4] != 0 || ro2.Rewards[0] != 2 {
		t.Fatalf("excluded %v rewards %v", excluded, ro2.Rewards)
	}
	if _, err := tr.Train(context.Background(), ro2); err != nil {
		t.Fatal(err)
	}
}

// lenEnv rewards a reply by its length mod 3; sessions named in fail
// crash at their first step.
type lenEnv struct{ fail map[string]bool }

func (lenEnv) Reset(context.Context, string, string) (string, error) { return "Say something.", nil }
func (e lenEnv) Step(_ context.Context, session, action string) (envserver.StepResult, error) {
	if e.fail[session] {
		return envserver.StepResult{}, &envserver.Error{Endpoint: "/step", Kind: envserver.KindConnection, Msg: "crashed"}
	}
	return envserver.StepResult{Observation: "More.", Reward: float64(len(action) % 3)}, nil
}

// TestStepEpisodes: a training step that plays its episodes against the
// environment replays bit for bit against their records, without it; a
// group whose environment failed is left out.
func TestStepEpisodes(t *testing.T) {
	mc := tinyllama.ChatConfig()
	base, err := tinyllama.Weights(mc, 2, 0.02) // near-uniform: replies end (<|im_end|>) often enough to reach the environment
	if err != nil {
		t.Fatal(err)
	}
	tok := tinyllama.ChatTokenizer()
	src, err := os.ReadFile("../chat/testdata/templates/Qwen-Qwen2.5-7B-Instruct.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tm, err := chat.Compile(string(src))
	if err != nil {
		t.Fatal(err)
	}
	ec := episode.Config{Template: tm, Tokenizer: tok, System: "s", EOS: mc.EOS, // replies are the actions (a random model writes stray tool-call markup)
		MaxTurns: 2, MaxTokens: 450, MaxObservationBytes: 256}
	c := tinyConfig()
	c.PromptsPerStep, c.GroupSize, c.GradientAccumulationSteps = 2, 4, 1
	tr, err := New(base, tok, c, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	before := tr.State()
	ctx := context.Background()
	st, excluded, err := tr.StepEpisodes(ctx, lenEnv{}, ec)
	if err != nil || math.IsNaN(st.Loss) || excluded[0] || excluded[1] {
		t.Fatalf("%+v %v %v", st, excluded, err)
	}
	eps := tr.Rollouts().Episodes
	steps := 0
	for _, e := range eps {
		for _, tn := range e.Turns {
			steps += len(tn.Steps)
		}
	}
	if steps == 0 || st.GenTokens == 0 {
		t.Fatalf("no episode reached the environment (%d generated tokens)", st.GenTokens)
	}
	t.Logf("8 episodes, %d steps, %d model tokens, rewards %v, loss %.4f", steps, st.GenTokens, tr.Rollouts().Rewards, st.Loss)

	// The validator's replay: the same step against the records.
	re, err := Resume(base, tok, c, 3, 2, before)
	if err != nil {
		t.Fatal(err)
	}
	st2, _, err := re.StepEpisodes(ctx, episode.NewTranscripts(eps), ec)
	if err != nil {
		t.Fatal(err)
	}
	if math.Float64bits(st2.Loss) != math.Float64bits(st.Loss) || !bytes.Equal(adapterBytes(re.Adapter()), adapterBytes(tr.Adapter())) {
		t.Fatalf("replay: loss %v vs %v, adapters equal %v", st2.Loss, st.Loss, bytes.Equal(adapterBytes(re.Adapter()), adapterBytes(tr.Adapter())))
	}

	// The environment fails one episode of problem 1: that group is out.
	fresh, err := Resume(base, tok, c, 3, 1, before)
	if err != nil {
		t.Fatal(err)
	}
	var crash string
	for _, e := range eps[4:] {
		if len(e.Turns) > 0 && len(e.Turns[0].Steps) > 0 {
			crash = e.Session
			break
		}
	}
	if crash == "" {
		t.Fatal("no episode of problem 1 reached the environment")
	}
	_, excluded, err = fresh.StepEpisodes(ctx, lenEnv{fail: map[string]bool{crash: true}}, ec)
	if err != nil || excluded[0] || !excluded[1] {
		t.Fatalf("excluded %v, %v", excluded, err)
	}
	for g := 4; g < 8; g++ {
		if r := fresh.Rollouts().Rewards[g]; r != 0 {
			t.Fatalf("reward %v in the excluded group", r)
		}
	}
}
