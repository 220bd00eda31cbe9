// Package pin puts artifacts on an IPFS node and keeps them there: a
// client of kubo's HTTP RPC (Client: import a CAR with its roots pinned,
// ask whether a root is pinned) and a durable retry queue (Queue) that
// hanzod feeds with every artifact it publishes or serves.
//
// The node receives our own CAR (artifact.WriteCAR), so the CID it pins is
// the CID we computed, whatever its import settings. Nothing is dropped:
// the queue is a file in hanzod's data directory, written before a pin is
// reported, and an artifact whose pin fails is retried with capped
// exponential backoff until the node confirms it (pin/ls). Time is an
// input: the queue takes a clock, and the caller decides when to step it.
package pin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"

	"github.com/ipfs/go-cid"

	"github.com/zooai/gym/artifact"
)

// Errors wrapped by the client.
var (
	// ErrURL is a bad IPFS_URL.
	ErrURL = errors.New("pin: bad IPFS RPC URL")
	// ErrRPC is an error reply from the node.
	ErrRPC = errors.New("pin: IPFS RPC error")
	// ErrReply is a reply that does not say what it should (a wrong or
	// missing root, unparseable JSON).
	ErrReply = errors.New("pin: unexpected IPFS RPC reply")
)

// maxReply bounds what is read of one RPC reply (import replies are one
// short JSON object per root, pin/ls one per key asked).
const maxReply = 1 << 20

// Client speaks kubo's HTTP RPC (/api/v0) at one base URL.
type Client struct {
	base *url.URL
	user *url.Userinfo
	http *http.Client
}

// NewClient checks raw (http or https, a host, no query; user:password
// becomes HTTP basic authentication, kubo's API.Authorizations) and returns a
// client; hc nil is http.DefaultClient.
func NewClient(raw string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrURL, raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w %q: want http(s)://HOST:PORT of kubo's RPC API (default port 5001)", ErrURL, raw)
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	user := u.User
	u.User = nil
	u.Path = strings.TrimSuffix(u.Path, "/")
	return &Client{base: u, user: user, http: hc}, nil
}

// String is the URL without credentials (for logs).
func (c *Client) String() string { return c.base.String() }

func (c *Client) post(ctx context.Context, cmd string, args url.Values, body io.Reader, contentType string) (*http.Response, error) {
	u := *c.base
	u.Path += "/api/v0/" + cmd
	u.RawQuery = args.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.user != nil {
		pw, _ := c.user.Password()
		req.SetBasicAuth(c.user.Username(), pw)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		var e struct{ Message string }
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxReply))
		if json.Unmarshal(b, &e) != nil || e.Message == "" {
			e.Message = strings.TrimSpace(string(b))
		}
		return nil, fmt.Errorf("%w: %s: %s: %s", ErrRPC, cmd, resp.Status, e.Message)
	}
	return resp, nil
}

// Import sends the DAG under root (read from g) to the node as a CARv1
// with /api/v0/dag/import?pin-roots=true and checks that the node pinned
// exactly root. It returns the CAR's size in bytes.
func (c *Client) Import(ctx context.Context, g artifact.Getter, root cid.Cid) (int64, error) {
	// Walk first, so a missing block fails here and not half-way into
	// the upload.
	if _, err := artifact.Walk(ctx, g, root, artifact.DefaultLimits()); err != nil {
		return 0, fmt.Errorf("pin: %s: %w", root, err)
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	var n countWriter
	go func() {
		part, err := mw.CreateFormFile("file", root.String()+".car")
		if err == nil {
			err = artifact.WriteCAR(ctx, io.MultiWriter(part, &n), g, root)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	resp, err := c.post(ctx, "dag/import", url.Values{"pin-roots": {"true"}}, pr, mw.FormDataContentType())
	pr.CloseWithError(io.ErrClosedPipe) // stop the writer if the request ended early
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	found := false
	sc := bufio.NewScanner(io.LimitReader(resp.Body, maxReply))
	sc.Buffer(make([]byte, 0, 4096), maxReply)
	for sc.Scan() {
		var line struct {
			Root *struct {
				Cid struct {
					Slash string `json:"/"`
				}
				PinErrorMsg string
			}
			Message string // an error reported in the stream
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return 0, fmt.Errorf("%w: dag/import: %v", ErrReply, err)
		}
		if line.Message != "" {
			return 0, fmt.Errorf("%w: dag/import: %s", ErrRPC, line.Message)
		}
		if line.Root == nil {
			continue
		}
		if line.Root.Cid.Slash != root.String() {
			return 0, fmt.Errorf("%w: dag/import reports root %q, want %s", ErrReply, line.Root.Cid.Slash, root)
		}
		if line.Root.PinErrorMsg != "" {
			return 0, fmt.Errorf("%w: dag/import could not pin %s: %s", ErrRPC, root, line.Root.PinErrorMsg)
		}
		found = true
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("pin: dag/import reply: %w", err)
	}
	if !found {
		return 0, fmt.Errorf("%w: dag/import did not report root %s", ErrReply, root)
	}
	return n.n, nil
}

// Pinned asks the node (/api/v0/pin/ls?type=recursive) whether root is
// pinned recursively.
func (c *Client) Pinned(ctx context.Context, root cid.Cid) (bool, error) {
	resp, err := c.post(ctx, "pin/ls", url.Values{"arg": {root.String()}, "type": {"recursive"}}, nil, "")
	if err != nil {
		if errors.Is(err, ErrRPC) && strings.Contains(err.Error(), "not pinned") {
			return false, nil
		}
		return false, err
	}
	defer resp.Body.Close()
	var r struct {
		Keys map[string]struct{ Type string }
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxReply)).Decode(&r); err != nil {
		return false, fmt.Errorf("%w: pin/ls: %v", ErrReply, err)
	}
	k, ok := r.Keys[root.String()]
	return ok && k.Type == "recursive", nil
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }
