// Package envserver is gym's client of an environment server: a reward or
// agent environment that runs as a separate process or container and
// answers the HTTP + JSON protocol gym-env/1 of docs/environments.md —
// GET /health, POST /score, and the multi-turn POST /reset and POST /step.
//
// Every call is bounded: request and response bodies of at most MaxBody
// (1 MiB; a response is read through an io.LimitReader and a longer one is
// an error, not truncated), a context deadline per attempt
// (Config.Timeout), and at most Config.Attempts attempts with jittered
// exponential backoff for connection errors, timeouts and 5xx statuses
// (never for 4xx, for a malformed answer, or for /step, which is not
// idempotent). Responses are decoded strictly (ParseHealth, ParseScore,
// ParseReset, ParseStep: exactly one object, exact field names, no
// unknown, duplicated or null fields) and every reward is checked against
// the range the server declared at /health: NaN, ±Inf or out of range is
// an *Error, never a reward. Errors say which endpoint and what the server
// did wrong, by Kind.
//
// Scorer adapts a Client to reward.Scorer. Score cannot return an error,
// so a failed call scores the declared minimum and Correct is false; every
// call and failure is counted in Client.Stats (calls, outcomes by Kind,
// retries, latency histogram) for export as metrics.
package envserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/zooai/gym/model/reward"
)

// Kind classifies what went wrong in a call.
type Kind string

// Failure kinds (docs/environments.md).
const (
	KindConnection Kind = "connection"   // unreachable, or the connection dropped
	KindTimeout    Kind = "timeout"      // no answer within Config.Timeout
	KindCanceled   Kind = "canceled"     // the caller's context ended
	KindStatus5xx  Kind = "status_5xx"   // a 500–599 status
	KindStatus4xx  Kind = "status_4xx"   // any other status but 200
	KindTooLarge   Kind = "too_large"    // a body over MaxBody
	KindMalformed  Kind = "malformed"    // not the documented JSON object
	KindOutOfRange Kind = "out_of_range" // a reward outside the declared range
	KindProtocol   Kind = "protocol"     // another protocol version, an unusable range, a missing capability
	KindSkipped    Kind = "skipped"      // not called: the server failed repeatedly (Env's breaker is open)
)

// Kinds lists the failure kinds.
func Kinds() []Kind {
	return []Kind{KindConnection, KindTimeout, KindCanceled, KindStatus5xx, KindStatus4xx, KindTooLarge, KindMalformed, KindOutOfRange, KindProtocol, KindSkipped}
}

// Error is every failed call: the endpoint, what went wrong, the HTTP
// status when there was one, and the server's error text or the violation.
type Error struct {
	Endpoint string
	Kind     Kind
	Status   int
	Msg      string
	Err      error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "envserver: %s: %s", e.Endpoint, e.Kind)
	if e.Status != 0 && e.Status != http.StatusOK {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	if e.Msg != "" {
		b.WriteString(": " + e.Msg)
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns err's Kind, or "" when err is not an *Error.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}

// retryable reports whether another attempt may succeed.
func (k Kind) retryable() bool {
	return k == KindConnection || k == KindTimeout || k == KindStatus5xx
}

// Config bounds a Client.
type Config struct {
	// Timeout is each attempt's deadline.
	Timeout time.Duration
	// Attempts is the number of tries of a retried call (1: no retry).
	Attempts int
	// Backoff is the wait before the first retry, doubled for each next
	// one up to MaxBackoff, each with ±50 % jitter.
	Backoff, MaxBackoff time.Duration
	// HTTPClient sends the requests; nil: a client of its own. Its own
	// Timeout, if any, adds to Timeout's.
	HTTPClient *http.Client
}

// DefaultConfig is 10 s per attempt, 3 attempts, 100 ms backoff doubling
// to at most 2 s.
func DefaultConfig() Config {
	return Config{Timeout: 10 * time.Second, Attempts: 3, Backoff: 100 * time.Millisecond, MaxBackoff: 2 * time.Second}
}

// Validate checks the bounds.
func (c Config) Validate() error {
	switch {
	case c.Timeout <= 0 || c.Timeout > 10*time.Minute:
		return fmt.Errorf("envserver: timeout %v: want above 0 and at most 10m", c.Timeout)
	case c.Attempts < 1 || c.Attempts > 10:
		return fmt.Errorf("envserver: %d attempts: want 1 to 10", c.Attempts)
	case c.Backoff < 0 || c.MaxBackoff < c.Backoff || c.MaxBackoff > time.Minute:
		return fmt.Errorf("envserver: backoff %v up to %v: want 0 ≤ backoff ≤ max ≤ 1m", c.Backoff, c.MaxBackoff)
	}
	return nil
}

// MaxHeaderBytes bounds a response's headers (the client's own
// transport; a Config.HTTPClient brings its own bounds).
const MaxHeaderBytes = 64 << 10

// Client talks to one environment server.
type Client struct {
	base   string
	cfg    Config
	hc     *http.Client
	health Health
	stats  *stats
}

// Dial checks cfg and the URL (http or https, no query or fragment),
// reads the server's /health and returns a client bound to the range it
// declared.
func Dial(ctx context.Context, rawURL string, cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("envserver: URL %q: %v", rawURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("envserver: URL %q: want http(s)://host[:port][/path], without user, query or fragment", rawURL)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxResponseHeaderBytes = MaxHeaderBytes
		tr.MaxIdleConnsPerHost = 32
		hc = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	c := &Client{base: strings.TrimSuffix(u.String(), "/"), cfg: cfg, hc: hc, stats: newStats()}
	b, err := c.call(ctx, http.MethodGet, "/health", nil, true)
	if err == nil {
		c.health, err = ParseHealth(b)
		if err != nil {
			c.stats.fail("/health", KindOf(err))
		}
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Health is what the server declared when the client dialled it.
func (c *Client) Health() Health { return c.health }

// URL is the server's base URL.
func (c *Client) URL() string { return c.base }

// Score asks the server to score a sample.
func (c *Client) Score(ctx context.Context, s reward.Sample) (ScoreResult, error) {
	req := struct {
		Prompt     string `json:"prompt"`
		Completion string `json:"completion"`
		Answer     string `json:"answer"`
	}{s.Prompt, s.Completion, s.Answer}
	b, err := c.call(ctx, http.MethodPost, "/score", req, true)
	if err != nil {
		return ScoreResult{}, err
	}
	r, err := ParseScore(b, c.health)
	if err != nil {
		c.stats.fail("/score", KindOf(err))
		return ScoreResult{}, err
	}
	return r, nil
}

// MaxSession is the longest session name.
const MaxSession = 128

func checkSession(endpoint, session string) error {
	ok := len(session) >= 1 && len(session) <= MaxSession
	for _, r := range session {
		ok = ok && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}
	if !ok {
		return fmt.Errorf("envserver: %s: session %q: want 1 to %d bytes of [A-Za-z0-9._-]", endpoint, truncate(session, 64), MaxSession)
	}
	return nil
}

func (c *Client) needMultiTurn(endpoint string) error {
	if !c.health.MultiTurn {
		return &Error{Endpoint: endpoint, Kind: KindProtocol, Msg: "the server does not declare multi_turn"}
	}
	return nil
}

// Reset starts (or restarts) a session of a multi-turn environment and
// returns its first observation.
func (c *Client) Reset(ctx context.Context, session, prompt string) (string, error) {
	if err := checkSession("/reset", session); err != nil {
		return "", err
	}
	if err := c.needMultiTurn("/reset"); err != nil {
		return "", err
	}
	req := struct {
		Session string `json:"session"`
		Prompt  string `json:"prompt"`
	}{session, prompt}
	b, err := c.call(ctx, http.MethodPost, "/reset", req, true)
	if err != nil {
		return "", err
	}
	obs, err := ParseReset(b)
	if err != nil {
		c.stats.fail("/reset", KindOf(err))
	}
	return obs, err
}

// Step sends one action of a session; it is not retried (a step is not
// idempotent): a failed step fails the episode.
func (c *Client) Step(ctx context.Context, session, action string) (StepResult, error) {
	if err := checkSession("/step", session); err != nil {
		return StepResult{}, err
	}
	if err := c.needMultiTurn("/step"); err != nil {
		return StepResult{}, err
	}
	req := struct {
		Session string `json:"session"`
		Action  string `json:"action"`
	}{session, action}
	b, err := c.call(ctx, http.MethodPost, "/step", req, false)
	if err != nil {
		return StepResult{}, err
	}
	r, err := ParseStep(b, c.health)
	if err != nil {
		c.stats.fail("/step", KindOf(err))
	}
	return r, err
}

// call sends a request, with retries when retry is set, and returns a 200
// response's body. It counts the call: ok when a 200 body came back (the
// caller moves it to a failure kind with stats.fail when the body is
// wrong), else the last attempt's kind.
func (c *Client) call(ctx context.Context, method, endpoint string, req any, retry bool) ([]byte, error) {
	var body []byte
	if req != nil {
		var err error
		if body, err = json.Marshal(req); err != nil {
			return nil, fmt.Errorf("envserver: %s: %v", endpoint, err)
		}
		if len(body) > MaxBody {
			err := &Error{Endpoint: endpoint, Kind: KindTooLarge, Msg: fmt.Sprintf("request of %d bytes, over %d", len(body), MaxBody)}
			c.stats.done(endpoint, 0, err.Kind)
			return nil, err
		}
	}
	attempts := 1
	if retry {
		attempts = c.cfg.Attempts
	}
	start := time.Now()
	wait := c.cfg.Backoff
	for a := 1; ; a++ {
		b, err := c.once(ctx, method, endpoint, body)
		if err == nil {
			c.stats.done(endpoint, time.Since(start), "")
			return b, nil
		}
		if a >= attempts || !err.Kind.retryable() || ctx.Err() != nil {
			c.stats.done(endpoint, time.Since(start), err.Kind)
			return nil, err
		}
		c.stats.retry(endpoint)
		d := wait/2 + rand.N(wait+1)
		wait = min(2*wait, c.cfg.MaxBackoff)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			e := &Error{Endpoint: endpoint, Kind: KindCanceled, Err: ctx.Err()}
			c.stats.done(endpoint, time.Since(start), e.Kind)
			return nil, e
		case <-t.C:
		}
	}
}

// once is one attempt.
func (c *Client) once(ctx context.Context, method, endpoint string, body []byte) ([]byte, *Error) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(actx, method, c.base+endpoint, rd)
	if err != nil {
		return nil, &Error{Endpoint: endpoint, Kind: KindConnection, Err: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	netErr := func(err error) *Error {
		switch {
		case ctx.Err() != nil:
			return &Error{Endpoint: endpoint, Kind: KindCanceled, Err: ctx.Err()}
		case actx.Err() != nil:
			return &Error{Endpoint: endpoint, Kind: KindTimeout, Msg: fmt.Sprintf("no answer within %v", c.cfg.Timeout)}
		}
		return &Error{Endpoint: endpoint, Kind: KindConnection, Err: err}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, netErr(err)
	}
	defer resp.Body.Close()
	if resp.ContentLength > MaxBody {
		return nil, &Error{Endpoint: endpoint, Kind: KindTooLarge, Status: resp.StatusCode,
			Msg: fmt.Sprintf("the server announced a body of %d bytes, over %d", resp.ContentLength, MaxBody)}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	if err != nil {
		return nil, netErr(err)
	}
	if len(b) > MaxBody {
		return nil, &Error{Endpoint: endpoint, Kind: KindTooLarge, Status: resp.StatusCode,
			Msg: fmt.Sprintf("the server sent more than %d bytes", MaxBody)}
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		return b, nil
	case resp.StatusCode >= 500 && resp.StatusCode <= 599:
		return nil, &Error{Endpoint: endpoint, Kind: KindStatus5xx, Status: resp.StatusCode, Msg: errorText(b)}
	default:
		return nil, &Error{Endpoint: endpoint, Kind: KindStatus4xx, Status: resp.StatusCode, Msg: errorText(b)}
	}
}

// errorText is the server's {"error": "..."} message, or its body, quoted
// and cut to 512 bytes.
func errorText(b []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	s := string(b)
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		s = e.Error
	}
	if s == "" {
		return "empty body"
	}
	return fmt.Sprintf("%q", truncate(s, 512))
}
