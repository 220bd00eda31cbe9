// Package episode plays one multi-turn episode of a model against an
// environment (docs/environments.md, "/reset" and "/step"), through the
// model's chat template, and records it as training needs it: one token
// sequence with a mask of the tokens the model generated (trained on) and
// those that came from the prompt and the environment (masked out), the
// log-probability of each generated token, every turn's text, tool calls,
// actions, observations and rewards, and why the episode ended.
//
// A turn: the conversation is rendered with a generation prompt; the
// policy generates the model's reply (until its end-of-turn token or the
// episode's token budget); the reply is read for tool calls in the
// template's format (package toolcall): each call is sent to the
// environment as a step whose action is the JSON {"name", "arguments"},
// and its observation comes back as a tool message; a reply without calls
// is itself the action, its observation coming back as a user message.
// The environment's part of the sequence is the difference between the
// template's rendering of the conversation after the turn and before it
// (with the rest of the model's end-of-turn line), so the model's own
// tokens are kept exactly as sampled ("tokens in, tokens out") and the
// sequence is what the model saw.
//
// The episode's reward is the sum of its steps' rewards. How it ends
// (End) says whose fault it was: the environment said done, a limit
// (turns, tokens) was reached, the model made a mistake (a malformed tool
// call: a reward signal, never an error), or the environment failed (no
// answer in time, garbage, an observation over the bound, a crash) or the
// template cannot extend the conversation — those two are not the model's
// doing: EnvFault reports them, and a trainer leaves such episodes out of
// its update and says why.
//
// Play is a pure function of its inputs and the environment's answers:
// Replay plays an episode again against its own record (Transcript) with
// no server, and a policy that samples from a seeded stream gives the same
// tokens. What is not done here: the worker and GSPO do not yet play
// episodes (a job cannot name an environment as its episode source), and
// traces do not yet hold them; see issue 43.
package episode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/zooai/gym/model/chat"
	"github.com/zooai/gym/model/envserver"
	"github.com/zooai/gym/model/tokenizer"
	"github.com/zooai/gym/model/toolcall"
)

// Env is a multi-turn environment: envserver.Client is one.
type Env interface {
	Reset(ctx context.Context, session, prompt string) (string, error)
	Step(ctx context.Context, session, action string) (envserver.StepResult, error)
}

// Policy generates the model's turn: at most maxNew tokens following
// prompt (the whole sequence so far), ending with an end-of-turn token
// when it samples one, and the log-probability of each.
type Policy interface {
	Generate(ctx context.Context, prompt []int, maxNew int) (tokens []int, logp []float32, err error)
}

// Config is what an episode is played with.
type Config struct {
	Template  *chat.Template
	Vars      map[string]json.RawMessage // the template's variables (chat.Set.Vars)
	Tokenizer *tokenizer.Tokenizer
	// Format is the template's tool-call format (toolcall.Detect); 0
	// sends every reply to the environment as it is.
	Format toolcall.Format
	// Tools are the tool schemas the model is shown (a JSON list), nil
	// for none.
	Tools json.RawMessage
	// System, when not empty, is the conversation's system message.
	System string
	// EOS are the end-of-turn token ids.
	EOS []int
	// MaxTurns bounds the model's turns, MaxTokens the whole sequence
	// (prompt, replies, observations).
	MaxTurns, MaxTokens int
	// MaxObservationBytes bounds one observation; a longer one fails the
	// episode as the environment's fault.
	MaxObservationBytes int
	// StepTimeout bounds each call to the environment (with the client's
	// own bounds); 0 is none beyond ctx.
	StepTimeout time.Duration
}

// Validate reports whether c can play episodes.
func (c Config) Validate() error {
	switch {
	case c.Template == nil || c.Tokenizer == nil:
		return errors.New("episode: a template and a tokenizer are needed")
	case len(c.EOS) == 0:
		return errors.New("episode: no end-of-turn token")
	case c.MaxTurns < 1 || c.MaxTokens < 1 || c.MaxObservationBytes < 1:
		return fmt.Errorf("episode: limits must be positive (turns %d, tokens %d, observation bytes %d)", c.MaxTurns, c.MaxTokens, c.MaxObservationBytes)
	}
	return nil
}

// End is why an episode ended.
type End string

const (
	Done         End = "done"          // the environment said done
	TurnLimit    End = "turn_limit"    // MaxTurns turns were played
	TokenLimit   End = "token_limit"   // the sequence reached MaxTokens (the reply was cut)
	ModelMistake End = "model_mistake" // a malformed tool call
	EnvFailure   End = "env_failure"   // the environment failed (time, garbage, size, crash)
	TemplateFail End = "template"      // the template cannot render or extend the conversation
)

// Step is one call to the environment.
type Step struct {
	Action      string  `json:"action"`
	Observation string  `json:"observation"`
	Reward      float64 `json:"reward"`
	Done        bool    `json:"done"`
}

// Turn is one reply of the model and what it led to.
type Turn struct {
	// Start and End delimit the reply's tokens in Episode.Tokens.
	Start    int                `json:"start"`
	End      int                `json:"end"`
	Text     string             `json:"text"` // the reply, decoded with special tokens kept
	Calls    []toolcall.Call    `json:"calls,omitempty"`
	Mistakes []toolcall.Mistake `json:"mistakes,omitempty"`
	Steps    []Step             `json:"steps,omitempty"`
}

// Episode is one played episode.
//
// Its JSON form (one object, the fields below in lower case) is the
// episode's record: ReadJSONL reads and checks it, and Replay plays it
// again without the environment.
type Episode struct {
	Session string `json:"session"`
	Prompt  string `json:"prompt"` // what /reset was given
	// Reset is the first observation: the task, as the environment states it.
	Reset    string          `json:"reset"`
	Messages json.RawMessage `json:"messages,omitempty"` // the conversation at the end
	Tokens   []int           `json:"tokens"`
	Model    []bool          `json:"model"` // per token: generated by the model
	LogP     []float32       `json:"logp"`  // per token: its log-probability when Model, else 0
	Turns    []Turn          `json:"turns"`
	Reward   float64         `json:"reward"` // the sum of the steps' rewards
	End      End             `json:"end"`
	Detail   string          `json:"detail,omitempty"` // what went wrong, for a failure or a mistake
}

// EnvFault reports an episode that ended through no fault of the model:
// the environment failed or the template could not go on. A trainer
// leaves it out of the update.
func (e *Episode) EnvFault() bool { return e.End == EnvFailure || e.End == TemplateFail }

// ModelTokens is the number of tokens the model generated.
func (e *Episode) ModelTokens() int {
	n := 0
	for _, m := range e.Model {
		if m {
			n++
		}
	}
	return n
}

// Play plays one episode: session names it to the environment (1 to 128
// bytes of [A-Za-z0-9._-]), prompt is the problem given to /reset. ctx
// ends it early (as an environment failure). The error is only for a
// Config that cannot work; everything the model, the environment or the
// template does is in the Episode.
func Play(ctx context.Context, c Config, p Policy, env Env, session, prompt string) (*Episode, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	e := &Episode{Session: session, Prompt: prompt}
	call := func(f func(ctx context.Context) error) error {
		cctx := ctx
		if c.StepTimeout > 0 {
			var cancel context.CancelFunc
			cctx, cancel = context.WithTimeout(ctx, c.StepTimeout)
			defer cancel()
		}
		return f(cctx)
	}
	fail := func(end End, format string, a ...any) (*Episode, error) {
		e.End, e.Detail = end, fmt.Sprintf(format, a...)
		return e, nil
	}
	var obs string
	if err := call(func(ctx context.Context) (err error) { obs, err = env.Reset(ctx, session, prompt); return }); err != nil {
		return fail(EnvFailure, "/reset: %v", err)
	}
	if err := c.checkObservation(obs); err != nil {
		return fail(EnvFailure, "/reset: %v", err)
	}
	e.Reset = obs
	var conv []json.RawMessage
	if c.System != "" {
		conv = append(conv, message("system", c.System))
	}
	conv = append(conv, message("user", obs))
	e.Messages = list(conv)

	text, err := c.render(conv, true)
	if err != nil {
		return fail(TemplateFail, "%v", err)
	}
	ids, err := c.Tokenizer.Encode(text, false)
	if err != nil {
		return fail(TemplateFail, "encoding the prompt: %v", err)
	}
	if len(ids) >= c.MaxTokens {
		return fail(TokenLimit, "the prompt is %d tokens, the sequence at most %d", len(ids), c.MaxTokens)
	}
	e.push(ids, nil)
	for turn := 0; ; turn++ {
		gen, logp, err := p.Generate(ctx, slices.Clone(e.Tokens), c.MaxTokens-len(e.Tokens))
		if err != nil {
			return nil, fmt.Errorf("episode: the policy failed: %w", err)
		}
		if len(gen) != len(logp) || len(gen) > c.MaxTokens-len(e.Tokens) {
			return nil, fmt.Errorf("episode: the policy gave %d tokens and %d log-probabilities for at most %d", len(gen), len(logp), c.MaxTokens-len(e.Tokens))
		}
		t := Turn{Start: len(e.Tokens)}
		e.push(gen, logp)
		t.End = len(e.Tokens)
		reply, err := c.Tokenizer.Decode(gen, false)
		if err != nil {
			return nil, fmt.Errorf("episode: decoding the reply: %w", err)
		}
		t.Text = reply
		if len(gen) == 0 || !slices.Contains(c.EOS, gen[len(gen)-1]) {
			e.Turns = append(e.Turns, t)
			return fail(TokenLimit, "the reply was cut at %d tokens (the sequence's bound is %d)", len(gen), c.MaxTokens)
		}
		content := reply
		var parsed toolcall.Result
		if c.Format != 0 {
			parsed = toolcall.Parse(c.Format, reply)
			t.Calls, t.Mistakes, content = parsed.Calls, parsed.Mistakes, parsed.Content
			if !parsed.OK() {
				e.Turns = append(e.Turns, t)
				return fail(ModelMistake, "turn %d: %v", turn+1, parsed.Mistakes[0])
			}
		} else {
			content = toolcall.Parse(0, reply).Content
		}

		// The actions, and the messages their observations come back as.
		var assistant json.RawMessage
		var answers []json.RawMessage
		ids := func(i int) string { return fmt.Sprintf("t%02dc%05d", turn%100, i) } // 9 characters, as Mistral's templates want
		if len(t.Calls) > 0 {
			assistant = parsed.Message(ids)
			for i, cl := range t.Calls {
				action, _ := json.Marshal(struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				}{cl.Name, cl.Arguments})
				id := cl.ID
				if id == "" {
					id = ids(i)
				}
				st, err := c.step(ctx, call, env, session, string(action))
				if err != nil {
					t.Steps = append(t.Steps, st)
					e.Turns = append(e.Turns, t)
					return fail(EnvFailure, "turn %d: /step: %v", turn+1, err)
				}
				t.Steps = append(t.Steps, st)
				e.Reward += st.Reward
				answers = append(answers, toolMessage(id, cl.Name, st.Observation))
				if st.Done {
					break
				}
			}
		} else {
			assistant = message("assistant", content)
			if parsed.Reasoning != "" {
				assistant = parsed.Message(ids)
			}
			st, err := c.step(ctx, call, env, session, content)
			t.Steps = append(t.Steps, st)
			if err != nil {
				e.Turns = append(e.Turns, t)
				return fail(EnvFailure, "turn %d: /step: %v", turn+1, err)
			}
			e.Reward += st.Reward
			answers = append(answers, message("user", st.Observation))
		}
		e.Turns = append(e.Turns, t)
		conv = append(conv, assistant)
		e.Messages = list(conv)
		if last := t.Steps[len(t.Steps)-1]; last.Done {
			e.End = Done
			return e, nil
		}
		if turn+1 >= c.MaxTurns {
			return fail(TurnLimit, "%d turns", c.MaxTurns)
		}
		// The environment's tokens: the rest of the model's end-of-turn
		// line and the template's rendering of the observations, up to
		// the next generation prompt.
		before, err := c.render(conv, false)
		if err != nil {
			return fail(TemplateFail, "%v", err)
		}
		conv = append(conv, answers...)
		e.Messages = list(conv)
		after, err := c.render(conv, true)
		if err != nil {
			return fail(TemplateFail, "%v", err)
		}
		if !strings.HasPrefix(after, before) {
			return fail(TemplateFail, "the template renders the conversation's earlier turns differently once the observation is added")
		}
		eot, _ := c.Tokenizer.Decode(gen[len(gen)-1:], false)
		k := strings.LastIndex(before, eot)
		if eot == "" || k < 0 {
			return fail(TemplateFail, "the template does not end the assistant's turn with its end-of-turn token %q", eot)
		}
		delta := before[k+len(eot):] + after[len(before):]
		envIDs, err := c.Tokenizer.Encode(delta, false)
		if err != nil {
			return fail(TemplateFail, "encoding the observation: %v", err)
		}
		if len(e.Tokens)+len(envIDs) >= c.MaxTokens {
			return fail(TokenLimit, "the observation of turn %d takes the sequence to %d tokens, at most %d", turn+1, len(e.Tokens)+len(envIDs), c.MaxTokens)
		}
		e.push(envIDs, nil)
	}
}

// step sends one action.
func (c Config) step(ctx context.Context, call func(func(context.Context) error) error, env Env, session, action string) (Step, error) {
	var r envserver.StepResult
	err := call(func(ctx context.Context) (err error) { r, err = env.Step(ctx, session, action); return })
	st := Step{Action: action, Observation: r.Observation, Reward: r.Reward, Done: r.Done}
	if err != nil {
		return st, err
	}
	if err := c.checkObservation(r.Observation); err != nil {
		st.Observation = ""
		return st, err
	}
	return st, nil
}

func (c Config) checkObservation(obs string) error {
	if len(obs) > c.MaxObservationBytes {
		return fmt.Errorf("an observation of %d bytes, at most %d", len(obs), c.MaxObservationBytes)
	}
	if !utf8.ValidString(obs) {
		return errors.New("an observation that is not UTF-8")
	}
	return nil
}

func (c Config) render(conv []json.RawMessage, gen bool) (string, error) {
	return c.Template.Render(list(conv), chat.Options{AddGenerationPrompt: gen, Tools: c.Tools, Vars: c.Vars})
}

func (e *Episode) push(ids []int, logp []float32) {
	e.Tokens = append(e.Tokens, ids...)
	for i := range ids {
		e.Model = append(e.Model, logp != nil)
		if logp != nil {
			e.LogP = append(e.LogP, logp[i])
		} else {
			e.LogP = append(e.LogP, 0)
		}
	}
}

func message(role, content string) json.RawMessage {
	b, _ := json.Marshal(struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}{role, content})
	return b
}

func toolMessage(id, name, content string) json.RawMessage {
	b, _ := json.Marshal(struct {
		Role       string `json:"role"`
		ToolCallID string `json:"tool_call_id"`
		Name       string `json:"name"`
		Content    string `json:"content"`
	}{"tool", id, name, content})
	return b
}

func list(ms []json.RawMessage) json.RawMessage {
	b, _ := json.Marshal(ms)
	return b
}

// Transcript is an environment that answers from a played episode's
// record: its reset observation and its steps, in order, each action
// checked against the one recorded. It is how an episode is replayed
// without the server.
type Transcript struct {
	e    *Episode
	next int
}

// NewTranscript replays e.
func NewTranscript(e *Episode) *Transcript { return &Transcript{e: e} }

// ErrDiverged reports a replay whose action differs from the recorded one.
var ErrDiverged = errors.New("episode: the replay diverged from the record")

func (t *Transcript) Reset(_ context.Context, session, prompt string) (string, error) {
	if session != t.e.Session || prompt != t.e.Prompt {
		return "", fmt.Errorf("%w: reset of %q/%q, the record's is %q/%q", ErrDiverged, session, prompt, t.e.Session, t.e.Prompt)
	}
	if t.e.End == EnvFailure && len(t.e.Turns) == 0 {
		return "", errors.New("the recorded environment failed at /reset")
	}
	return t.e.Reset, nil
}

func (t *Transcript) Step(_ context.Context, session, action string) (envserver.StepResult, error) {
	var steps []Step
	for _, tn := range t.e.Turns {
		steps = append(steps, tn.Steps...)
	}
	if t.next >= len(steps) {
		return envserver.StepResult{}, fmt.Errorf("%w: step %d, the record has %d", ErrDiverged, t.next+1, len(steps))
	}
	s := steps[t.next]
	t.next++
	if action != s.Action {
		return envserver.StepResult{}, fmt.Errorf("%w: step %d's action is %.80q, the record's %.80q", ErrDiverged, t.next, action, s.Action)
	}
	if t.next == len(steps) && t.e.End == EnvFailure {
		return envserver.StepResult{}, errors.New("the recorded environment failed here")
	}
	return envserver.StepResult{Observation: s.Observation, Reward: s.Reward, Done: s.Done}, nil
}

// Replay plays e again with policy p against its own record and reports
// whether it is the same episode: the same tokens, mask, turns and reward.
// (The log-probabilities are the policy's to check: a replay on other
// hardware may differ in the last bits.)
func Replay(ctx context.Context, c Config, p Policy, e *Episode) error {
	again, err := Play(ctx, c, p, NewTranscript(e), e.Session, e.Prompt)
	if err != nil {
		return err
	}
	switch {
	case !slices.Equal(again.Tokens, e.Tokens):
		return fmt.Errorf("%w: %d tokens, the record has %d (first difference at %d)", ErrDiverged, len(again.Tokens), len(e.Tokens), firstDiff(again.Tokens, e.Tokens))
	case !slices.Equal(again.Model, e.Model):
		return fmt.Errorf("%w: the mask differs", ErrDiverged)
	case again.Reward != e.Reward || again.End != e.End || len(again.Turns) != len(e.Turns):
		return fmt.Errorf("%w: reward %v end %s after %d turns, the record's %v %s after %d", ErrDiverged, again.Reward, again.End, len(again.Turns), e.Reward, e.End, len(e.Turns))
	}
	return nil
}

func firstDiff(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// Transcripts is an environment that answers each session from its
// episode's record (NewTranscript): a whole step's episodes replayed
// without the environment. A session it has no record of is an error.
type Transcripts map[string]*Transcript

// NewTranscripts replays eps, by session.
func NewTranscripts(eps []*Episode) Transcripts {
	m := Transcripts{}
	for _, e := range eps {
		m[e.Session] = NewTranscript(e)
	}
	return m
}

func (m Transcripts) Reset(ctx context.Context, session, prompt string) (string, error) {
	t, ok := m[session]
	if !ok {
		return "", fmt.Errorf("%w: no record of session %q", ErrDiverged, session)
	}
	return t.Reset(ctx, session, prompt)
}

func (m Transcripts) Step(ctx context.Context, session, action string) (envserver.StepResult, error) {
	t, ok := m[session]
	if !ok {
		return envserver.StepResult{}, fmt.Errorf("%w: no record of session %q", ErrDiverged, session)
	}
	return t.Step(ctx, session, action)
}
