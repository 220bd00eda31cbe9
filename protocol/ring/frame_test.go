package ring

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func sampleHeader() Header {
	return Header{Wire: FP32, Phase: AllGather, Round: 2, Chunk: 3, Segment: 4, Sender: 1, Receiver: 2,
		Count: 3, Epoch: 9, Step: 11, Seq: 13, Total: 100, Offset: 40, ConfigID: ID{1, 2, 3}, Hash: [32]byte{4}}
}

func TestFrameRoundTrip(t *testing.T) {
	h := sampleHeader()
	payload := []byte{0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64}
	f := EncodeFrame(h, payload)
	g, p, err := DecodeFrame(f, 1<<20)
	if err != nil || g != h || !bytes.Equal(p, payload) {
		t.Fatalf("%v %+v %v", err, g, p)
	}
}

func TestDecodeFrameRejects(t *testing.T) {
	h := sampleHeader()
	good := EncodeFrame(h, make([]byte, 12))
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for name, tc := range map[string]struct {
		b    []byte
		want error
	}{
		"short":         {good[:HeaderSize-1], io.ErrUnexpectedEOF},
		"over cap":      {append(bytes.Clone(good), make([]byte, 1<<10)...), ErrFrameTooLarge},
		"length prefix": {mut(func(b []byte) []byte { b[0]++; return b }), ErrFrame},
		"version 1":     {mut(func(b []byte) []byte { b[4] = 1; return b }), ErrFrame}, // SHA-256 payload hashes
		"version 3":     {mut(func(b []byte) []byte { b[4] = 3; return b }), ErrFrame},
		"kind":          {mut(func(b []byte) []byte { b[5] = 9; return b }), ErrFrame},
		"wire":          {mut(func(b []byte) []byte { b[6] = 7; return b }), ErrFrame},
		"phase":         {mut(func(b []byte) []byte { b[7] = 4; return b }), ErrFrame},
		"count":         {mut(func(b []byte) []byte { b[28] = 4; return b }), ErrFrame},
		"offset":        {mut(func(b []byte) []byte { b[64] = 99; return b }), ErrFrame},
	} {
		if _, _, err := DecodeFrame(tc.b, HeaderSize+64); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}

func TestSignedBytesBindTheJob(t *testing.T) {
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	f := EncodeFrame(sampleHeader(), make([]byte, 12))
	sig := ed25519.Sign(key, SignedBytes("job-a", f))
	pub := key.Public().(ed25519.PublicKey)
	if !ed25519.Verify(pub, SignedBytes("job-a", f), sig) || ed25519.Verify(pub, SignedBytes("job-b", f), sig) {
		t.Fatal("signature must verify for its job only")
	}
	g := bytes.Clone(f)
	g[8]++ // round
	if ed25519.Verify(pub, SignedBytes("job-a", g), sig) {
		t.Fatal("signature must cover the round")
	}
}

// FuzzDecodeFrame checks that the decoder never panics, accepts only what
// re-encodes to the same bytes, and never reports a payload outside b.
// Seeds: testdata/frames/*.bin (valid and broken frames), and crashers
// found later stay in testdata/fuzz/FuzzDecodeFrame.
func FuzzDecodeFrame(f *testing.F) {
	files, _ := filepath.Glob("testdata/frames/*.bin")
	if len(files) == 0 {
		f.Fatal("no seed frames in testdata/frames")
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, p, err := DecodeFrame(b, HeaderSize+4096)
		if err != nil {
			return
		}
		if len(p) != int(h.Count)*h.Wire.Size() {
			t.Fatalf("payload %d bytes for count %d", len(p), h.Count)
		}
		if !bytes.Equal(EncodeFrame(h, p), b) {
			t.Fatal("accepted frame does not re-encode to the same bytes")
		}
	})
}

// TestWriteSeedFrames regenerates testdata/frames when GYM_WRITE_SEEDS=1.
func TestWriteSeedFrames(t *testing.T) {
	if os.Getenv("GYM_WRITE_SEEDS") != "1" {
		t.Skip("set GYM_WRITE_SEEDS=1 to regenerate testdata/frames")
	}
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	h := sampleHeader()
	f := EncodeFrame(h, []byte{0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64})
	copy(h.Sig[:], ed25519.Sign(key, SignedBytes("job", f)))
	bf := h
	bf.Wire, bf.Count, bf.Phase = BF16, 2, ScatterReduce
	seeds := map[string][]byte{
		"fp32-signed.bin": EncodeFrame(h, []byte{0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64}),
		"bf16.bin":        EncodeFrame(bf, []byte{128, 63, 0, 64}),
		"empty.bin":       EncodeFrame(Header{Total: 5, Offset: 5}, nil),
		"truncated.bin":   f[:HeaderSize-3],
		"bad-length.bin":  append(bytes.Clone(f), 0),
	}
	os.MkdirAll("testdata/frames", 0o755)
	for name, b := range seeds {
		if err := os.WriteFile(filepath.Join("testdata/frames", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
