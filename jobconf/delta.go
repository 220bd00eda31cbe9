package jobconf

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/zooai/gym/delta"
	"github.com/zooai/gym/model"
)

// KeySync is the metadata key of a delta's sync number within its epoch
// (1-based), beside the fields SPEC.md defines.
const KeySync = "sync"

// SyncDelta is one worker's contribution for one sync: the change of its
// adapter over the sync and what it claims about it.
type SyncDelta struct {
	Job, Node   string
	Epoch, Sync int
	Step        uint64 // global step at the end of the sync
	Sequence    uint64 // grows with every delta the node submits
	Base        string // Digest of the adapter the sync started from
	ClaimedLoss float64
	Samples     uint64
	Time        time.Time
	Delta       *model.Adapter
}

// Encode writes d as a signed delta file (fp32 tensors, zstd, LoRA flag).
func Encode(ctx context.Context, key ed25519.PrivateKey, d SyncDelta) ([]byte, error) {
	meta := delta.NewMetadata(delta.MetadataFields{
		Job: d.Job, Epoch: uint64(d.Epoch), Step: d.Step, Node: d.Node, Sequence: d.Sequence,
		BaseCheckpoint: d.Base, ClaimedLoss: d.ClaimedLoss, Samples: d.Samples, Time: d.Time,
	})
	if err := meta.Set(KeySync, d.Sync); err != nil {
		return nil, err
	}
	var ts []delta.Tensor
	for _, t := range d.Delta.Tensors() {
		shape := make([]uint64, len(t.Shape))
		for i, s := range t.Shape {
			shape[i] = uint64(s)
		}
		ts = append(ts, delta.Tensor{Name: t.Name, DType: delta.FP32, Shape: shape, Data: model.Float32Bytes(t.Data)})
	}
	var b bytes.Buffer
	if _, err := delta.Write(ctx, &b, key, ts, delta.WriteOptions{Compression: delta.Zstd, Flags: delta.FlagLoRA, Metadata: meta}); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ErrShape reports tensors that do not match the job's adapter.
var ErrShape = fmt.Errorf("jobconf: tensors do not match the job's adapter")

// ErrNonFinite reports a NaN or infinite value.
var ErrNonFinite = fmt.Errorf("jobconf: non-finite value")

// Decode fills a copy of template (an adapter of the job's shape) from
// verified tensors: the same names in the same order, fp32, the same
// shapes, finite values — or ErrShape / ErrNonFinite saying what differs.
func Decode(template *model.Adapter, ts []delta.Tensor) (*model.Adapter, error) {
	out := template.ZeroLike()
	want := out.Tensors()
	if len(ts) != len(want) {
		return nil, fmt.Errorf("%w: %d tensors, the job's adapter has %d", ErrShape, len(ts), len(want))
	}
	for i, w := range want {
		t := ts[i]
		if t.Name != w.Name {
			return nil, fmt.Errorf("%w: tensor %d is %q, want %q", ErrShape, i, t.Name, w.Name)
		}
		if t.DType != delta.FP32 {
			return nil, fmt.Errorf("%w: %s is %s, want fp32", ErrShape, t.Name, t.DType)
		}
		if len(t.Shape) != len(w.Shape) {
			return nil, fmt.Errorf("%w: %s has rank %d, want %d", ErrShape, t.Name, len(t.Shape), len(w.Shape))
		}
		for k := range w.Shape {
			if t.Shape[k] != uint64(w.Shape[k]) {
				return nil, fmt.Errorf("%w: %s has shape %v, want %v", ErrShape, t.Name, t.Shape, w.Shape)
			}
		}
		if len(t.Data) != 4*len(w.Data) {
			return nil, fmt.Errorf("%w: %s has %d bytes, want %d", ErrShape, t.Name, len(t.Data), 4*len(w.Data))
		}
		for k := range w.Data {
			v := math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*k:]))
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, fmt.Errorf("%w: %s[%d] = %v", ErrNonFinite, t.Name, k, v)
			}
			w.Data[k] = v
		}
	}
	return out, nil
}
