package transfer

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/keys/edkey"
)

// Errors of a source.
var (
	ErrRefused = errors.New("transfer: source refused the request") // 401/403: do not ask again
	ErrMissing = errors.New("transfer: source does not have it")    // 404
	ErrSource  = errors.New("transfer: source failed")              // transport error, 5xx, bad reply
)

// Source serves blocks of artifacts: an HTTP peer, or anything else that
// can (an in-memory store in tests).
type Source interface {
	Name() string
	// Block returns block c of artifact root, not yet verified.
	Block(ctx context.Context, root, c cid.Cid) ([]byte, error)
}

// Peer is a remote node serving artifacts over HTTP.
type Peer struct {
	URL string            // http://host:port
	Key ed25519.PublicKey // its node key: the audience of our authorizations
}

// ParsePeer reads "KEYHEX@host:port" or "host:port" (or a URL). A peer
// without a key must be resolved with Client.Resolve before use.
func ParsePeer(s string) (Peer, error) {
	var p Peer
	if k, addr, ok := strings.Cut(s, "@"); ok {
		b, err := edkey.ParseHex(k)
		if err != nil {
			return Peer{}, fmt.Errorf("transfer: peer %q: key %s", s, edkey.Reason(err))
		}
		p.Key, s = b, addr
	}
	if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
		s = "http://" + s
	}
	p.URL = strings.TrimRight(s, "/")
	return p, nil
}

// Client makes authorized requests with the requesting node's key.
type Client struct {
	Key  ed25519.PrivateKey
	HTTP *http.Client
	Now  func() time.Time // time.Now if nil
	TTL  time.Duration    // lifetime of each authorization; 1 minute if 0
}

func (c *Client) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

func (c *Client) http() *http.Client {
	if c.HTTP == nil {
		return defaultHTTP
	}
	return c.HTTP
}

var defaultHTTP = &http.Client{Transport: NewTransport()}

// NewTransport returns an HTTP transport for fetching: Go's default one
// with enough idle connections per peer kept open for every request in
// flight (http.DefaultTransport keeps 2, so with 32 requests in flight 30
// connections would be closed after each reply and dialled again, each
// new one starting TCP's slow start over).
func NewTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 0
	t.MaxIdleConnsPerHost = 256
	return t
}

// Resolve asks a peer without a pinned key for its key. This trusts the
// network path once (the key is not authenticated); pin keys with
// KEY@host:port where that matters.
func (c *Client) Resolve(ctx context.Context, p Peer) (Peer, error) {
	if p.Key != nil {
		return p, nil
	}
	body, err := c.get(ctx, p.URL+KeyPath, "", "", 256)
	if err != nil {
		return p, err
	}
	b, err := edkey.ParseHex(strings.TrimSpace(string(body)))
	if err != nil {
		return p, fmt.Errorf("%w: %s: key %s", ErrSource, p.URL, edkey.Reason(err))
	}
	p.Key = b
	return p, nil
}

func (c *Client) get(ctx context.Context, url, auth, root string, max int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if root != "" {
		req.Header.Set("X-Gym-Artifact", root)
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSource, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("%w: %s: %s", ErrRefused, resp.Status, strings.TrimSpace(string(msg)))
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("%w: %s", ErrMissing, url)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%w: %s", ErrSource, resp.Status)
	}
	// Check the announced size before allocating anything.
	if resp.ContentLength > max {
		return nil, fmt.Errorf("%w: %s announces %d bytes (limit %d)", ErrSource, url, resp.ContentLength, max)
	}
	var buf []byte
	if resp.ContentLength >= 0 {
		buf = make([]byte, 0, resp.ContentLength)
	}
	w := &limitedBuffer{b: buf, max: max}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSource, err)
	}
	if resp.ContentLength >= 0 && int64(len(w.b)) != resp.ContentLength {
		return nil, fmt.Errorf("%w: %s: %d of %d bytes", ErrSource, url, len(w.b), resp.ContentLength)
	}
	return w.b, nil
}

type limitedBuffer struct {
	b   []byte
	max int64
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if int64(len(l.b)+len(p)) > l.max {
		return 0, fmt.Errorf("reply longer than %d bytes", l.max)
	}
	l.b = append(l.b, p...)
	return len(p), nil
}

func (c *Client) auth(p Peer, root cid.Cid) (string, error) {
	if p.Key == nil {
		return "", fmt.Errorf("transfer: peer %s has no key (resolve it first)", p.URL)
	}
	ttl := c.TTL
	if ttl == 0 {
		ttl = time.Minute
	}
	return NewAuthorization(c.Key, p.Key, root, c.now(), ttl)
}

// Block fetches block blk of artifact root from p. The bytes are not
// verified here; Fetch verifies them.
func (c *Client) Block(ctx context.Context, p Peer, root, blk cid.Cid) ([]byte, error) {
	a, err := c.auth(p, root)
	if err != nil {
		return nil, err
	}
	h := ""
	if !blk.Equals(root) {
		h = root.String()
	}
	return c.get(ctx, p.URL+"/ipfs/"+blk.String()+"?format=raw", a, h, artifact.MaxBlockSize)
}

// Manifest fetches and checks the signed manifest of root from p.
func (c *Client) Manifest(ctx context.Context, p Peer, root cid.Cid) (*artifact.Signed, error) {
	a, err := c.auth(p, root)
	if err != nil {
		return nil, err
	}
	data, err := c.get(ctx, p.URL+ManifestPath+root.String(), a, "", artifact.MaxManifestSize)
	if err != nil {
		return nil, err
	}
	sm, err := artifact.ParseSigned(data)
	if err != nil {
		return nil, err
	}
	if sm.Manifest.Root != root.String() {
		return nil, fmt.Errorf("%w: manifest for %s, asked for %s", artifact.ErrMismatch, sm.Manifest.Root, root)
	}
	return sm, nil
}

// Source returns p as a Source.
func (c *Client) Source(p Peer) Source { return &httpSource{c: c, p: p} }

type httpSource struct {
	c *Client
	p Peer
}

func (s *httpSource) Name() string { return s.p.URL }
func (s *httpSource) Block(ctx context.Context, root, c cid.Cid) ([]byte, error) {
	return s.c.Block(ctx, s.p, root, c)
}
