package envserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zooai/gym/model/reward"
)

// TestEnvReward: the server's reward mapped onto [0, 1] (a range of
// [−2, 2] declared), its verdict kept, the server dialled once on first use.
func TestEnvReward(t *testing.T) {
	var health atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		health.Add(1)
		io.WriteString(w, `{"protocol":"gym-env/1","reward_min":-2,"reward_max":2}`)
	})
	mux.HandleFunc("POST /score", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"reward":1,"correct":true}`) })
	s := httptestServer(t, mux)
	e := NewEnv(context.Background(), s, fast(), nil)
	if health.Load() != 0 {
		t.Fatal("NewEnv dialled")
	}
	for range 2 {
		u, ok, err := e.Reward(sample)
		if err != nil || u != 0.75 || !ok {
			t.Fatalf("reward %v %v %v, want 0.75 (1 in [−2, 2]) and correct", u, ok, err)
		}
	}
	if health.Load() != 1 {
		t.Errorf("dialled %d times", health.Load())
	}
	// Through a reward set: weight × the unit reward.
	set, err := reward.New([]reward.Term{{Verifier: reward.EnvName, URL: s, Weight: 2}, {Verifier: reward.Exact, Weight: 1}})
	if err != nil {
		t.Fatal(err)
	}
	b := set.Bind(func(string) reward.Env { return e })
	if got := b.Score(sample); got != 2*0.75+1 || !b.Correct(sample) || b.Failed(sample) {
		t.Errorf("set score %v correct %v failed %v", got, b.Correct(sample), b.Failed(sample))
	}
	if got := set.Score(sample); got != 1 || !set.Failed(sample) || set.Correct(sample) {
		t.Errorf("unbound set: score %v (want the exact term's 1 alone), failed %v", got, set.Failed(sample))
	}
}

// TestEnvBreaker: a dead server fails BreakAfter calls, then every call
// fails at once (skipped, counted) until the cooldown has passed; a server
// that comes back is called again and the failures stop.
func TestEnvBreaker(t *testing.T) {
	var up atomic.Bool
	var scored atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, healthBody) })
	mux.HandleFunc("POST /score", func(w http.ResponseWriter, r *http.Request) {
		scored.Add(1)
		if !up.Load() {
			http.Error(w, `{"error":"down"}`, 503)
			return
		}
		io.WriteString(w, `{"reward":0.5,"correct":false}`)
	})
	s := httptestServer(t, mux)
	now := time.Unix(1_767_225_600, 0)
	cfg := fast()
	cfg.Attempts = 1
	e := NewEnv(context.Background(), s, cfg, func() time.Time { return now })
	distinct := func(i int) reward.Sample { return reward.Sample{Prompt: fmt.Sprint(i), Completion: "x"} }
	for i := range BreakAfter {
		if _, _, err := e.Reward(distinct(i)); KindOf(err) != KindStatus5xx {
			t.Fatalf("call %d: %v, want a 5xx", i, err)
		}
	}
	before := scored.Load()
	for i := range 50 {
		if _, _, err := e.Reward(distinct(100 + i)); KindOf(err) != KindSkipped {
			t.Fatalf("with the breaker open: %v", err)
		}
	}
	if scored.Load() != before {
		t.Fatalf("the server was called %d times with the breaker open", scored.Load()-before)
	}
	up.Store(true)
	now = now.Add(Cooldown)
	if u, _, err := e.Reward(distinct(1000)); err != nil || u != 0.5 {
		t.Fatalf("after the cooldown: %v %v", u, err)
	}
	st := e.Stats()["/score"]
	if st.Failures[KindSkipped] != 50 || st.Failures[KindStatus5xx] != BreakAfter || st.OK != 1 {
		t.Errorf("stats %+v", st)
	}
	var ee *Error
	if _, _, err := NewEnv(context.Background(), "http://127.0.0.1:1", cfg, nil).Reward(sample); !errors.As(err, &ee) {
		t.Errorf("unreachable server: %v", err)
	}
}

func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}
