package daemon

import (
	"context"
	"fmt"
	"io"
	"io/fs"

	dag "github.com/ipfs/boxo/ipld/merkledag"

	"github.com/zooai/gym/artifact"
	astore "github.com/zooai/gym/artifact/store"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/protocol/hardware"
	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
)

// maxConfigBytes bounds a base's config.json as hanzod reads it.
const maxConfigBytes = 1 << 20

// modelShape reads the shape of base model (a job's model field) for the
// scheduler's memory estimate, from config.json alone: the built-in
// base's, or that of a complete base-model artifact in hanzod's store
// (the root directory's config.json, its blocks verified against their
// CIDs as they are read; the weights are never read). A model hanzod does
// not hold, or names no CID, has no shape (nil, nil): the job is matched by
// min_vram_mib alone. A config.json that is there and that the engine
// refuses (an architecture no node can run) is an error.
func modelShape(ctx context.Context, arts *astore.Store, model string) (*hardware.Shape, error) {
	var cfg []byte
	if model == jobspec.BuiltinModel {
		b, err := fs.ReadFile(basemodel.BuiltinFS(), "config.json")
		if err != nil {
			return nil, err
		}
		cfg = b
	} else {
		root, ok, err := jobspec.ModelCID(model)
		if err != nil || !ok {
			return nil, nil // refused where it matters: by the workers, with the reason in the job's status
		}
		if _, err := arts.Artifact(root); err != nil {
			return nil, nil
		}
		data, err := arts.Get(ctx, root)
		if err != nil {
			return nil, nil
		}
		pn, err := dag.DecodeProtobuf(data)
		if err != nil {
			return nil, nil
		}
		l, err := pn.GetNodeLink("config.json")
		if err != nil {
			return nil, fmt.Errorf("base-model artifact %s has no config.json at its root (publish the model directory itself)", root)
		}
		r, err := artifact.FileReader(ctx, arts, l.Cid)
		if err != nil {
			return nil, fmt.Errorf("config.json of %s: %w", root, err)
		}
		if cfg, err = io.ReadAll(io.LimitReader(r, maxConfigBytes+1)); err != nil {
			return nil, fmt.Errorf("config.json of %s: %w", root, err)
		}
		if len(cfg) > maxConfigBytes {
			return nil, fmt.Errorf("config.json of %s is over %d bytes", root, maxConfigBytes)
		}
	}
	sh, err := jobconf.ShapeFromConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("config.json: %w", err)
	}
	return &sh, nil
}
