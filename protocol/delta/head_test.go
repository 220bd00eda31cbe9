package delta

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"testing"
)

func headFile(t *testing.T, meta bool) []byte {
	t.Helper()
	_, key, _ := ed25519.GenerateKey(bytes.NewReader(make([]byte, 64)))
	var buf bytes.Buffer
	opts := WriteOptions{Compression: Zstd, Flags: FlagLoRA}
	if meta {
		opts.Metadata = NewMetadata(MetadataFields{Job: "j1", Epoch: 2})
	}
	data := make([]byte, 256*256*4)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if _, err := Write(context.Background(), &buf, key, []Tensor{{Name: "a", DType: FP32, Shape: []uint64{256, 256}, Data: data}}, opts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadHead(t *testing.T) {
	ctx := context.Background()
	file := headFile(t, true)
	meta := 0
	if info, err := Inspect(ctx, bytes.NewReader(file), int64(len(file)), DefaultLimits()); err != nil {
		t.Fatal(err)
	} else {
		meta = int(info.Info().Entries[1].Offset)
	}
	// The whole file, a head that ends right after the metadata, and one
	// a little past it all give the metadata.
	for _, n := range []int{len(file), meta, meta + 3} {
		info, err := ReadHead(ctx, file[:n], DefaultLimits())
		if err != nil {
			t.Fatalf("head of %d bytes: %v", n, err)
		}
		if got, _ := info.Metadata.Get("job"); string(got) != `"j1"` {
			t.Fatalf("head of %d bytes: job %s", n, got)
		}
	}
	// Cut inside the metadata: truncated.
	if _, err := ReadHead(ctx, file[:meta-1], DefaultLimits()); !errors.Is(err, ErrTruncated) {
		t.Fatalf("cut metadata: %v", err)
	}
	// No metadata first: refused by name.
	bare := headFile(t, false)
	if _, err := ReadHead(ctx, bare[:100], DefaultLimits()); !errors.Is(err, ErrNoHeadMetadata) {
		t.Fatalf("no metadata: %v", err)
	}
	// Not a delta.
	if _, err := ReadHead(ctx, []byte("GIF89a and so on and on and on and on"), DefaultLimits()); !errors.Is(err, ErrMagic) {
		t.Fatalf("not a delta: %v", err)
	}
	// A metadata entry above the limit is refused from its header.
	lim := DefaultLimits()
	lim.MaxMetadataBytes = 4
	if _, err := ReadHead(ctx, file[:meta], lim); err == nil {
		t.Fatal("metadata above the limit accepted")
	}
}

func FuzzReadHead(f *testing.F) {
	f.Add(headFile(&testing.T{}, true)[:200])
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := ReadHead(context.Background(), b, Limits{MaxMetadataBytes: 64 << 10})
		if err == nil && info.Metadata == nil {
			t.Fatal("no error and no metadata")
		}
	})
}
