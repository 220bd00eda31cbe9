package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/spf13/cobra"
	"github.com/zooai/gym/internal/atomicfile"
	"github.com/zooai/gym/model/envserver"
	"github.com/zooai/gym/model/episode"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/prng"
	"github.com/zooai/gym/model/rollout"
	"github.com/zooai/gym/model/toolcall"
)

type envPlayOptions struct {
	modelDir, checkpoint, prompt, system, out, replay, tools string
	episodes, turns, maxTokens, topK, threads                int
	seed                                                     uint64
	temperature                                              float64
	timeout                                                  time.Duration
}

// envPlayStream labels gym env play's sampler streams: episode i samples
// from prng.New(seed, envPlayStream, i).
const envPlayStream = 0x706c6179 // "play"

func newEnvPlay() *cobra.Command {
	o := envPlayOptions{prompt: "play", episodes: 1, turns: 8, maxTokens: 2048, temperature: 1, threads: runtime.GOMAXPROCS(0), timeout: envserver.DefaultConfig().Timeout}
	cmd := &cobra.Command{
		Use:   "play URL --model DIR [--checkpoint PATH] [--episodes N] [--out FILE] [--replay FILE]",
		Short: "Play multi-turn episodes of a chat model against an environment server",
		Long: `play runs episodes of the model (an instruct model directory with a chat
template, and optionally a checkpoint's adapter) against URL's /reset and /step
(docs/environments.md): the conversation goes through the model's chat
template, the model's tool calls (in its template's format: Qwen/Hermes
<tool_call>, Llama 3 JSON, Mistral [TOOL_CALLS]) are sent as steps and their
observations come back as tool messages, a reply without calls is itself the
action. It prints each turn and a summary, and with --out writes each
episode's record (JSON Lines: the token sequence, which tokens are the
model's, their log-probabilities, every turn's text, calls, actions,
observations and rewards, and how it ended).

--replay FILE plays the recorded episodes again with the same model, seed and
flags against their own records, without the server, and reports whether each
is the same episode (URL is then not contacted).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runEnvPlay(cmd.Context(), args[0], o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.modelDir, "model", "", "the model directory (with a chat template)")
	f.StringVar(&o.checkpoint, "checkpoint", "", "a checkpoint's adapter to play with")
	f.StringVar(&o.prompt, "prompt", o.prompt, "the problem given to /reset")
	f.StringVar(&o.system, "system", "", "a system message")
	f.StringVar(&o.tools, "tools", "", "a JSON file with the tool schemas to show the model (a list)")
	f.IntVar(&o.episodes, "episodes", o.episodes, "episodes to play")
	f.IntVar(&o.turns, "turns", o.turns, "most turns of the model per episode")
	f.IntVar(&o.maxTokens, "max-tokens", o.maxTokens, "most tokens of an episode's sequence (prompt, replies, observations)")
	f.Float64Var(&o.temperature, "temperature", o.temperature, "sampling temperature")
	f.IntVar(&o.topK, "top-k", 0, "sample among the K most likely tokens (0: all)")
	f.Uint64Var(&o.seed, "seed", 0, "the sampler's seed")
	f.IntVar(&o.threads, "threads", o.threads, "threads of the engine")
	f.DurationVar(&o.timeout, "timeout", o.timeout, "deadline of each call to the server")
	f.StringVar(&o.out, "out", "", "write the episodes' records here (JSON Lines)")
	f.StringVar(&o.replay, "replay", "", "replay the records in FILE instead of playing")
	return cmd
}

func runEnvPlay(ctx context.Context, url string, o envPlayOptions, stdout io.Writer) error {
	if o.modelDir == "" {
		return usageError{fmt.Errorf("--model: an instruct model directory with a chat template is needed")}
	}
	if o.episodes < 1 || o.turns < 1 || o.maxTokens < 1 || !(o.temperature > 0) {
		return usageError{fmt.Errorf("--episodes, --turns, --max-tokens and --temperature must be positive")}
	}
	base, err := loadBase(o.modelDir)
	if err != nil {
		return err
	}
	if base.Chat == nil {
		return fmt.Errorf("--model %s: %v", o.modelDir, base.ChatErr)
	}
	var tools json.RawMessage
	if o.tools != "" {
		if tools, err = os.ReadFile(o.tools); err != nil {
			return fmt.Errorf("--tools: %w", err)
		}
	}
	tm, err := base.Chat.Select("", tools != nil)
	if err != nil {
		return err
	}
	format, _ := toolcall.Detect(tm.Source())
	var adapter *llama.Adapter
	if o.checkpoint != "" {
		ck, err := loadEvalCheckpoint(ctx, o.checkpoint, base.Weights.Cfg)
		if err != nil {
			return err
		}
		adapter = ck.adapter
	}
	md, err := llama.New(base.Weights, adapter, o.threads)
	if err != nil {
		return err
	}
	ec := episode.Config{Template: tm, Vars: base.Chat.Vars(nil), Tokenizer: base.Tokenizer, Format: format, Tools: tools,
		System: o.system, EOS: base.Weights.Cfg.EOS, MaxTurns: o.turns, MaxTokens: min(o.maxTokens, base.Weights.Cfg.MaxPositions),
		MaxObservationBytes: 64 << 10}
	sampler := func(i int) *rollout.Sampler {
		return &rollout.Sampler{Model: md, Cfg: rollout.Config{Temperature: o.temperature, TopK: o.topK}, RNG: prng.New(o.seed, envPlayStream, uint64(i))}
	}

	if o.replay != "" {
		f, err := os.Open(o.replay)
		if err != nil {
			return err
		}
		defer f.Close()
		recs, err := episode.ReadJSONL(f, episode.MaxRecords)
		if err != nil {
			return fmt.Errorf("--replay %s: %w", o.replay, err)
		}
		bad := 0
		for i, e := range recs {
			if err := episode.Replay(ctx, ec, sampler(i), e); err != nil {
				bad++
				fmt.Fprintf(stdout, "episode %d: %v\n", i, err)
				continue
			}
			fmt.Fprintf(stdout, "episode %d: the same (%d tokens, %d turns, reward %g, %s)\n", i, len(e.Tokens), len(e.Turns), e.Reward, e.End)
		}
		if bad > 0 {
			return fmt.Errorf("%d of %d episodes replayed differently", bad, len(recs))
		}
		return nil
	}

	cfg := envserver.DefaultConfig()
	cfg.Timeout = o.timeout
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	env, err := envserver.Dial(ctx, url, cfg)
	if err != nil {
		return err
	}
	if !env.Health().MultiTurn {
		return fmt.Errorf("%s does not declare multi_turn: it has no /reset and /step", url)
	}
	var eps []*episode.Episode
	ends := map[episode.End]int{}
	var total float64
	for i := range o.episodes {
		session := fmt.Sprintf("play-%d-%d", o.seed, i)
		e, err := episode.Play(ctx, ec, sampler(i), env, session, o.prompt)
		if err != nil {
			return err
		}
		eps = append(eps, e)
		ends[e.End]++
		total += e.Reward
		printEpisode(stdout, i, e)
	}
	fmt.Fprintf(stdout, "%d episodes: mean reward %.3f;", len(eps), total/float64(len(eps)))
	for _, end := range []episode.End{episode.Done, episode.TurnLimit, episode.TokenLimit, episode.ModelMistake, episode.EnvFailure, episode.TemplateFail} {
		if ends[end] > 0 {
			fmt.Fprintf(stdout, " %s %d", end, ends[end])
		}
	}
	fmt.Fprintln(stdout)
	if o.out != "" {
		return atomicfile.Write(o.out, 0o644, true, func(w io.Writer) error {
			bw := bufio.NewWriter(w)
			enc := json.NewEncoder(bw)
			for _, e := range eps {
				if err := enc.Encode(e); err != nil {
					return err
				}
			}
			return bw.Flush()
		})
	}
	return nil
}

func printEpisode(w io.Writer, i int, e *episode.Episode) {
	fmt.Fprintf(w, "episode %d (%s): %s\n", i, e.Session, oneLine(e.Reset, 100))
	for k, t := range e.Turns {
		fmt.Fprintf(w, "  turn %d  model: %s\n", k+1, oneLine(t.Text, 100))
		for _, m := range t.Mistakes {
			fmt.Fprintf(w, "          mistake: %s\n", m)
		}
		for _, s := range t.Steps {
			fmt.Fprintf(w, "          action %s → %s  reward %g%s\n", oneLine(s.Action, 60), oneLine(s.Observation, 60), s.Reward, map[bool]string{true: "  done"}[s.Done])
		}
	}
	detail := ""
	if e.Detail != "" {
		detail = " (" + e.Detail + ")"
	}
	fmt.Fprintf(w, "  end %s%s, reward %g, %d tokens (%d the model's)\n", e.End, detail, e.Reward, len(e.Tokens), e.ModelTokens())
}

func oneLine(s string, n int) string {
	if len(s) > n {
		cut := n
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		s = s[:cut] + "…"
	}
	return fmt.Sprintf("%q", s)
}
