package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/zooai/gym/internal/envexample"
)

// startEnvExample runs the example environment server of this checkout as
// a separate process and returns its URL.
func startEnvExample(t *testing.T) string {
	u, _ := envexample.Start(t)
	return u
}

func TestEnvCheckExample(t *testing.T) {
	url := startEnvExample(t)
	out := mustGym(t, "env", "check", url)
	for _, want := range []string{"(example, gym-env/1), rewards [0, 1], multi-turn", "ok    score right", "reward 1 correct", "done", "score latency: mean"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var rep struct {
		OK     bool `json:"ok"`
		Checks []struct {
			Name string  `json:"name"`
			OK   bool    `json:"ok"`
			Ms   float64 `json:"ms"`
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(mustGym(t, "env", "check", "--json", url)), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.OK || len(rep.Checks) != 6 || rep.Checks[5].Name != "episode" {
		t.Fatalf("report %+v", rep)
	}
}

// A server that breaks the protocol: exit 1 naming the violation.
func TestEnvCheckViolations(t *testing.T) {
	health := `{"protocol":"gym-env/1","reward_min":0,"reward_max":1}`
	for name, c := range map[string]struct {
		health, score string
		want          string
	}{
		"garbage":      {health, "<html>", "/score: malformed"},
		"out of range": {health, `{"reward": 2}`, "/score: out_of_range"},
		"version":      {`{"protocol":"gym-env/0","reward_min":0,"reward_max":1}`, "", "/health: protocol"},
		"extra field":  {health, `{"reward": 1, "score": 1}`, `unknown field "score"`},
	} {
		t.Run(name, func(t *testing.T) {
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/health" {
					io.WriteString(w, c.health)
				} else {
					io.WriteString(w, c.score)
				}
			}))
			defer s.Close()
			r := gym(t, "env", "check", s.URL)
			if r.code != 1 || !strings.Contains(r.stderr, c.want) || !strings.Contains(r.stdout, "FAIL") {
				t.Fatalf("exit %d, want 1 saying %q\n%s%s", r.code, c.want, r.stdout, r.stderr)
			}
		})
	}
	if r := gym(t, "env", "check"); r.code != 2 {
		t.Errorf("no URL: exit %d", r.code)
	}
}
