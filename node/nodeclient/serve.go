package nodeclient

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"time"

	"github.com/ipfs/go-cid"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/transfer"
)

// ServeConfig configures the node's artifact server (ArtifactServer).
type ServeConfig struct {
	// Allow lists keys that may read every artifact in the store.
	Allow []ed25519.PublicKey
	// AllowAny lets any key read the checkpoints signed by hanzod (the
	// same checkpoints any node that registers may read from hanzod).
	// Without it, only the nodes hanzod has named to this node may.
	AllowAny bool
	// PeerTTL is how long a node hanzod named in an assignment (ring member
	// or probe peer) stays allowed after the last assignment naming it
	// (1 h if 0).
	PeerTTL time.Duration
	Logger  *slog.Logger
}

// ArtifactServer returns an artifact server (the IPFS trustless gateway
// of artifact/transfer, with its per-request authorization and a nonce log
// in Dir) over the node's store, so that other workers can fetch the
// checkpoints this node holds from it instead of, or besides, hanzod.
//
// Who may read: a key in cfg.Allow reads anything; any other key reads
// only checkpoints whose manifest hanzod signed (hanzod's key is the one
// in the assignments' artifact server address, the key this node's own
// fetches trust), and only if hanzod has named that key to this node in
// an assignment within cfg.PeerTTL (a member of its ring or a probe peer:
// a registered node of the same job), or with cfg.AllowAny, any key. The
// store holds only checkpoints fetched from hanzod anyway, so a worker
// never serves what hanzod would not serve to a registered node; what it
// adds is that a node must be named by hanzod, not merely registered,
// since registered nodes are known only to hanzod.
func (c *Client) ArtifactServer(cfg ServeConfig) (*transfer.Server, error) {
	if cfg.PeerTTL == 0 {
		cfg.PeerTTL = time.Hour
	}
	if cfg.PeerTTL < 0 {
		return nil, errors.New("nodeclient: negative peer TTL")
	}
	allow := map[string]bool{}
	for _, k := range cfg.Allow {
		allow[string(k)] = true
	}
	return transfer.NewServer(transfer.ServerConfig{Key: c.cfg.Key, Store: c.store, Now: c.now, Logger: cfg.Logger,
		NonceLog: filepath.Join(c.cfg.Dir, "artifact-nonces.log"),
		Allow: func(issuer ed25519.PublicKey, root cid.Cid) bool {
			if allow[string(issuer)] {
				return true
			}
			return c.mayRead(issuer, root, cfg)
		}})
}

// mayRead is the policy for keys not in the allow-list.
func (c *Client) mayRead(issuer ed25519.PublicKey, root cid.Cid, cfg ServeConfig) bool {
	c.amu.Lock()
	arts := c.arts
	seen, named := c.named[hex.EncodeToString(issuer)]
	c.amu.Unlock()
	if !cfg.AllowAny && (!named || c.cfg.Now().Sub(seen) > cfg.PeerTTL) {
		return false
	}
	hanzod, err := transfer.ParsePeer(arts)
	if err != nil || hanzod.Key == nil {
		return false // no assignment yet: no key to check manifests against
	}
	rec, err := c.store.Artifact(root)
	if err != nil {
		return true // not held here: the server answers 404
	}
	if rec.Manifest.Manifest.Kind == artifact.KindBaseModel {
		// A base model a job named by CID, fetched and verified: hanzod
		// serves it to every registered node.
		return true
	}
	creator, err := rec.Manifest.Manifest.CreatorKey()
	return err == nil && creator.Equal(hanzod.Key)
}

// noteAssignment remembers hanzod's artifact server and the nodes an
// assignment names.
func (c *Client) noteAssignment(p *pb.Assignment) {
	now := c.cfg.Now()
	c.amu.Lock()
	defer c.amu.Unlock()
	if p.Artifacts != "" {
		c.arts = p.Artifacts
	}
	ids := slices.Clone(p.ProbePeers)
	if p.Ring != nil {
		ids = append(ids, p.Ring.Members...)
	}
	for _, id := range ids {
		if id != c.id {
			c.named[id] = now
		}
	}
	for id, t := range c.named {
		if now.Sub(t) > 24*time.Hour {
			delete(c.named, id)
		}
	}
}
