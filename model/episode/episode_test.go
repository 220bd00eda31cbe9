package episode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zooai/gym/internal/tinyllama"
	"github.com/zooai/gym/model/chat"
	"github.com/zooai/gym/model/envserver"
	"github.com/zooai/gym/model/tokenizer"
	"github.com/zooai/gym/model/toolcall"
)

const eot = tinyllama.ChatEOS // <|im_end|>

func config(t *testing.T) Config {
	t.Helper()
	src, err := os.ReadFile("../chat/testdata/templates/Qwen-Qwen2.5-7B-Instruct.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tm, err := chat.Compile(string(src))
	if err != nil {
		t.Fatal(err)
	}
	f, _ := toolcall.Detect(string(src))
	return Config{Template: tm, Tokenizer: tinyllama.ChatTokenizer(), Format: f, EOS: []int{eot},
		Tools:    json.RawMessage(`[{"type": "function", "function": {"name": "calc", "description": "Multiply.", "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}}}}]`),
		MaxTurns: 4, MaxTokens: 4096, MaxObservationBytes: 1 << 10}
}

// script is a policy that writes the given replies, one a turn, each
// ending with <|im_end|>; log-probabilities are -(i+1)/100 for the i-th
// token of the reply.
type script struct {
	tok     *tokenizer.Tokenizer
	replies []string
	turn    int
	seen    [][]int
}

func (s *script) Generate(_ context.Context, prompt []int, maxNew int) ([]int, []float32, error) {
	s.seen = append(s.seen, prompt)
	if s.turn >= len(s.replies) {
		return nil, nil, errors.New("no more replies")
	}
	ids, err := s.tok.Encode(s.replies[s.turn], false)
	if err != nil {
		return nil, nil, err
	}
	s.turn++
	ids = append(ids, eot)
	if len(ids) > maxNew {
		ids = ids[:maxNew]
	}
	lp := make([]float32, len(ids))
	for i := range lp {
		lp[i] = -float32(i+1) / 100
	}
	return ids, lp, nil
}

// calc is an environment: a multiplication to do with the calc tool, then
// the answer; reward 1 for the right one.
type calc struct {
	a, b    int
	calls   int
	failAt  int    // fail the n-th step (1-based); 0 never
	observe string // an observation to give instead of the result
	hang    bool
}

func (c *calc) Reset(_ context.Context, session, prompt string) (string, error) {
	if _, err := fmt.Sscanf(prompt, "%d*%d", &c.a, &c.b); err != nil {
		return "", err
	}
	return fmt.Sprintf("What is %d*%d? Use the calc tool, then answer with the number alone.", c.a, c.b), nil
}

func (c *calc) Step(ctx context.Context, session, action string) (envserver.StepResult, error) {
	c.calls++
	if c.hang {
		<-ctx.Done()
		return envserver.StepResult{}, &envserver.Error{Endpoint: "/step", Kind: envserver.KindTimeout, Err: ctx.Err()}
	}
	if c.calls == c.failAt {
		return envserver.StepResult{}, &envserver.Error{Endpoint: "/step", Kind: envserver.KindMalformed, Msg: "garbage"}
	}
	var call struct {
		Name      string `json:"name"`
		Arguments struct {
			Expr string `json:"expr"`
		} `json:"arguments"`
	}
	if json.Unmarshal([]byte(action), &call) == nil && call.Name == "calc" {
		var a, b int
		fmt.Sscanf(call.Arguments.Expr, "%d*%d", &a, &b)
		obs := fmt.Sprint(a * b)
		if c.observe != "" {
			obs = c.observe
		}
		return envserver.StepResult{Observation: obs}, nil
	}
	if strings.TrimSpace(action) == fmt.Sprint(c.a*c.b) {
		return envserver.StepResult{Observation: "correct", Reward: 1, Done: true}, nil
	}
	return envserver.StepResult{Observation: "wrong", Done: true}, nil
}

func decode(t *testing.T, tok *tokenizer.Tokenizer, ids []int) string {
	t.Helper()
	s, err := tok.Decode(ids, false)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestToolEpisode: the model calls the tool, reads its result and answers;
// the sequence is the template's rendering of the whole conversation, the
// mask covers exactly the model's replies, and a replay from the record
// gives the same episode.
func TestToolEpisode(t *testing.T) {
	c := config(t)
	replies := []string{"<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expr\": \"12*7\"}}\n</tool_call>", "84"}
	p := &script{tok: c.Tokenizer, replies: replies}
	e, err := Play(context.Background(), c, p, &calc{}, "s-1", "12*7")
	if err != nil {
		t.Fatal(err)
	}
	if e.End != Done || e.Reward != 1 || len(e.Turns) != 2 || e.EnvFault() {
		t.Fatalf("end %s (%s), reward %v, %d turns", e.End, e.Detail, e.Reward, len(e.Turns))
	}
	if got := e.Turns[0].Calls; len(got) != 1 || got[0].Name != "calc" || e.Turns[0].Steps[0].Action != `{"name":"calc","arguments":{"expr":"12*7"}}` || e.Turns[0].Steps[0].Observation != "84" {
		t.Errorf("turn 1: calls %+v steps %+v", got, e.Turns[0].Steps)
	}
	// The whole sequence is the template's rendering of the conversation
	// (less the newline after the last end-of-turn).
	final, err := c.Template.Render(e.Messages, chat.Options{Tools: c.Tools})
	if err != nil {
		t.Fatal(err)
	}
	if got := decode(t, c.Tokenizer, e.Tokens) + "\n"; got != final {
		t.Errorf("sequence\n%q\nrendering\n%q", got, final)
	}
	// The mask: the model's tokens are its replies, each with <|im_end|>.
	var model []string
	for i, tn := range e.Turns {
		for k := tn.Start; k < tn.End; k++ {
			if !e.Model[k] || e.LogP[k] != -float32(k-tn.Start+1)/100 {
				t.Fatalf("token %d of turn %d: model %v logp %v", k, i, e.Model[k], e.LogP[k])
			}
		}
		model = append(model, decode(t, c.Tokenizer, e.Tokens[tn.Start:tn.End]))
	}
	if want := []string{replies[0] + "<|im_end|>", replies[1] + "<|im_end|>"}; fmt.Sprint(model) != fmt.Sprint(want) {
		t.Errorf("model tokens %q, want %q", model, want)
	}
	if n := e.ModelTokens(); n != e.Turns[0].End-e.Turns[0].Start+e.Turns[1].End-e.Turns[1].Start {
		t.Errorf("%d model tokens", n)
	}
	between := decode(t, c.Tokenizer, e.Tokens[e.Turns[0].End:e.Turns[1].Start])
	if want := "\n<|im_start|>user\n<tool_response>\n84\n</tool_response><|im_end|>\n<|im_start|>assistant\n"; between != want {
		t.Errorf("environment tokens %q, want %q", between, want)
	}
	for k := e.Turns[0].End; k < e.Turns[1].Start; k++ {
		if e.Model[k] || e.LogP[k] != 0 {
			t.Fatalf("environment token %d is marked the model's", k)
		}
	}
	// What the model saw on turn 2 is the sequence up to its reply.
	if fmt.Sprint(p.seen[1]) != fmt.Sprint(e.Tokens[:e.Turns[1].Start]) {
		t.Error("turn 2's prompt is not the sequence before it")
	}

	if err := Replay(context.Background(), c, &script{tok: c.Tokenizer, replies: replies}, e); err != nil {
		t.Fatalf("replay: %v", err)
	}
	other := &script{tok: c.Tokenizer, replies: []string{replies[0], "85"}}
	if err := Replay(context.Background(), c, other, e); !errors.Is(err, ErrDiverged) {
		t.Fatalf("a replay with another answer: %v", err)
	}
}

// TestEndings: every way an episode ends, and whose fault it is.
func TestEndings(t *testing.T) {
	call := "<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expr\": \"3*4\"}}\n</tool_call>"
	for _, tc := range []struct {
		name    string
		replies []string
		env     *calc
		mod     func(*Config)
		end     End
		reward  float64
		fault   bool
		detail  string
	}{
		{"wrong answer", []string{"13"}, &calc{}, nil, Done, 0, false, ""},
		{"right answer without the tool", []string{"12"}, &calc{}, nil, Done, 1, false, ""},
		{"malformed call", []string{"<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expr\": \n</tool_call>"}, &calc{}, nil, ModelMistake, 0, false, "bad_json"},
		{"unclosed call", []string{"<tool_call>\n{\"name\": \"calc\""}, &calc{}, nil, ModelMistake, 0, false, "unclosed"},
		{"turn limit", []string{call, call}, &calc{}, func(c *Config) { c.MaxTurns = 2 }, TurnLimit, 0, false, ""},
		{"reply cut by the token limit", []string{call, "12"}, &calc{}, func(c *Config) { c.MaxTokens = 680 }, TokenLimit, 0, false, "cut"},
		{"observation over the token limit", []string{call, "12"}, &calc{}, func(c *Config) { c.MaxTokens = 740 }, TokenLimit, 0, false, "observation"},
		{"prompt over the token limit", []string{call}, &calc{}, func(c *Config) { c.MaxTokens = 100 }, TokenLimit, 0, false, "prompt"},
		{"environment garbage", []string{call}, &calc{failAt: 1}, nil, EnvFailure, 0, true, "garbage"},
		{"environment crash mid-episode", []string{call, call}, &calc{failAt: 2}, nil, EnvFailure, 0, true, "turn 2"},
		{"enormous observation", []string{call}, &calc{observe: strings.Repeat("x", 2000)}, nil, EnvFailure, 0, true, "2000 bytes"},
		{"environment hangs", []string{call}, &calc{hang: true}, func(c *Config) { c.StepTimeout = time.Millisecond }, EnvFailure, 0, true, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := config(t)
			if tc.mod != nil {
				tc.mod(&c)
			}
			e, err := Play(context.Background(), c, &script{tok: c.Tokenizer, replies: tc.replies}, tc.env, "s", "3*4")
			if err != nil {
				t.Fatal(err)
			}
			if e.End != tc.end || e.Reward != tc.reward || e.EnvFault() != tc.fault || !strings.Contains(e.Detail, tc.detail) {
				t.Fatalf("end %s (%q), reward %v, env fault %v; want %s (%q), %v, %v", e.End, e.Detail, e.Reward, e.EnvFault(), tc.end, tc.detail, tc.reward, tc.fault)
			}
			if len(e.Tokens) > c.MaxTokens || len(e.Model) != len(e.Tokens) || len(e.LogP) != len(e.Tokens) {
				t.Fatalf("%d tokens (at most %d), %d mask, %d logp", len(e.Tokens), c.MaxTokens, len(e.Model), len(e.LogP))
			}
			// Every ending replays from its record, read back from JSON.
			b, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			recs, err := ReadJSONL(bytes.NewReader(append(b, '\n')), 1)
			if err != nil {
				t.Fatalf("reading the record back: %v", err)
			}
			if err := Replay(context.Background(), c, &script{tok: c.Tokenizer, replies: tc.replies}, recs[0]); err != nil {
				t.Fatalf("replay: %v", err)
			}
		})
	}
}

func TestResetFailure(t *testing.T) {
	c := config(t)
	e, err := Play(context.Background(), c, &script{tok: c.Tokenizer}, &calc{}, "s", "not a product")
	if err != nil || e.End != EnvFailure || !e.EnvFault() || len(e.Tokens) != 0 {
		t.Fatalf("%+v %v", e, err)
	}
	if err := Replay(context.Background(), c, &script{tok: c.Tokenizer}, e); err != nil {
		t.Fatalf("replay: %v", err)
	}
	if _, err := Play(context.Background(), Config{}, nil, nil, "s", "x"); err == nil {
		t.Error("an empty config plays")
	}
}

// TestRecordChecks: a record whose parts contradict each other is refused.
func TestRecordChecks(t *testing.T) {
	c := config(t)
	e, err := Play(context.Background(), c, &script{tok: c.Tokenizer, replies: []string{"<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expr\": \"3*4\"}}\n</tool_call>", "12"}}, &calc{}, "s", "3*4")
	if err != nil {
		t.Fatal(err)
	}
	good, _ := json.Marshal(e)
	if _, err := ReadJSONL(bytes.NewReader(good), 1); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*Episode){
		"short mask":         func(e *Episode) { e.Model = e.Model[1:] },
		"mask off a turn":    func(e *Episode) { e.Model[e.Turns[0].Start] = false },
		"env token as model": func(e *Episode) { e.Model[0] = true },
		"env logp":           func(e *Episode) { e.LogP[0] = -1 },
		"positive logp":      func(e *Episode) { e.LogP[e.Turns[0].Start] = 0.5 },
		"turns out of order": func(e *Episode) { e.Turns[0], e.Turns[1] = e.Turns[1], e.Turns[0] },
		"span past the end":  func(e *Episode) { e.Turns[1].End = len(e.Tokens) + 1 },
		"unknown end":        func(e *Episode) { e.End = "whatever" },
		"negative token":     func(e *Episode) { e.Tokens[3] = -1 },
	} {
		var x Episode
		if err := json.Unmarshal(good, &x); err != nil {
			t.Fatal(err)
		}
		edit(&x)
		b, _ := json.Marshal(&x)
		if _, err := ReadJSONL(bytes.NewReader(b), 1); !errors.Is(err, ErrRecord) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, line := range map[string]string{
		"unknown field": strings.Replace(string(good), `"session"`, `"sessionx"`, 1),
		"two objects":   string(good) + " {}",
		"too many":      string(good) + "\n" + string(good),
	} {
		if _, err := ReadJSONL(strings.NewReader(line), 1); !errors.Is(err, ErrRecord) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzReadJSONL: any input reads as checked episodes or ErrRecord.
func FuzzReadJSONL(f *testing.F) {
	f.Add([]byte(`{"session":"s","prompt":"p","reset":"r","tokens":[1,2,3],"model":[false,true,true],"logp":[0,-1,-0.5],"turns":[{"start":1,"end":3,"text":"x","steps":[{"action":"a","observation":"o","reward":1,"done":true}]}],"reward":1,"end":"done"}`))
	f.Add([]byte("\n{\"tokens\":[],\"model\":[],\"logp\":[],\"turns\":[],\"reward\":0,\"end\":\"env_failure\"}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		eps, err := ReadJSONL(bytes.NewReader(data), 8)
		if err != nil {
			if !errors.Is(err, ErrRecord) {
				t.Fatalf("error of no kind: %v", err)
			}
			return
		}
		for _, e := range eps {
			if err := e.Check(); err != nil {
				t.Fatalf("read a record that does not check: %v", err)
			}
		}
	})
}
