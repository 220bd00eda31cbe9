package delta

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// bomb is a small signed file whose one tensor declares n zero bytes: a
// Zstandard frame of zeros compresses to almost nothing.
func bomb(t testing.TB, n int) []byte {
	t.Helper()
	ts := []Tensor{{Name: "w", DType: FP32, Shape: []uint64{uint64(n / 4)}, Data: make([]byte, n)}}
	meta := NewMetadata(MetadataFields{Job: "j", Epoch: 1, Step: 1, Node: "n", Sequence: 1})
	return encode(t, ts, WriteOptions{Compression: Zstd, Metadata: meta})
}

// TestInspectBomb: Inspect verifies a decompression bomb (60 MiB of zeros
// in a few KiB) without decompressing it — in far less time and memory
// than Verify needs — and reports the declared shape; decoding the tensor
// is left to Tensor.
func TestInspectBomb(t *testing.T) {
	const n = 60 << 20
	file := bomb(t, n)
	if len(file) > 8<<10 {
		t.Fatalf("bomb is %d bytes, want a few KiB", len(file))
	}
	ctx := context.Background()
	lim := Limits{MaxTotalBytes: 64 << 20}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	t0 := time.Now()
	f, err := Inspect(ctx, bytes.NewReader(file), int64(len(file)), lim)
	inspect := time.Since(t0)
	runtime.ReadMemStats(&m1)
	if err != nil {
		t.Fatal(err)
	}
	if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 4<<20 {
		t.Errorf("Inspect allocated %d bytes for a %d-byte file", alloc, len(file))
	}
	t0 = time.Now()
	if _, err := Verify(ctx, bytes.NewReader(file), lim); err != nil {
		t.Fatal(err)
	}
	verify := time.Since(t0)
	t.Logf("%d-byte file declaring %d bytes: Inspect %v, Verify (decompressing) %v", len(file), n, inspect, verify)
	// That Inspect does not decompress is the allocation bound above (a
	// 60 MiB tensor cannot be decompressed in 4 MiB); the times are logged
	// only: a ratio of wall times fails when the cores are shared.
	var es []Entry
	for _, e := range f.Info().Entries {
		if e.Name != MetadataName {
			es = append(es, e)
		}
	}
	if len(es) != 1 || es[0].NumBytes() != n {
		t.Fatalf("entries %+v, want one of %d bytes", es, n)
	}
	if f.Info().Metadata == nil {
		t.Fatal("metadata not read")
	}
	tn, err := f.Tensor("w")
	if err != nil || len(tn.Data) != n {
		t.Fatalf("Tensor: %d bytes, %v", len(tn.Data), err)
	}
}

// TestInspectRefuses: Inspect checks what Verify checks short of decoding
// (signature, checksum, structure, limits on the declared sizes); the fuzz
// targets check that what only decoding finds is found by Tensor.
func TestInspectRefuses(t *testing.T) {
	ctx := context.Background()
	file := bomb(t, 1<<20)
	bad := bytes.Clone(file)
	bad[len(bad)-TrailerSize-1] ^= 1
	if _, err := Inspect(ctx, bytes.NewReader(bad), int64(len(bad)), Limits{}); !errors.Is(err, ErrChecksum) && !errors.Is(err, ErrSignature) && !errors.Is(err, ErrFrame) {
		t.Fatalf("flipped payload byte: %v", err)
	}
	sig := bytes.Clone(file)
	sig[len(sig)-TrailerSize] ^= 1
	if _, err := Inspect(ctx, bytes.NewReader(sig), int64(len(sig)), Limits{}); !errors.Is(err, ErrSignature) {
		t.Fatalf("flipped signature byte: %v, want ErrSignature", err)
	}
	if _, err := Inspect(ctx, bytes.NewReader(file), int64(len(file)), Limits{MaxTotalBytes: 1 << 19}); !errors.Is(err, ErrLimit) {
		t.Fatalf("declared size above the limit: %v, want ErrLimit", err)
	}
	h, key, err := PeekSigner(bytes.NewReader(file), int64(len(file)))
	if err != nil || h.Compression != Zstd || !bytes.Equal(key, file[len(file)-PublicKeySize:]) {
		t.Fatalf("PeekSigner: %v %v %x", h, err, key)
	}
	if _, _, err := PeekSigner(bytes.NewReader(file[:50]), 50); !errors.Is(err, ErrTruncated) {
		t.Fatalf("PeekSigner of 50 bytes: %v, want ErrTruncated", err)
	}
	if _, _, err := PeekSigner(bytes.NewReader([]byte("NOTADELTA")), 9); !errors.Is(err, ErrMagic) {
		t.Fatalf("PeekSigner of junk: %v, want ErrMagic", err)
	}
}
