package transfer

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/artifact/store"
)

// ErrUntrusted is a manifest signed by a key the fetcher does not trust.
var ErrUntrusted = errors.New("transfer: manifest creator not trusted")

// Get configures GetArtifact.
type Get struct {
	Client *Client
	Peers  []Peer // resolved (with keys)
	Store  *store.Store
	// Trust decides whose manifests are accepted; nil trusts any valid
	// signature (the root CID itself then is the trust anchor).
	Trust func(creator ed25519.PublicKey) bool
	Fetch FetchConfig // Sources are set from Peers
	Now   func() time.Time
}

// GetArtifact fetches the complete artifact root into the store: the
// signed manifest first (refused if untrusted, expired, older than a known
// one, or larger than the quota left), then the blocks from all peers at
// once, then the store's full verification. A fetch that fails on the
// quota removes the blocks it added; any other failure keeps them, so the
// next attempt resumes where this one stopped.
func GetArtifact(ctx context.Context, root cid.Cid, g Get) (*store.Record, Stats, error) {
	now := time.Now
	if g.Now != nil {
		now = g.Now
	}
	if rec, err := g.Store.Artifact(root); err == nil {
		return rec, Stats{}, nil
	}
	var sm *artifact.Signed
	var errs []error
	for _, p := range g.Peers {
		m, err := g.Client.Manifest(ctx, p, root)
		if err == nil {
			sm = m
			break
		}
		errs = append(errs, fmt.Errorf("%s: %w", p.URL, err))
	}
	if sm == nil {
		return nil, Stats{}, fmt.Errorf("transfer: no manifest for %s: %w", root, errors.Join(errs...))
	}
	creator, _ := sm.Manifest.CreatorKey()
	if g.Trust != nil && !g.Trust(creator) {
		return nil, Stats{}, fmt.Errorf("%w: %s", ErrUntrusted, sm.Manifest.Creator)
	}
	if err := g.Store.CheckManifest(sm, now()); err != nil {
		return nil, Stats{}, err
	}
	if free := g.Store.Free(); free >= 0 && int64(sm.Manifest.Size) > free {
		return nil, Stats{}, fmt.Errorf("%w: %s needs %d bytes, %d free", store.ErrQuota, root, sm.Manifest.Size, free)
	}
	cfg := g.Fetch
	cfg.Sources = nil
	cfg.Expected = int64(sm.Manifest.Size)
	for _, p := range g.Peers {
		cfg.Sources = append(cfg.Sources, g.Client.Source(p))
	}
	// The session pins every block the fetch puts or finds held, so a GC
	// running meanwhile leaves them until Complete has recorded them.
	sess := g.Store.Session()
	defer sess.Close()
	st, err := Fetch(ctx, root, sess, cfg)
	if err != nil {
		if errors.Is(err, store.ErrQuota) {
			sess.Discard(context.WithoutCancel(ctx))
		}
		return nil, st, err
	}
	// Through the fetch's session: the blocks it stored were verified as
	// they arrived and are not read and hashed again (Session.LeafSize).
	rec, err := sess.Complete(ctx, sm, now())
	return rec, st, err
}
