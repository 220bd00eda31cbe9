package transfer

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/store"
)

// Content types of the trustless-gateway protocol.
const (
	TypeRaw = "application/vnd.ipld.raw"
	TypeCAR = "application/vnd.ipld.car"
)

// Paths served besides /ipfs/.
const (
	KeyPath      = "/gym/v1/key"       // GET: the node's public key, hex (no authorization)
	ManifestPath = "/gym/v1/manifest/" // GET {root}: the signed manifest
)

// ServerConfig configures a Server.
type ServerConfig struct {
	Key   ed25519.PrivateKey // the node's key: authorizations must name it
	Store *store.Store
	// Allow decides which requesters may read which artifacts.
	Allow     func(issuer ed25519.PublicKey, root cid.Cid) bool
	Now       func() time.Time // time.Now if nil
	Logger    *slog.Logger     // discarded if nil
	MaxNonces int              // live authorizations remembered; 1<<20 if 0
	// NonceLog, if set, is a file that keeps spent nonces across restarts
	// (see NonceLog); without it a restart forgets them.
	NonceLog string
}

// Server serves a store's complete artifacts.
type Server struct {
	cfg    ServerConfig
	guard  *Guard
	log    *slog.Logger
	nonces *NonceLog // nil without ServerConfig.NonceLog
}

// NewServer returns a Server.
func NewServer(cfg ServerConfig) (*Server, error) {
	if len(cfg.Key) != ed25519.PrivateKeySize || cfg.Store == nil {
		return nil, errors.New("transfer: server needs a key and a store")
	}
	if cfg.Allow == nil {
		return nil, errors.New("transfer: server needs an Allow policy")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxNonces == 0 {
		cfg.MaxNonces = 1 << 20
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pub := cfg.Key.Public().(ed25519.PublicKey)
	s := &Server{cfg: cfg, guard: NewGuard(pub, cfg.Allow, cfg.MaxNonces), log: log}
	if cfg.NonceLog != "" {
		l, err := OpenNonceLog(cfg.NonceLog, s.guard, cfg.Now)
		if err != nil {
			return nil, err
		}
		s.nonces = l
	}
	return s, nil
}

// Close releases the nonce log, if any.
func (s *Server) Close() error {
	if s.nonces == nil {
		return nil
	}
	return s.nonces.Close()
}

// AllowKeys returns an Allow policy that admits the given keys to every
// artifact.
func AllowKeys(keys ...ed25519.PublicKey) func(ed25519.PublicKey, cid.Cid) bool {
	set := map[string]bool{}
	for _, k := range keys {
		set[string(k)] = true
	}
	return func(k ed25519.PublicKey, _ cid.Cid) bool { return set[string(k)] }
}

// Guard exposes the server's authorization state (for tests and metrics).
func (s *Server) Guard() *Guard { return s.guard }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	switch {
	case r.URL.Path == KeyPath:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, hex.EncodeToString(s.cfg.Key.Public().(ed25519.PublicKey)))
	case strings.HasPrefix(r.URL.Path, "/ipfs/"):
		s.serveIPFS(w, r)
	case strings.HasPrefix(r.URL.Path, ManifestPath):
		s.serveManifest(w, r)
	default:
		http.NotFound(w, r)
	}
}

// authorize checks the request's authorization for root and writes the
// refusal if there is one.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, root cid.Cid) bool {
	a, err := s.guard.Check(r.Header.Get("Authorization"), root, s.cfg.Now())
	if err == nil {
		if s.nonces != nil {
			if err := s.nonces.Append(a.Nonce, a.Expires); err != nil {
				s.log.Error("recording a nonce", "err", err)
				http.Error(w, "cannot record the authorization", http.StatusInternalServerError)
				return false
			}
		}
		return true
	}
	code := http.StatusForbidden
	if errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrExpired) {
		code = http.StatusUnauthorized
		w.Header().Set("WWW-Authenticate", AuthScheme)
	}
	s.log.Info("artifact request refused", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
	http.Error(w, err.Error(), code)
	return false
}

// requestRoot returns the artifact the request claims to read: the
// X-Gym-Artifact header, or the requested CID itself.
func requestRoot(r *http.Request, c cid.Cid) (cid.Cid, error) {
	h := r.Header.Get("X-Gym-Artifact")
	if h == "" {
		return c, nil
	}
	return cid.Decode(h)
}

func (s *Server) serveIPFS(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/ipfs/")
	if strings.Contains(rest, "/") {
		http.Error(w, "paths under a CID are not served; request the CID", http.StatusBadRequest)
		return
	}
	c, err := cid.Decode(rest)
	if err != nil || artifact.CheckCID(c) != nil {
		http.Error(w, "bad CID", http.StatusBadRequest)
		return
	}
	format := r.URL.Query().Get("format")
	if format == "" {
		switch accept := r.Header.Get("Accept"); {
		case strings.Contains(accept, TypeRaw):
			format = "raw"
		case strings.Contains(accept, TypeCAR):
			format = "car"
		}
	}
	if format != "raw" && format != "car" {
		http.Error(w, "this is a trustless gateway: ask for format=raw or format=car", http.StatusNotAcceptable)
		return
	}
	root, err := requestRoot(r, c)
	if err != nil {
		http.Error(w, "bad X-Gym-Artifact", http.StatusBadRequest)
		return
	}
	if !s.authorize(w, r, root) {
		return
	}
	if _, err := s.cfg.Store.Artifact(root); err != nil || !s.cfg.Store.Contains(root, c) {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "private, max-age=29030400, immutable")
	h.Set("X-Ipfs-Roots", c.String())
	if format == "raw" {
		data, err := s.cfg.Store.Get(r.Context(), c)
		if errors.Is(err, artifact.ErrNotFound) {
			// Removed since the check above (the artifact's GC).
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		if err != nil {
			s.log.Error("serving a block", "cid", c, "err", err)
			http.Error(w, "block unavailable", http.StatusInternalServerError)
			return
		}
		h.Set("Content-Type", TypeRaw)
		h.Set("Content-Length", strconv.Itoa(len(data)))
		h.Set("Etag", `"`+c.String()+`.raw"`)
		if r.Method == http.MethodGet {
			w.Write(data)
		}
		return
	}
	h.Set("Content-Type", TypeCAR+"; version=1; order=dfs; dups=n")
	h.Set("Etag", `"`+c.String()+`.car"`)
	if r.Method == http.MethodHead {
		return
	}
	if err := artifact.WriteCAR(r.Context(), w, s.cfg.Store, c); err != nil {
		// Headers may be gone; a truncated CAR fails the client's verification.
		s.log.Error("serving a CAR", "cid", c, "err", err)
	}
}

func (s *Server) serveManifest(w http.ResponseWriter, r *http.Request) {
	root, err := cid.Decode(strings.TrimPrefix(r.URL.Path, ManifestPath))
	if err != nil {
		http.Error(w, "bad CID", http.StatusBadRequest)
		return
	}
	if !s.authorize(w, r, root) {
		return
	}
	rec, err := s.cfg.Store.Artifact(root)
	if err != nil {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	data, err := rec.Manifest.Encode()
	if err != nil {
		http.Error(w, "manifest unavailable", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Write(data)
}

// Serve runs srv until ctx ends, then shuts it down gracefully.
func Serve(ctx context.Context, srv *http.Server, serve func() error) error {
	errc := make(chan error, 1)
	go func() { errc <- serve() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}
