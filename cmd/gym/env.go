package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/zooai/gym/model/envserver"
	"github.com/zooai/gym/model/reward"
)

func newEnv() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Environment servers: check one, play episodes against one (docs/environments.md)",
	}
	cmd.AddCommand(newEnvCheck(), newEnvPlay())
	return cmd
}

type envCheckOptions struct {
	json     bool
	timeout  time.Duration
	attempts int
}

// envCheck is one check of gym env check.
type envCheck struct {
	Name    string   `json:"name"`
	OK      bool     `json:"ok"`
	Ms      float64  `json:"ms"`
	Reward  *float64 `json:"reward,omitempty"`
	Correct *bool    `json:"correct,omitempty"`
	Steps   int      `json:"steps,omitempty"`
	Done    *bool    `json:"done,omitempty"`
	Error   string   `json:"error,omitempty"`
	Kind    string   `json:"kind,omitempty"`
}

type envReport struct {
	OK     bool              `json:"ok"`
	URL    string            `json:"url"`
	Health *envserver.Health `json:"health,omitempty"`
	Checks []envCheck        `json:"checks"`
	Stats  envserver.Stats   `json:"stats,omitempty"`
	err    error             `json:"-"`
}

func newEnvCheck() *cobra.Command {
	o := envCheckOptions{timeout: envserver.DefaultConfig().Timeout, attempts: envserver.DefaultConfig().Attempts}
	cmd := &cobra.Command{
		Use:   "check URL [--json] [--timeout D]",
		Short: "Exercise an environment server and report what works",
		Long: `check reads URL's /health, scores a right, a wrong, an empty and a 100 KiB
completion at /score and, when the server declares multi_turn, plays one
/reset + /step episode (bisecting on "higher"/"lower" observations, at most
20 steps). It prints each check with its latency, and exits 1 naming the
first protocol violation (docs/environments.md: protocol gym-env/1).
--json prints one object: ok, url, health, checks, stats.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := envserver.DefaultConfig()
			cfg.Timeout, cfg.Attempts = o.timeout, o.attempts
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			rep := runEnvCheck(cmd.Context(), args[0], cfg)
			out := cmd.OutOrStdout()
			if o.json {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else {
				printEnvReport(out, rep)
			}
			if rep.err != nil {
				return rep.err
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print one JSON object")
	cmd.Flags().DurationVar(&o.timeout, "timeout", o.timeout, "deadline of each attempt")
	cmd.Flags().IntVar(&o.attempts, "attempts", o.attempts, "attempts of a retried call (1: no retry)")
	return cmd
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func runEnvCheck(ctx context.Context, url string, cfg envserver.Config) envReport {
	rep := envReport{URL: url}
	fail := func(c *envCheck, err error) {
		c.Error, c.Kind = err.Error(), string(envserver.KindOf(err))
		if rep.err == nil {
			rep.err = err
		}
	}
	start := time.Now()
	c, err := envserver.Dial(ctx, url, cfg)
	hc := envCheck{Name: "health", Ms: ms(time.Since(start))}
	if err != nil {
		fail(&hc, err)
		rep.Checks = append(rep.Checks, hc)
		return rep
	}
	hc.OK = true
	rep.Checks = append(rep.Checks, hc)
	h := c.Health()
	rep.Health = &h

	for _, s := range []struct {
		name string
		x    reward.Sample
	}{
		{"score right", reward.Sample{Prompt: "What is 6 times 7?", Completion: "6 times 7 is 42. #### 42", Answer: "42"}},
		{"score wrong", reward.Sample{Prompt: "What is 6 times 7?", Completion: "#### 41", Answer: "42"}},
		{"score empty completion", reward.Sample{Prompt: "What is 6 times 7?", Completion: "", Answer: "42"}},
		{"score 100 KiB completion", reward.Sample{Prompt: "What is 6 times 7?", Completion: strings.Repeat("ok ", 100<<10/3) + "42", Answer: "42"}},
	} {
		ck := envCheck{Name: s.name}
		t := time.Now()
		r, err := c.Score(ctx, s.x)
		ck.Ms = ms(time.Since(t))
		if err != nil {
			fail(&ck, err)
		} else {
			ck.OK, ck.Reward, ck.Correct = true, &r.Reward, &r.Correct
		}
		rep.Checks = append(rep.Checks, ck)
	}

	if h.MultiTurn {
		rep.Checks = append(rep.Checks, envEpisode(ctx, c, fail))
	}
	rep.Stats = c.Stats()
	rep.OK = rep.err == nil
	return rep
}

// envEpisode plays one episode, bisecting 1..100 on "higher"/"lower".
func envEpisode(ctx context.Context, c *envserver.Client, fail func(*envCheck, error)) (ck envCheck) {
	ck.Name = "episode"
	var b [6]byte
	rand.Read(b[:])
	session := "gym-env-check-" + hex.EncodeToString(b[:])
	t := time.Now()
	defer func() { ck.Ms = ms(time.Since(t)) }()
	if _, err := c.Reset(ctx, session, "gym env check"); err != nil {
		fail(&ck, err)
		return ck
	}
	lo, hi, total := 1, 100, 0.0
	for ck.Steps < 20 {
		guess := (lo + hi) / 2
		r, err := c.Step(ctx, session, strconv.Itoa(guess))
		if err != nil {
			fail(&ck, err)
			return ck
		}
		ck.Steps++
		total += r.Reward
		if r.Done {
			ck.Done = &r.Done
			break
		}
		switch strings.ToLower(strings.TrimSpace(r.Observation)) {
		case "higher":
			lo = min(guess+1, hi)
		case "lower":
			hi = max(guess-1, lo)
		}
	}
	ck.OK, ck.Reward = true, &total
	return ck
}

func printEnvReport(w io.Writer, rep envReport) {
	if rep.Health != nil {
		h := rep.Health
		mt := "single-turn"
		if h.MultiTurn {
			mt = "multi-turn"
		}
		name := h.Name
		if name == "" {
			name = "unnamed"
		}
		fmt.Fprintf(w, "server  %s (%s, %s), rewards [%v, %v], %s\n", rep.URL, name, h.Protocol, h.RewardMin, h.RewardMax, mt)
	}
	for _, c := range rep.Checks {
		status := "ok  "
		if !c.OK {
			status = "FAIL"
		}
		fmt.Fprintf(w, "%s  %-26s %9.2f ms", status, c.Name, c.Ms)
		if c.Steps > 0 {
			fmt.Fprintf(w, "  %d steps", c.Steps)
		}
		if c.Reward != nil {
			fmt.Fprintf(w, "  reward %v", *c.Reward)
		}
		if c.Correct != nil && *c.Correct {
			fmt.Fprint(w, " correct")
		}
		if c.Done != nil {
			fmt.Fprint(w, " done")
		} else if c.Name == "episode" && c.OK {
			fmt.Fprint(w, " (not done after 20 steps)")
		}
		if c.Error != "" {
			fmt.Fprintf(w, "  %s", c.Error)
		}
		fmt.Fprintln(w)
	}
	if rep.Stats != nil {
		if s, ok := rep.Stats["/score"]; ok && s.Latency.Count > 0 {
			fmt.Fprintf(w, "score latency: mean %.2f ms, max %.2f ms over %d calls; %d retries\n",
				s.Latency.Mean()*1000, s.Latency.Max*1000, s.Latency.Count, s.Retries)
		}
	}
}
