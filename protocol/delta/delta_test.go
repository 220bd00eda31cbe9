package delta

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/pierrec/lz4/v4"
)

func testKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

// sampleTensors covers every dtype, a scalar, an empty tensor and a tensor
// larger than one LZ4 block.
func sampleTensors(seed uint64) []Tensor {
	rng := rand.New(rand.NewPCG(seed, 1))
	mk := func(name string, d DType, shape ...uint64) Tensor {
		n, _ := NumBytes(d, shape)
		b := make([]byte, n)
		for i := range b {
			if i%2 == 0 || d == Int8 {
				b[i] = byte(rng.IntN(256))
			} else {
				b[i] = byte(0x3c + rng.IntN(3)) // compressible, like real exponents
			}
		}
		return Tensor{Name: name, DType: d, Shape: shape, Data: b}
	}
	return []Tensor{
		mk("lora.q_proj.A.weight", BF16, 16, 64),
		mk("lora.q_proj.B.weight", FP32, 64, 16),
		mk("lora.k_proj.A.weight", FP16, 3, 5, 7),
		mk("scale", FP32),
		mk("empty", Int8, 0, 4),
		mk("big", BF16, 1024, 700),
		mk("ünïcode/名前", Int8, 33),
	}
}

func encode(t testing.TB, ts []Tensor, opts WriteOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := Write(context.Background(), &buf, testKey(1), ts, opts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	ts := sampleTensors(1)
	meta := NewMetadata(MetadataFields{Job: "job-1", Epoch: 2, Step: 50, Node: "n1", Sequence: 7,
		BaseCheckpoint: "bafy", ClaimedLoss: 1.25, Samples: 400, Time: time.Unix(1700000000, 5).UTC()})
	for _, c := range []Compression{None, LZ4, Zstd} {
		for _, m := range []*Metadata{nil, meta} {
			t.Run(c.String(), func(t *testing.T) {
				file := encode(t, ts, WriteOptions{Compression: c, Flags: FlagLoRA, Metadata: m})
				d, err := Read(context.Background(), bytes.NewReader(file), Limits{})
				if err != nil {
					t.Fatal(err)
				}
				if len(d.Tensors) != len(ts) {
					t.Fatalf("got %d tensors, want %d", len(d.Tensors), len(ts))
				}
				for i := range ts {
					got, want := d.Tensors[i], ts[i]
					if got.Name != want.Name || got.DType != want.DType || !slices.Equal(got.Shape, want.Shape) || !bytes.Equal(got.Data, want.Data) {
						t.Fatalf("tensor %d: got %s %s %v (%d bytes), want %s %s %v", i, got.Name, got.DType, got.Shape, len(got.Data), want.Name, want.DType, want.Shape)
					}
				}
				if d.Info.Header.Compression != c || d.Info.Header.Flags != FlagLoRA || d.Info.Size != int64(len(file)) {
					t.Fatalf("header %+v size %d", d.Info.Header, d.Info.Size)
				}
				if !bytes.Equal(d.Info.PublicKey, testKey(1).Public().(ed25519.PublicKey)) {
					t.Fatal("public key")
				}
				if (m == nil) != (d.Info.Metadata == nil) {
					t.Fatalf("metadata presence: %v", d.Info.Metadata)
				}
				if m != nil {
					f, err := d.Info.Metadata.Fields()
					if err != nil {
						t.Fatal(err)
					}
					want, _ := m.Fields()
					if f != want {
						t.Fatalf("metadata %+v, want %+v", f, want)
					}
				}
				if _, err := Verify(context.Background(), bytes.NewReader(file), Limits{}); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// The output must not depend on how many goroutines compress.
func TestWriteDeterministic(t *testing.T) {
	ts := sampleTensors(2)
	for _, c := range []Compression{None, LZ4, Zstd} {
		a := encode(t, ts, WriteOptions{Compression: c, Concurrency: 1})
		for _, n := range []int{2, 3, 8} {
			if b := encode(t, ts, WriteOptions{Compression: c, Concurrency: n}); !bytes.Equal(a, b) {
				t.Fatalf("%s: output with concurrency %d differs from concurrency 1", c, n)
			}
		}
	}
}

func TestWriteRefusesBadInput(t *testing.T) {
	good := Tensor{Name: "a", DType: FP32, Shape: []uint64{2}, Data: make([]byte, 8)}
	cases := []struct {
		name string
		ts   []Tensor
		key  ed25519.PrivateKey
		want error
	}{
		{"short key", []Tensor{good}, testKey(1)[:32], ErrKey},
		{"empty name", []Tensor{{Name: "", DType: FP32, Data: make([]byte, 4)}}, nil, ErrName},
		{"bad utf8", []Tensor{{Name: "\xff", DType: FP32, Data: make([]byte, 4)}}, nil, ErrName},
		{"duplicate", []Tensor{good, good}, nil, ErrDuplicate},
		{"dtype", []Tensor{{Name: "a", DType: 9, Data: make([]byte, 1)}}, nil, ErrDType},
		{"size", []Tensor{{Name: "a", DType: FP32, Shape: []uint64{3}, Data: make([]byte, 8)}}, nil, ErrSize},
		{"overflow", []Tensor{{Name: "a", DType: FP32, Shape: []uint64{1 << 62, 8}}}, nil, ErrShape},
		{"reserved name", []Tensor{{Name: MetadataName, DType: Int8, Shape: []uint64{2}, Data: []byte("{}")}}, nil, ErrName},
	}
	for _, c := range cases {
		key := c.key
		if key == nil {
			key = testKey(1)
		}
		var buf bytes.Buffer
		_, err := Write(context.Background(), &buf, key, c.ts, WriteOptions{})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
		if buf.Len() != 0 {
			t.Errorf("%s: wrote %d bytes before failing", c.name, buf.Len())
		}
	}
}

// resign recomputes checksum and signature over a hand-modified file, so a
// test reaches the parser's rules instead of stopping at the checksum.
func resign(file []byte) []byte {
	body := file[:len(file)-TrailerSize]
	out := append([]byte(nil), body...)
	sum := sha3Sum(out[HeaderSize:])
	copy(out[8:HeaderSize], sum[:ChecksumSize])
	digest := sha3Sum(out)
	key := testKey(1)
	out = append(out, ed25519.Sign(key, digest[:])...)
	return append(out, key.Public().(ed25519.PublicKey)...)
}

// build assembles a file from raw payload bytes.
func build(c Compression, flags Flags, payload []byte) []byte {
	h := Header{Version: Version, Compression: c, Flags: flags}
	hb := h.marshal()
	file := append(hb[:], payload...)
	return resign(append(file, make([]byte, TrailerSize)...))
}

func entry(name string, d DType, shape []uint64, data []byte) []byte {
	return append(appendEntryHeader(nil, name, d, shape), data...)
}

func TestReaderRefusesBadFiles(t *testing.T) {
	valid := encode(t, sampleTensors(3), WriteOptions{Compression: LZ4})
	validNone := encode(t, sampleTensors(3)[:2], WriteOptions{Compression: None})
	mod := func(b []byte, f func([]byte)) []byte {
		c := append([]byte(nil), b...)
		f(c)
		return c
	}
	four := make([]byte, 4)
	lz := func(b []byte) []byte { c := compressor{}; f, _ := c.compress(LZ4, b); return f }
	zs := func(b []byte) []byte { c := compressor{}; f, _ := c.compress(Zstd, b); return f }
	lzNoSize := func(b []byte) []byte { // a frame without content size
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		w.Write(b)
		w.Close()
		return buf.Bytes()
	}
	cases := []struct {
		name string
		file []byte
		want error
	}{
		{"empty file", nil, io.ErrUnexpectedEOF},
		{"short header", valid[:10], io.ErrUnexpectedEOF},
		{"magic", mod(valid, func(b []byte) { b[0] = 'X' }), ErrMagic},
		{"version", mod(valid, func(b []byte) { b[5] = 2 }), ErrVersion},
		{"compression", mod(valid, func(b []byte) { b[6] = 3 }), ErrCompression},
		{"reserved flags", mod(valid, func(b []byte) { b[7] = 0x05 }), ErrFlags},
		{"checksum", mod(validNone, func(b []byte) { b[HeaderSize+100] ^= 1 }), ErrChecksum},
		{"signature", mod(valid, func(b []byte) { b[len(b)-40] ^= 1 }), ErrSignature},
		{"signature by other key", mod(valid, func(b []byte) { b[len(b)-1] ^= 1 }), ErrSignature},
		{"truncated in trailer", valid[:len(valid)-1], nil},
		{"truncated in frame", resign(valid[:len(valid)-TrailerSize-100+TrailerSize]), io.ErrUnexpectedEOF},
		{"truncated in raw data", build(None, 0, entry("a", FP32, []uint64{4}, four)), io.ErrUnexpectedEOF},
		{"dtype", build(None, 0, entry("a", 7, []uint64{1}, four)), ErrDType},
		{"empty name", build(None, 0, entry("", FP32, []uint64{1}, four)), ErrName},
		{"name not utf8", build(None, 0, entry("\xc3\x28", FP32, []uint64{1}, four)), ErrName},
		{"duplicate", build(None, 0, append(entry("a", FP32, []uint64{1}, four), entry("a", FP32, []uint64{1}, four)...)), ErrDuplicate},
		{"shape overflow", build(None, 0, entry("a", FP32, []uint64{1 << 40, 1 << 30}, nil)), ErrShape},
		{"over tensor limit", build(None, 0, entry("a", FP32, []uint64{1 << 40}, nil)), ErrLimit},
		{"rank limit", build(None, 0, entry("a", Int8, make([]uint64, 9), nil)), ErrLimit},
		{"trailing bytes", build(None, 0, append(entry("a", FP32, []uint64{1}, four), 1, 2, 3)), ErrTrailingData},
		{"entry after the last is junk", build(None, 0, append(entry("a", FP32, []uint64{1}, four), 0xff, 0xff, 0xff, 0xff, 0)), ErrLimit},
		{"lz4 decodes short", build(LZ4, 0, entry("a", Int8, []uint64{10}, lzNoSize(make([]byte, 9)))), ErrSize},
		{"lz4 decodes long", build(LZ4, 0, entry("a", Int8, []uint64{10}, lzNoSize(make([]byte, 11)))), ErrSize},
		{"lz4 bomb", build(LZ4, 0, entry("a", Int8, []uint64{10}, lzNoSize(make([]byte, 512<<10)))), ErrSize},
		{"lz4 frame far too long", build(LZ4, 0, entry("a", Int8, []uint64{10}, lzNoSize(make([]byte, 50<<20)))), ErrFrame},
		{"lz4 content size", build(LZ4, 0, entry("a", Int8, []uint64{10}, lz(make([]byte, 11)))), ErrSize},
		{"zstd content size", build(Zstd, 0, entry("a", Int8, []uint64{10}, zs(make([]byte, 11)))), ErrSize},
		{"zstd bomb", build(Zstd, 0, entry("a", Int8, []uint64{10}, zs(make([]byte, 64<<20)))), ErrSize},
		{"lz4 frame truncated", build(LZ4, 0, entry("a", Int8, []uint64{1000}, lz(make([]byte, 1000))[:12])), io.ErrUnexpectedEOF},
		{"zstd frame truncated", build(Zstd, 0, entry("a", Int8, []uint64{1000}, zs(bytes.Repeat([]byte{1, 2, 3}, 334)[:1000])[:12])), io.ErrUnexpectedEOF},
		{"zstd in lz4 file", build(LZ4, 0, entry("a", Int8, []uint64{10}, zs(make([]byte, 10)))), ErrFrame},
		{"skippable frame", build(LZ4, 0, entry("a", Int8, []uint64{0}, []byte{0x50, 0x2a, 0x4d, 0x18, 0, 0, 0, 0})), ErrFrame},
		{"two frames", build(Zstd, 0, append(entry("a", Int8, []uint64{10}, zs(make([]byte, 10))), zs(make([]byte, 10))...)), nil},
		{"metadata not int8", build(None, 0, entry(MetadataName, FP32, []uint64{1}, []byte("{}  "))), ErrMetadata},
		{"metadata not json", build(None, 0, entry(MetadataName, Int8, []uint64{3}, []byte("{x}"))), ErrMetadata},
		{"metadata wrong type", build(None, 0, entry(MetadataName, Int8, []uint64{13}, []byte(`{"epoch":"1"}`))), ErrMetadata},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := Read(context.Background(), bytes.NewReader(c.file), Limits{MaxTensorBytes: 1 << 30})
			if err == nil {
				t.Fatalf("accepted a bad file (%d tensors)", len(d.Tensors))
			}
			if d != nil {
				t.Fatal("returned tensors with an error")
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if err.Error() == "" {
				t.Fatal("empty message")
			}
		})
	}
}

func TestLimits(t *testing.T) {
	file := encode(t, sampleTensors(4), WriteOptions{Compression: Zstd})
	for _, lim := range []Limits{
		{MaxNameLen: 8},
		{MaxRank: 1},
		{MaxTensorBytes: 4096},
		{MaxTotalBytes: 10000},
		{MaxTensors: 3},
		{MaxWindowBytes: 1 << 20}, // "big" is a single-segment frame of 1.4 MB
	} {
		if _, err := Verify(context.Background(), bytes.NewReader(file), lim); !errors.Is(err, ErrLimit) {
			t.Errorf("%+v: got %v, want ErrLimit", lim, err)
		}
	}
}

func TestStreamHandsOutUnverifiedAndReportsFailure(t *testing.T) {
	file := encode(t, sampleTensors(5), WriteOptions{Compression: LZ4})
	file[len(file)-50] ^= 1 // break the signature only
	var seen int
	_, err := Stream(context.Background(), bytes.NewReader(file), Limits{}, func(u *Unverified) error {
		seen++
		return nil
	})
	if !errors.Is(err, ErrSignature) {
		t.Fatalf("got %v, want ErrSignature", err)
	}
	if seen != len(sampleTensors(5)) {
		t.Fatalf("saw %d tensors", seen)
	}
	stop := errors.New("stop")
	_, err = Stream(context.Background(), bytes.NewReader(file), Limits{}, func(u *Unverified) error { return stop })
	if err != stop {
		t.Fatalf("got %v, want the callback's error", err)
	}
}

// An I/O error from the source is returned as is, not as a format error.
func TestSourceError(t *testing.T) {
	file := encode(t, sampleTensors(6), WriteOptions{Compression: None})
	boom := errors.New("disk on fire")
	r := io.MultiReader(bytes.NewReader(file[:len(file)/2]), errReader{boom})
	if _, err := Verify(context.Background(), r, Limits{}); !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestCancel(t *testing.T) {
	file := encode(t, sampleTensors(6), WriteOptions{Compression: None})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Verify(ctx, bytes.NewReader(file), Limits{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

func TestEmptyDelta(t *testing.T) {
	file := encode(t, nil, WriteOptions{Compression: Zstd})
	if len(file) != HeaderSize+TrailerSize {
		t.Fatalf("size %d", len(file))
	}
	if _, err := Read(context.Background(), bytes.NewReader(file), Limits{}); err != nil {
		t.Fatal(err)
	}
}
