package envserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zooai/gym/model/reward"
)

const healthBody = `{"protocol":"gym-env/1","name":"test","reward_min":0,"reward_max":1}`

// server answers /health and hands /score to score, counting its calls.
func server(t *testing.T, score http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, healthBody) })
	mux.HandleFunc("POST /score", func(w http.ResponseWriter, r *http.Request) { n.Add(1); score(w, r) })
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s, &n
}

func fast() Config {
	c := DefaultConfig()
	c.Timeout, c.Backoff, c.MaxBackoff = 300*time.Millisecond, 5*time.Millisecond, 20*time.Millisecond
	return c
}

func dial(t *testing.T, url string) *Client {
	t.Helper()
	c, err := Dial(context.Background(), url, fast())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var sample = reward.Sample{Prompt: "2+2=", Completion: "4", Answer: "4"}

func TestScoreOK(t *testing.T) {
	s, n := server(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if string(b) != `{"prompt":"2+2=","completion":"4","answer":"4"}` {
			http.Error(w, `{"error":"bad request"}`, 400)
			return
		}
		io.WriteString(w, `{"reward":1,"correct":true}`)
	})
	c := dial(t, s.URL)
	sc := NewScorer(context.Background(), c)
	if sc.Score(sample) != 1 || !sc.Correct(sample) {
		t.Fatal("want reward 1, correct")
	}
	if n.Load() != 1 {
		t.Errorf("%d calls for Score then Correct, want 1", n.Load())
	}
	st := c.Stats()["/score"]
	if st.Calls != 1 || st.OK != 1 || st.Latency.Count != 1 {
		t.Errorf("stats %+v", st)
	}
}

// failing runs one Score against a misbehaving /score and checks the
// bounded, counted failure.
func failing(t *testing.T, h http.HandlerFunc, kind Kind, wantCalls int64, within time.Duration) *Client {
	t.Helper()
	s, n := server(t, h)
	c := dial(t, s.URL)
	sc := NewScorer(context.Background(), c)
	start := time.Now()
	if got := sc.Score(sample); got != 0 {
		t.Errorf("failed score %v, want the declared minimum 0", got)
	}
	if sc.Correct(sample) {
		t.Error("a failed call counts as correct")
	}
	if el := time.Since(start); el > within {
		t.Errorf("took %v, want at most %v", el, within)
	}
	_, err := sc.Result(sample)
	if KindOf(err) != kind {
		t.Fatalf("error %v, want kind %s", err, kind)
	}
	if n.Load() != wantCalls {
		t.Errorf("server saw %d requests, want %d", n.Load(), wantCalls)
	}
	st := c.Stats()["/score"]
	if st.Calls != 1 || st.OK != 0 || st.Failures[kind] != 1 || st.Retries != uint64(wantCalls-1) {
		t.Errorf("stats %+v, want 1 call failed as %s after %d retries", st, kind, wantCalls-1)
	}
	t.Logf("%v", err)
	return c
}

func TestHangsPastTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	failing(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}, KindTimeout, 3, 3*time.Second)
}

func Test500RetriedThenCounted(t *testing.T) {
	failing(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"model crashed"}`, 500)
	}, KindStatus5xx, 3, 2*time.Second)
}

func Test500ThenOK(t *testing.T) {
	var k atomic.Int64
	s, n := server(t, func(w http.ResponseWriter, r *http.Request) {
		if k.Add(1) == 1 {
			w.WriteHeader(503)
			return
		}
		io.WriteString(w, `{"reward":0.25}`)
	})
	c := dial(t, s.URL)
	r, err := c.Score(context.Background(), sample)
	if err != nil || r.Reward != 0.25 || r.Correct {
		t.Fatalf("%+v, %v", r, err)
	}
	if st := c.Stats()["/score"]; n.Load() != 2 || st.Retries != 1 || st.OK != 1 {
		t.Errorf("%d requests, stats %+v", n.Load(), st)
	}
}

func Test4xxNotRetried(t *testing.T) {
	c := failing(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"answer missing"}`, 422)
	}, KindStatus4xx, 1, time.Second)
	_, err := c.Score(context.Background(), sample)
	if !strings.Contains(err.Error(), "HTTP 422") || !strings.Contains(err.Error(), "answer missing") {
		t.Errorf("error %q does not give the status and the server's text", err)
	}
}

func TestGarbage(t *testing.T) {
	failing(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<html>\x00\xff garbage")
	}, KindMalformed, 1, time.Second)
}

func TestOutOfRange(t *testing.T) {
	failing(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"reward": 7}`)
	}, KindOutOfRange, 1, time.Second)
}

func TestConnectionRefused(t *testing.T) {
	s, _ := server(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"reward":1}`) })
	c := dial(t, s.URL)
	s.Close()
	_, err := c.Score(context.Background(), sample)
	if KindOf(err) != KindConnection {
		t.Fatalf("%v", err)
	}
	if st := c.Stats()["/score"]; st.Retries != 2 || st.Failures[KindConnection] != 1 {
		t.Errorf("stats %+v", st)
	}
}

// A server that streams 1 GiB: the client reads at most MaxBody+1 bytes
// and its heap stays bounded.
func TestStreams1GiB(t *testing.T) {
	var sent atomic.Int64
	chunk := make([]byte, 64<<10)
	for _, announce := range []bool{false, true} {
		t.Run(fmt.Sprintf("content-length=%v", announce), func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			failing(t, func(w http.ResponseWriter, r *http.Request) {
				if announce {
					w.Header().Set("Content-Length", fmt.Sprint(1<<30))
				}
				for i := 0; i < (1<<30)/len(chunk); i++ {
					if _, err := w.Write(chunk); err != nil {
						return
					}
					sent.Add(int64(len(chunk)))
				}
			}, KindTooLarge, 1, 5*time.Second)
			runtime.ReadMemStats(&after)
			grew := int64(after.TotalAlloc) - int64(before.TotalAlloc)
			if grew > 64<<20 {
				t.Errorf("allocated %d MiB reading a 1 GiB answer", grew>>20)
			}
			t.Logf("allocated %.1f MiB in all (test server included)", float64(grew)/(1<<20))
		})
	}
	if sent.Load() >= 1<<30 {
		t.Errorf("the server got to send all of 1 GiB (%d bytes)", sent.Load())
	}
}

func TestRequestTooLarge(t *testing.T) {
	s, n := server(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"reward":1}`) })
	c := dial(t, s.URL)
	_, err := c.Score(context.Background(), reward.Sample{Completion: strings.Repeat("x", MaxBody)})
	if KindOf(err) != KindTooLarge || n.Load() != 0 {
		t.Fatalf("%v after %d requests", err, n.Load())
	}
}

func TestDialRefusesBadHealth(t *testing.T) {
	for body, kind := range map[string]Kind{
		`{"protocol":"gym-env/9","reward_min":0,"reward_max":1}`: KindProtocol,
		`not json`: KindMalformed,
	} {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }))
		_, err := Dial(context.Background(), s.URL, fast())
		s.Close()
		if KindOf(err) != kind {
			t.Errorf("%s: %v, want %s", body, err, kind)
		}
	}
	if _, err := Dial(context.Background(), "ftp://x", fast()); err == nil {
		t.Error("ftp URL accepted")
	}
}

func TestCanceled(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	s, _ := server(t, func(w http.ResponseWriter, r *http.Request) { <-release })
	c := dial(t, s.URL)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	_, err := c.Score(ctx, sample)
	if KindOf(err) != KindCanceled || !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}
}

func TestHugeHeaders(t *testing.T) {
	failing(t, func(w http.ResponseWriter, r *http.Request) {
		for i := range 200 {
			w.Header().Set(fmt.Sprintf("X-Pad-%d", i), strings.Repeat("x", 1000))
		}
		io.WriteString(w, `{"reward":1}`)
	}, KindConnection, 3, 2*time.Second)
}
