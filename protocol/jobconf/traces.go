package jobconf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"

	"github.com/zooai/gym/artifact"
	"github.com/zooai/gym/protocol/delta"
	"github.com/zooai/gym/protocol/trace"
)

// KeyTraces is the metadata key of the CID of a delta's rollout traces (a
// JSON string): the trace bundle of its sync (package trace, a set per
// local step), which the worker sends with the delta. Signed with the
// delta, it binds the update to the samples it claims to come from: a
// checker recomputes the rewards, the sampled tokens' log-probabilities
// and the update from them (tracecheck.CheckSync).
const KeyTraces = "traces"

// MaxTraceBytes bounds a trace bundle, uncompressed.
const MaxTraceBytes = 64 << 20

// ErrTraces reports a trace bundle that does not match its delta or does
// not read.
var ErrTraces = errors.New("jobconf: bad traces")

// TracesOf is the trace bundle CID a delta's metadata names ("" when it
// names none).
func TracesOf(m *delta.Metadata) (string, error) {
	raw, ok := m.Get(KeyTraces)
	if !ok {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || s == "" {
		return "", fmt.Errorf("%w: delta metadata %s is %s, want a CID", ErrTraces, KeyTraces, raw)
	}
	return s, nil
}

// Traces is a sync's trace bundle ready to send: the bundle's bytes, its
// CID (a UnixFS file, as `gym artifact publish` names one file) and the
// zstd-compressed form the worker sends.
type Traces struct {
	Bundle     []byte
	CID        string
	Compressed []byte
}

// EncodeTraces writes sets (a sync's, one per local step) as a bundle.
func EncodeTraces(ctx context.Context, sets []*trace.Set) (Traces, error) {
	var b bytes.Buffer
	if err := trace.WriteBundle(&b, sets); err != nil {
		return Traces{}, err
	}
	if b.Len() > MaxTraceBytes {
		return Traces{}, fmt.Errorf("%w: the bundle is %d bytes, at most %d", ErrTraces, b.Len(), MaxTraceBytes)
	}
	c, err := TracesCID(ctx, b.Bytes())
	if err != nil {
		return Traces{}, err
	}
	z, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		return Traces{}, err
	}
	defer z.Close()
	return Traces{Bundle: b.Bytes(), CID: c, Compressed: z.EncodeAll(b.Bytes(), nil)}, nil
}

// TracesCID is the CID of a bundle's bytes.
func TracesCID(ctx context.Context, bundle []byte) (string, error) {
	c, _, err := artifact.ImportReader(ctx, artifact.NewMemBlocks(), bytes.NewReader(bundle))
	if err != nil {
		return "", err
	}
	return c.String(), nil
}

// DecodeTraces decompresses what a worker sent (at most MaxTraceBytes),
// checks it is the bundle named want and reads it strictly.
func DecodeTraces(ctx context.Context, compressed []byte, want string) ([]byte, []*trace.Set, error) {
	z, err := zstd.NewReader(bytes.NewReader(compressed), zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxMemory(MaxTraceBytes+1))
	if err != nil {
		return nil, nil, err
	}
	defer z.Close()
	bundle, err := io.ReadAll(io.LimitReader(z, MaxTraceBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrTraces, err)
	}
	if len(bundle) > MaxTraceBytes {
		return nil, nil, fmt.Errorf("%w: more than %d bytes uncompressed", ErrTraces, MaxTraceBytes)
	}
	got, err := TracesCID(ctx, bundle)
	if err != nil {
		return nil, nil, err
	}
	if got != want {
		return nil, nil, fmt.Errorf("%w: the traces sent are %s, the delta names %s", ErrTraces, got, want)
	}
	sets, err := trace.ReadBundle(bytes.NewReader(bundle), trace.DefaultLimits())
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrTraces, err)
	}
	return bundle, sets, nil
}

// ReadTraces reads a stored bundle back, checking its CID again (the disk
// is not trusted more than the network).
func ReadTraces(ctx context.Context, bundle []byte, want string) ([]*trace.Set, error) {
	got, err := TracesCID(ctx, bundle)
	if err != nil {
		return nil, err
	}
	if got != want {
		return nil, fmt.Errorf("%w: the stored traces are %s, the delta names %s", ErrTraces, got, want)
	}
	sets, err := trace.ReadBundle(bytes.NewReader(bundle), trace.DefaultLimits())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTraces, err)
	}
	return sets, nil
}
