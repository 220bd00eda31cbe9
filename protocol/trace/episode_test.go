package trace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/zooai/gym/internal/tinyllama"
	"github.com/zooai/gym/model/chat"
	"github.com/zooai/gym/model/envserver"
	"github.com/zooai/gym/model/episode"
	"github.com/zooai/gym/model/rollout"
	"github.com/zooai/gym/model/task"
	"github.com/zooai/gym/model/toolcall"
)

type replies []string

func (r *replies) Generate(_ context.Context, _ []int, _ int) ([]int, []float32, error) {
	ids, err := tinyllama.ChatTokenizer().Encode((*r)[0], false)
	*r = (*r)[1:]
	ids = append(ids, tinyllama.ChatEOS)
	lp := make([]float32, len(ids))
	for i := range lp {
		lp[i] = -0.25
	}
	return ids, lp, err
}

type countEnv struct{ fail bool }

func (countEnv) Reset(context.Context, string, string) (string, error) { return "Count.", nil }
func (e countEnv) Step(_ context.Context, _, a string) (envserver.StepResult, error) {
	if e.fail {
		return envserver.StepResult{}, errors.New("crashed")
	}
	return envserver.StepResult{Observation: "next", Reward: float64(len(a)), Done: len(a) > 2}, nil
}

// episodeSet is a trace of two problems × 2 episodes; the second group
// has an episode the environment failed.
func episodeSet(t testing.TB) (*Set, []*episode.Episode) {
	t.Helper()
	src, err := os.ReadFile("../../model/chat/testdata/templates/Qwen-Qwen2.5-7B-Instruct.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tm, err := chat.Compile(string(src))
	if err != nil {
		t.Fatal(err)
	}
	ec := episode.Config{Template: tm, Tokenizer: tinyllama.ChatTokenizer(), Format: toolcall.Hermes, System: "s", EOS: []int{tinyllama.ChatEOS},
		MaxTurns: 3, MaxTokens: 400, MaxObservationBytes: 100}
	var eps []*episode.Episode
	for i, c := range []struct {
		r   replies
		env countEnv
	}{{replies{"1", "12", "123"}, countEnv{}}, {replies{"123"}, countEnv{}}, {replies{"1", "2", "3"}, countEnv{}}, {replies{"1"}, countEnv{fail: true}}} {
		e, err := episode.Play(context.Background(), ec, &c.r, c.env, fmt.Sprint("s", i), "p")
		if err != nil {
			t.Fatal(err)
		}
		eps = append(eps, e)
	}
	ro, excluded, err := rollout.FromEpisodes([]task.Problem{{Prompt: "p"}, {Prompt: "p"}}, 2, eps)
	if err != nil || excluded[0] || !excluded[1] {
		t.Fatal(err, excluded)
	}
	return FromRollouts(Header{Model: "m", Dataset: "d", Temperature: 1, Vocab: 261}, ro), eps
}

// TestEpisodesInTraces: a trace of episodes holds every turn (actions,
// observations, rewards) and the mask, survives both file forms, gives
// back the rollouts it came from, and a sequence that contradicts its
// episode is refused.
func TestEpisodesInTraces(t *testing.T) {
	s, eps := episodeSet(t)
	var b bytes.Buffer
	if err := Write(&b, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"observation":"next"`) || !strings.Contains(b.String(), `"mask":[`) {
		t.Fatal("the trace does not hold the observations and the mask")
	}
	back, err := Read(bytes.NewReader(b.Bytes()), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	var pq bytes.Buffer
	if err := WriteParquet(&pq, s); err != nil {
		t.Fatal(err)
	}
	fromPQ, err := ReadParquet(bytes.NewReader(pq.Bytes()), int64(pq.Len()), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]*Set{"jsonl": back, "parquet": fromPQ} {
		ro := got.Rollouts()
		for i, e := range eps {
			if !reflect.DeepEqual(ro.Episodes[i], e) && !jsonEqual(t, ro.Episodes[i], e) {
				t.Fatalf("%s: episode %d differs", name, i)
			}
			if !reflect.DeepEqual(ro.Mask[i], s.Seqs[i].Mask) {
				t.Fatalf("%s: mask %d differs", name, i)
			}
		}
	}
	if s.Seqs[2].Reward != 0 || s.Seqs[3].Reward != 0 || s.Seqs[0].Reward != eps[0].Reward {
		t.Fatalf("rewards %v %v %v", s.Seqs[0].Reward, s.Seqs[2].Reward, s.Seqs[3].Reward)
	}

	for name, edit := range map[string]func(*Set){
		"reward":          func(s *Set) { s.Seqs[0].Reward++ },
		"excluded reward": func(s *Set) { s.Seqs[2].Reward = eps[2].Reward + 1 },
		"mask":            func(s *Set) { s.Seqs[0].Mask[0] = !s.Seqs[0].Mask[0] },
		"token":           func(s *Set) { s.Seqs[1].CompletionIDs[0]++ },
		"no mask":         func(s *Set) { s.Seqs[1].Mask = nil },
		"short mask":      func(s *Set) { s.Seqs[1].Mask = s.Seqs[1].Mask[1:] },
		"episode reward":  func(s *Set) { s.Seqs[1].Episode.Reward++ },
		"episode mask":    func(s *Set) { s.Seqs[1].Episode.Model[0] = true },
		"log-probability": func(s *Set) { s.Seqs[1].LogProbs[0] = -1.5 },
	} {
		x, _ := Read(bytes.NewReader(b.Bytes()), DefaultLimits())
		edit(x)
		var w bytes.Buffer
		if err := Write(&w, x); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: Write: %v", name, err)
		}
	}
}

func jsonEqual(t *testing.T, a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestParquetWithoutEpisodeColumns: a Parquet trace written before the
// mask and episode columns existed still reads.
func TestParquetWithoutEpisodeColumns(t *testing.T) {
	type oldRow struct {
		Prompt        int64     `parquet:"prompt"`
		Sample        int64     `parquet:"sample"`
		PromptText    string    `parquet:"prompt_text"`
		Answer        string    `parquet:"answer"`
		PromptIDs     []int32   `parquet:"prompt_ids,list"`
		Completion    string    `parquet:"completion"`
		CompletionIDs []int32   `parquet:"completion_ids,list"`
		LogProbs      []float32 `parquet:"logprobs,list"`
		Reward        float64   `parquet:"reward"`
		RewardFailed  bool      `parquet:"reward_failed"`
	}
	h, _ := json.Marshal(Header{Format: Format, Version: Version, Model: "m", Dataset: "d", Temperature: 1, Vocab: 10, Prompts: 1, GroupSize: 1})
	var b bytes.Buffer
	if err := parquet.Write(&b, []oldRow{{PromptText: "p", PromptIDs: []int32{1}, Completion: "c", CompletionIDs: []int32{2}, LogProbs: []float32{-1}, Reward: 1}},
		parquet.KeyValueMetadata(ParquetKey, string(h))); err != nil {
		t.Fatal(err)
	}
	s, err := ReadParquet(bytes.NewReader(b.Bytes()), int64(b.Len()), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if s.Seqs[0].Mask != nil || s.Seqs[0].Episode != nil || s.Seqs[0].Reward != 1 {
		t.Fatalf("%+v", s.Seqs[0])
	}
}
