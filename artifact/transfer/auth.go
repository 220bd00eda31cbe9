// Package transfer moves artifacts between nodes over HTTP. The server
// speaks the IPFS trustless-gateway protocol (GET /ipfs/{cid}?format=raw for
// one verified block, ?format=car for a whole DAG as a CARv1), so any IPFS
// HTTP retrieval client can read from it, with one addition: every request
// carries a signed authorization (see Authorization) bound to the artifact,
// to the serving node's key, to an expiry and to a single-use nonce.
//
// Fetch pulls a DAG from several sources at once, each block from one of
// them, verifying every block against its CID before it is stored; it skips
// blocks already held (resume), moves work away from a source that fails or
// serves corrupt blocks, and gives up on a block only when every source has
// failed it.
package transfer

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/keys/edkey"
)

// Authorization errors; the server maps them to 401 or 403.
var (
	ErrUnauthorized  = errors.New("transfer: missing or invalid authorization")    // 401
	ErrExpired       = errors.New("transfer: authorization expired")               // 401
	ErrWrongAudience = errors.New("transfer: authorization for another node")      // 403
	ErrReplay        = errors.New("transfer: authorization already used")          // 403
	ErrForbidden     = errors.New("transfer: requester not allowed this artifact") // 403
)

// AuthScheme is the HTTP authorization scheme.
const AuthScheme = "Gym-Artifact"

const authDomain = "zoo-gym/artifact-auth/v1\x00"

// MaxAuthTTL is the longest lifetime a server accepts: it bounds how long
// a nonce must be remembered.
const MaxAuthTTL = 10 * time.Minute

// Authorization lets its issuer read one artifact from one node, once.
// On the wire it is the header
//
//	Authorization: Gym-Artifact <base64url(JSON)>.<base64url(Ed25519 signature)>
//
// where the signature, by the issuer's key, covers authDomain followed by
// the JSON bytes exactly as sent.
type Authorization struct {
	Format   int    `json:"format"`   // 1
	Artifact string `json:"artifact"` // root CID of the artifact
	Audience string `json:"aud"`      // serving node's public key, hex
	Issuer   string `json:"iss"`      // requesting node's public key, hex
	Expires  int64  `json:"exp"`      // Unix seconds
	Nonce    string `json:"nonce"`    // 16 random bytes, hex
}

// NewAuthorization signs a fresh authorization for artifact root at the
// node whose key is audience, valid for ttl from now.
func NewAuthorization(key ed25519.PrivateKey, audience ed25519.PublicKey, root cid.Cid, now time.Time, ttl time.Duration) (string, error) {
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", err
	}
	a := Authorization{
		Format:   1,
		Artifact: root.String(),
		Audience: hex.EncodeToString(audience),
		Issuer:   artifact.PublicHex(key),
		Expires:  now.Add(ttl).Unix(),
		Nonce:    hex.EncodeToString(nonce[:]),
	}
	payload, err := json.Marshal(a)
	if err != nil {
		return "", err
	}
	sig := ed25519.Sign(key, append([]byte(authDomain), payload...))
	enc := base64.RawURLEncoding
	return AuthScheme + " " + enc.EncodeToString(payload) + "." + enc.EncodeToString(sig), nil
}

// ParseAuthorization decodes a header value and checks its signature by
// its issuer; it checks nothing else.
func ParseAuthorization(header string) (*Authorization, ed25519.PublicKey, error) {
	rest, ok := strings.CutPrefix(header, AuthScheme+" ")
	if !ok || len(rest) > 4096 {
		return nil, nil, ErrUnauthorized
	}
	p64, s64, ok := strings.Cut(rest, ".")
	if !ok {
		return nil, nil, ErrUnauthorized
	}
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(p64)
	sig, err2 := enc.DecodeString(s64)
	if err1 != nil || err2 != nil || edkey.CheckSignature(sig) != nil {
		return nil, nil, ErrUnauthorized
	}
	var a Authorization
	if err := json.Unmarshal(payload, &a); err != nil || a.Format != 1 {
		return nil, nil, ErrUnauthorized
	}
	iss, err := hex.DecodeString(a.Issuer)
	if err != nil || edkey.CheckPublicKey(iss) != nil {
		return nil, nil, ErrUnauthorized
	}
	if !ed25519.Verify(iss, append([]byte(authDomain), payload...), sig) {
		return nil, nil, ErrUnauthorized
	}
	if n, err := hex.DecodeString(a.Nonce); err != nil || len(n) != 16 {
		return nil, nil, ErrUnauthorized
	}
	return &a, ed25519.PublicKey(iss), nil
}

// Guard checks authorizations for one serving node. It is a pure state
// machine: time is passed in, and the only state is the set of nonces
// seen, which changes only when an authorization is accepted.
type Guard struct {
	self  string // our public key, hex
	allow func(issuer ed25519.PublicKey, root cid.Cid) bool
	max   int

	mu     sync.Mutex
	nonces map[string]int64 // nonce → expiry
}

// NewGuard returns a Guard for the node with public key self that accepts
// issuers for which allow returns true, remembering at most maxNonces
// unexpired nonces (then it refuses new requests until some expire).
func NewGuard(self ed25519.PublicKey, allow func(ed25519.PublicKey, cid.Cid) bool, maxNonces int) *Guard {
	return &Guard{self: hex.EncodeToString(self), allow: allow, max: maxNonces, nonces: map[string]int64{}}
}

// Check decides whether header authorizes reading artifact root now. On
// success the nonce is spent; on failure nothing changes.
func (g *Guard) Check(header string, root cid.Cid, now time.Time) (*Authorization, error) {
	a, iss, err := ParseAuthorization(header)
	if err != nil {
		return nil, err
	}
	t := now.Unix()
	switch {
	case a.Audience != g.self:
		return nil, ErrWrongAudience
	case a.Expires <= t:
		return nil, ErrExpired
	case a.Expires > now.Add(MaxAuthTTL).Unix():
		return nil, fmt.Errorf("%w: lifetime over %v", ErrUnauthorized, MaxAuthTTL)
	case a.Artifact != root.String():
		return nil, fmt.Errorf("%w: authorization is for %s", ErrForbidden, a.Artifact)
	case g.allow == nil || !g.allow(iss, root):
		return nil, ErrForbidden
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, seen := g.nonces[a.Nonce]; seen {
		return nil, ErrReplay
	}
	if len(g.nonces) >= g.max {
		for n, exp := range g.nonces {
			if exp <= t {
				delete(g.nonces, n)
			}
		}
		if len(g.nonces) >= g.max {
			return nil, fmt.Errorf("%w: too many live authorizations", ErrUnauthorized)
		}
	}
	g.nonces[a.Nonce] = a.Expires
	return a, nil
}

// Restore marks a nonce spent until exp: how a restarted server reloads the
// nonces it had accepted (see NonceLog).
func (g *Guard) Restore(nonce string, exp int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.nonces[nonce] = exp
}

// live returns the unexpired nonces.
func (g *Guard) live(now time.Time) map[string]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]int64, len(g.nonces))
	for n, exp := range g.nonces {
		if exp > now.Unix() {
			out[n] = exp
		}
	}
	return out
}

// Spent returns the number of remembered nonces.
func (g *Guard) Spent() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.nonces)
}
