package jobconf

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/protocol/delta"
)

// KeySync is the metadata key of a delta's sync number within its epoch
// (1-based), beside the fields SPEC.md defines.
const KeySync = "sync"

// KeyBackend is the metadata key of the training backend that made a
// delta (a JSON string, "torch"); absent for the go backend, so go deltas
// are what they were before backends existed. It is a claim: the judge
// trusts it only as far as the job's backend allows (docs/backends.md).
const KeyBackend = "backend"

// BackendOf is the backend a delta's metadata claims: "go" when the key is
// absent, else its string value.
func BackendOf(m *delta.Metadata) (string, error) {
	raw, ok := m.Get(KeyBackend)
	if !ok {
		return "go", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || s == "" || s == "go" {
		return "", fmt.Errorf("jobconf: delta metadata %s is %s, want a backend name other than go", KeyBackend, raw)
	}
	return s, nil
}

// KeyDType is the metadata key of the floating-point type a delta was
// trained in (a JSON string, "bfloat16"); absent for float32, so go deltas
// and the torch deltas made before the key existed read as float32. The
// judge checks a torch delta from its traces within the tolerances of
// its dtype (tracecheck.Tolerances), so the claim is signed with the delta.
const KeyDType = "dtype"

// The dtypes a delta may claim (KeyDType).
const (
	Float32  = "float32"
	BFloat16 = "bfloat16"
)

// DTypeOf is the dtype a delta's metadata claims: Float32 when the key is
// absent, else its value, which must be a dtype the tolerances were
// measured for; a go delta is always float32 (the Go engine trains in
// nothing else).
func DTypeOf(m *delta.Metadata) (string, error) {
	raw, ok := m.Get(KeyDType)
	if !ok {
		return Float32, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || (s != Float32 && s != BFloat16) {
		return "", fmt.Errorf("jobconf: delta metadata %s is %s, want %q or %q (or no key, for float32)", KeyDType, raw, Float32, BFloat16)
	}
	be, err := BackendOf(m)
	if err != nil {
		return "", err
	}
	if be == "go" && s != Float32 {
		return "", fmt.Errorf("jobconf: delta metadata %s is %q, but the go backend trains in float32 only: leave the key out", KeyDType, s)
	}
	return s, nil
}

// KeyBinding is the metadata key of a delta's job binding (Binding, a
// JSON string): it ties the signed delta to one hanzod instance and one
// job, so a delta cannot be replayed into another deployment whose job
// has the same id (job ids are sequential: job-00000001 everywhere).
const KeyBinding = "job_binding"

// Binding is the job binding of job id at the hanzod instance whose
// signing key is instance: hex SHA-256 of
// "zoo-gym/job-binding/v1" || 0x00 || instance || id. The key is made
// with hanzod's data directory (hanzod.key) and never shared, and an
// instance never reuses a job id, so the binding names one job of one
// deployment: a per-job nonce nobody has to store.
func Binding(instance ed25519.PublicKey, id string) string {
	h := sha256.New()
	h.Write([]byte("zoo-gym/job-binding/v1\x00"))
	h.Write(instance)
	h.Write([]byte(id))
	return hex.EncodeToString(h.Sum(nil))
}

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
	Delta       *llama.Adapter
	// Binding is the job binding hanzod sent with the assignment (written
	// under KeyBinding when set).
	Binding string
	// Backend is the training backend that made the delta; "" or "go" is
	// not written (KeyBackend).
	Backend string
	// DType is the floating-point type the backend trained in; "" or
	// Float32 is not written (KeyDType).
	DType string
	// Traces is the CID of the sync's trace bundle (KeyTraces; "": none).
	Traces string
}

// Encode writes d as a signed delta file (fp32 tensors under PEFT's names,
// zstd, LoRA flag).
func Encode(ctx context.Context, key ed25519.PrivateKey, d SyncDelta) ([]byte, error) {
	meta := delta.NewMetadata(delta.MetadataFields{
		Job: d.Job, Epoch: uint64(d.Epoch), Step: d.Step, Node: d.Node, Sequence: d.Sequence,
		BaseCheckpoint: d.Base, ClaimedLoss: d.ClaimedLoss, Samples: d.Samples, Time: d.Time,
	})
	if err := meta.Set(KeySync, d.Sync); err != nil {
		return nil, err
	}
	if d.Traces != "" {
		if err := meta.Set(KeyTraces, d.Traces); err != nil {
			return nil, err
		}
	}
	if d.Binding != "" {
		if err := meta.Set(KeyBinding, d.Binding); err != nil {
			return nil, err
		}
	}
	if d.Backend != "" && d.Backend != "go" {
		if err := meta.Set(KeyBackend, d.Backend); err != nil {
			return nil, err
		}
	}
	if d.DType != "" && d.DType != Float32 {
		if err := meta.Set(KeyDType, d.DType); err != nil {
			return nil, err
		}
	}
	var ts []delta.Tensor
	for _, t := range d.Delta.Views() {
		shape := make([]uint64, len(t.Shape))
		for i, s := range t.Shape {
			shape[i] = uint64(s)
		}
		ts = append(ts, delta.Tensor{Name: t.Name, DType: delta.FP32, Shape: shape, Data: llama.Float32Bytes(t.Data)})
	}
	var b bytes.Buffer
	if _, err := delta.Write(ctx, &b, key, ts, delta.WriteOptions{Compression: delta.Zstd, Flags: delta.FlagLoRA, Metadata: meta}); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ErrShape reports tensors that do not match the job's adapter.
var ErrShape = llama.ErrShape

// ErrNonFinite reports a NaN or infinite value.
var ErrNonFinite = llama.ErrNonFinite

// Decode fills a copy of template (an adapter of the job's shape) from
// verified tensors: the same names in the same order, fp32, the same
// shapes, finite values — or ErrShape / ErrNonFinite saying what differs.
func Decode(template *llama.Adapter, ts []delta.Tensor) (*llama.Adapter, error) {
	out := template.Zeroed()
	if err := llama.Fill(out.Views(), DeltaSource(ts), true); err != nil {
		return nil, err
	}
	return out, nil
}

// CheckDeclared checks what a delta declares of its tensors — names in
// order, dtypes, shapes; not their data — against template (an adapter of
// the job's shape), as Decode does before it reads any value: a file that
// passes decodes within exactly the template's size.
func CheckDeclared(template *llama.Adapter, ts []delta.Tensor) error {
	want := template.Views()
	if len(ts) != len(want) {
		return fmt.Errorf("%w: %d tensors, want %d", ErrShape, len(ts), len(want))
	}
	for i, w := range want {
		t := ts[i]
		if t.Name != w.Name {
			return fmt.Errorf("%w: tensor %d is %q, want %q", ErrShape, i, t.Name, w.Name)
		}
		ok := t.DType == delta.FP32 && len(t.Shape) == len(w.Shape)
		for d := 0; ok && d < len(w.Shape); d++ {
			ok = t.Shape[d] == uint64(w.Shape[d])
		}
		if !ok {
			ws := make([]uint64, len(w.Shape))
			for d, v := range w.Shape {
				ws[d] = uint64(v)
			}
			return fmt.Errorf("%w: tensor %q is %s%v, want F32%v", ErrShape, t.Name, safetensorsDType(t.DType), t.Shape, ws)
		}
	}
	return nil
}

// DecodeAny builds an adapter for a model of shape mc from a delta's
// tensors named as PEFT names them (llama.Adapter.Views), in any order:
// the rank and targets come from the names and shapes
// (llama.InferAdapter), alpha from the caller; every tensor the adapter
// needs must be there, F32, with its shape, finite, and nothing else.
func DecodeAny(ts []delta.Tensor, mc llama.Config, alpha float64) (*llama.Adapter, error) {
	names := make([]string, len(ts))
	shapes := make([][]uint64, len(ts))
	for i, t := range ts {
		names[i], shapes[i] = t.Name, t.Shape
	}
	rank, targets, err := llama.InferAdapter(names, shapes)
	if err != nil {
		return nil, err
	}
	// The adapter the names claim must hold exactly the bytes the delta
	// carries, checked before it is allocated (a hostile rank would
	// otherwise size it).
	var want, have float64
	for _, m := range targets {
		in, out := mc.Dims(m)
		want += 4 * float64(rank) * float64(in+out) * float64(mc.Layers)
	}
	for _, t := range ts {
		have += float64(len(t.Data))
	}
	if want != have {
		return nil, fmt.Errorf("%w: rank %d on %v of this base model is %.0f bytes of tensors, the delta holds %.0f (is the delta for this base model?)", ErrShape, rank, targets, want, have)
	}
	a, err := llama.NewAdapter(mc, rank, alpha, targets)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrShape, err)
	}
	if err := llama.Fill(a.Views(), DeltaSource(ts), false); err != nil {
		return nil, fmt.Errorf("%w (is the delta for this base model, rank %d on %v?)", err, rank, targets)
	}
	return a, nil
}

// DeltaSource is a delta file's tensors as llama.Fill reads them.
func DeltaSource(ts []delta.Tensor) []llama.Stored {
	st := make([]llama.Stored, len(ts))
	for i, t := range ts {
		st[i] = llama.Stored{Name: t.Name, DType: safetensorsDType(t.DType), Shape: t.Shape, Read: llama.Bytes(t.Data)}
	}
	return st
}

// safetensorsDType names a delta dtype as safetensors does.
func safetensorsDType(d delta.DType) string {
	switch d {
	case delta.FP32:
		return "F32"
	case delta.FP16:
		return "F16"
	case delta.BF16:
		return "BF16"
	case delta.Int8:
		return "I8"
	}
	return d.String()
}

// MaxFileBytes bounds the size of a delta file of template's shape whose
// metadata entry ends at metaEnd (header included): every tensor F32
// (CheckDeclared), its entry header (name_len, name, dtype, rank, shape)
// and its data stored raw or in a frame, which for an incompressible
// tensor adds at most a few bytes per block (zstd 3 per 128 KiB, LZ4 4 per
// 64 KiB, plus the frame's header and checksum): n/256 + 256 bounds both
// with room. Then the trailer. hanzod refuses an upload announcing more
// before it reads the file (docs/orchestrator.md, "Delta upload").
func MaxFileBytes(template *llama.Adapter, metaEnd int64) int64 {
	n := metaEnd + delta.TrailerSize
	for _, v := range template.Views() {
		data := int64(4)
		for _, d := range v.Shape {
			data *= int64(d)
		}
		n += 4 + int64(len(v.Name)) + 2 + 8*int64(len(v.Shape)) + data + data/256 + 256
	}
	return n
}
