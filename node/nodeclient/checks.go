package nodeclient

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/ipfs/go-cid"
	"google.golang.org/grpc"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/artifact/transfer"
	"github.com/zooai/gym/internal/atomicfile"
	"github.com/zooai/gym/node/worker"
	"github.com/zooai/gym/protocol/jobspec"
	"github.com/zooai/gym/protocol/nodeauth"
)

// ListChecks implements worker.Checks: the checks hanzod assigned this
// validator that it has not answered.
func (c *Client) ListChecks(ctx context.Context) ([]worker.CheckAssignment, error) {
	ctx, cancel := callContext(ctx, CallTimeout)
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	var r *pb.ListChecksResponse
	err := c.signed(func(a nodeauth.Auth, opts ...grpc.CallOption) (int64, error) {
		l := nodeauth.ListChecks{Auth: a}
		l.Sign(c.cfg.Key, l.SignedBytes())
		var err error
		r, err = c.node.ListChecks(ctx, &pb.ListChecksRequest{Auth: pbAuth(l.Auth)}, opts...)
		return r.GetServerTimeMs(), err
	})
	if err != nil {
		return nil, err
	}
	if r.Artifacts != "" {
		c.amu.Lock()
		c.arts = r.Artifacts
		c.amu.Unlock()
	}
	var out []worker.CheckAssignment
	for _, p := range r.Checks {
		a := worker.CheckAssignment{Job: p.Job, Epoch: int(p.Epoch), Step: p.Step, Node: p.Node, Digest: p.Digest, Package: p.Package,
			Deadline: time.UnixMilli(p.DeadlineUnixMs)}
		if p.Spec != nil {
			a.Spec = jobspec.FromProto(p.Spec)
		}
		out = append(out, a)
	}
	return out, nil
}

// SubmitVerdict implements worker.Checks: the verdict, signed.
func (c *Client) SubmitVerdict(ctx context.Context, v worker.VerdictReport) error {
	ctx, cancel := callContext(ctx, CallTimeout)
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.signed(func(a nodeauth.Auth, opts ...grpc.CallOption) (int64, error) {
		s := nodeauth.SubmitVerdict{Auth: a, Job: v.Job, Epoch: uint64(v.Epoch), Step: v.Step, Subject: v.Node, Digest: v.Digest,
			Package: v.Package, Outcome: v.Outcome, Check: v.Check, Detail: v.Detail, Figures: v.Figures}
		s.Sign(c.cfg.Key, s.SignedBytes())
		_, err := c.node.SubmitVerdict(ctx, &pb.SubmitVerdictRequest{Auth: pbAuth(s.Auth), Job: s.Job, Epoch: int32(v.Epoch), Step: s.Step,
			Node: s.Subject, Digest: s.Digest, Package: s.Package, Outcome: s.Outcome, Check: s.Check, Detail: s.Detail, Figures: s.Figures}, opts...)
		return 0, err
	})
}

// FetchCheck implements worker.Checks: the check package root, fetched
// from hanzod's artifact server (its manifest signed by hanzod, every
// block verified against the CID) and exported to a directory.
func (c *Client) FetchCheck(ctx context.Context, root string) (string, error) {
	rc, err := cid.Decode(root)
	if err != nil {
		return "", fmt.Errorf("nodeclient: check package %q: %w", root, err)
	}
	client, peer, _, err := c.sources(ctx)
	if err != nil {
		return "", err
	}
	g := transfer.Get{Client: client, Peers: []transfer.Peer{peer}, Store: c.store,
		Trust: func(k ed25519.PublicKey) bool { return k.Equal(peer.Key) }, Now: c.now}
	if _, _, err := transfer.GetArtifact(ctx, rc, g); err != nil {
		return "", fmt.Errorf("nodeclient: fetch check package %s from %s: %w", root, peer.URL, err)
	}
	dir := filepath.Join(c.cfg.Dir, "checks", root)
	if _, err := os.Stat(filepath.Join(dir, "check.json")); err != nil {
		err := atomicfile.Dir(dir, 0o755, func(tmp string) error { return c.store.Export(ctx, rc, tmp, "") })
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return dir, nil
}

var _ worker.Checks = (*Client)(nil)
