package envserver

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/zooai/gym/internal/envexample"
	"github.com/zooai/gym/model/reward"
)

// startExample runs the example server as a separate process.
func startExample(t *testing.T) (string, *exec.Cmd) { return envexample.Start(t) }

// The example server scores as the built-in numeric verifier does, plays
// guess the number, and a call's latency is measured.
func TestExampleServer(t *testing.T) {
	url, _ := startExample(t)
	ctx := context.Background()
	c, err := Dial(ctx, url, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if h := c.Health(); h.Name != "example" || !h.MultiTurn || h.RewardMin != 0 || h.RewardMax != 1 {
		t.Fatalf("health %+v", h)
	}
	numeric, err := reward.New([]reward.Term{{Verifier: reward.Numeric, Weight: 1}})
	if err != nil {
		t.Fatal(err)
	}
	sc := NewScorer(ctx, c)
	for _, c := range [][2]string{ // completion, answer
		{"81", "81"}, {"80", "81"}, {"so 1,234.", "1234"}, {"3 then #### 42 and 7", "#### 42"},
		{`\boxed{12} then 5`, "12"}, {"", "4"}, {"-7.50", "-7.5"}, {"no number", "no number"}, {"é 9", "9"},
	} {
		x := reward.Sample{Prompt: "23+58=", Completion: c[0], Answer: c[1]}
		if got, want := sc.Score(x), numeric.Score(x); got != want {
			t.Errorf("%+v: server %v, numeric verifier %v", x, got, want)
		}
		if got, want := sc.Correct(x), numeric.Correct(x); got != want {
			t.Errorf("%+v: server correct %v, numeric verifier %v", x, got, want)
		}
	}
	if n := c.Stats().Failures(); n != 0 {
		t.Fatalf("%d failed calls", n)
	}

	// Latency of a score call, after the ones above warmed the connection.
	const n = 200
	start := time.Now()
	for i := range n {
		if _, err := c.Score(ctx, reward.Sample{Prompt: "p", Completion: fmt.Sprint(i), Answer: "7"}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("score against the example server: %.3f ms per call over %d calls", float64(time.Since(start).Microseconds())/1000/n, n)

	if _, err := c.Reset(ctx, "t-1", "go"); err != nil {
		t.Fatal(err)
	}
	lo, hi := 1, 100
	for steps := 1; ; steps++ {
		g := (lo + hi) / 2
		r, err := c.Step(ctx, "t-1", fmt.Sprint(g))
		if err != nil {
			t.Fatal(err)
		}
		if r.Done {
			if r.Reward != 1 || r.Observation != "correct" || steps > 7 {
				t.Fatalf("episode ended %+v after %d steps", r, steps)
			}
			break
		}
		if r.Observation == "higher" {
			lo = g + 1
		} else {
			hi = g - 1
		}
	}
	// The session is over: a further step is the server's 4xx, not retried.
	if _, err := c.Step(ctx, "t-1", "1"); KindOf(err) != KindStatus4xx || !strings.Contains(err.Error(), "unknown session") {
		t.Fatalf("step after done: %v", err)
	}
}

// The example server killed mid-run: scores fail as connection errors,
// counted, at the declared minimum; nothing crashes.
func TestExampleServerKilled(t *testing.T) {
	url, cmd := startExample(t)
	ctx := context.Background()
	cfg := fast()
	c, err := Dial(ctx, url, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sc := NewScorer(ctx, c)
	if sc.Score(sample) != 1 {
		t.Fatal("want 1 before the kill")
	}
	cmd.Process.Kill()
	cmd.Wait()
	x := reward.Sample{Prompt: "2+2=", Completion: "4 ", Answer: "4"}
	if sc.Score(x) != 0 || sc.Correct(x) {
		t.Fatal("a killed server's score is not the declared minimum")
	}
	st := c.Stats()["/score"]
	if st.Calls != 2 || st.OK != 1 || st.Failures[KindConnection] != 1 || st.Retries != 2 {
		t.Fatalf("stats %+v", st)
	}
}
