package delta

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"math/big"
	"testing"
)

// identityKey is the encoding of the neutral point: a public key of small
// order under which R = identity, S = 0 verifies for every message.
var identityKey = mustHex("0100000000000000000000000000000000000000000000000000000000000000")

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// forge returns a well-formed file with the given trailer in place of a
// signature (checksum correct, signature whatever sig is).
func forge(payload, sig, key []byte) []byte {
	h := Header{Version: Version, Compression: None}
	sum := sha3Sum(payload)
	copy(h.Checksum[:], sum[:ChecksumSize])
	hb := h.marshal()
	file := append(hb[:], payload...)
	file = append(file, sig...)
	return append(file, key...)
}

// ForgedFile writes the forgery crypto/ed25519 alone accepts: content
// nobody signed, under the identity key, with R = identity and S = 0.
func forgedFile() []byte {
	sig := append(bytes.Clone(identityKey), make([]byte, 32)...)
	return forge(entry("lora.A", FP32, []uint64{2}, make([]byte, 8)), sig, identityKey)
}

func TestForgedSmallOrderFileRefused(t *testing.T) {
	file := forgedFile()
	info, err := Verify(context.Background(), bytes.NewReader(file), Limits{})
	if err == nil {
		t.Fatalf("a file nobody signed verified under key %x", []byte(info.PublicKey))
	}
	if !errors.Is(err, ErrKey) {
		t.Fatalf("got %v, want ErrKey", err)
	}
	// Every small-order key is refused before any signature check.
	for _, k := range []string{
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"0000000000000000000000000000000000000000000000000000000000000000",
		"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
		"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
		"0100000000000000000000000000000000000000000000000000000000000080", // identity, non-canonical
	} {
		f := forge(entry("a", Int8, []uint64{1}, []byte{1}), append(bytes.Clone(identityKey), make([]byte, 32)...), mustHex(k))
		if _, err := Verify(context.Background(), bytes.NewReader(f), Limits{}); !errors.Is(err, ErrKey) {
			t.Errorf("key %s: got %v, want ErrKey", k, err)
		}
	}
}

// S + L is the same signature in its malleable, non-canonical form.
func TestNonCanonicalSignatureRefused(t *testing.T) {
	file := encode(t, sampleTensors(5)[:2], WriteOptions{Compression: LZ4})
	sigAt := len(file) - TrailerSize
	s := new(big.Int).SetBytes(reversed(file[sigAt+32 : sigAt+64]))
	s.Add(s, new(big.Int).SetBytes(reversed(mustHex("edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010"))))
	bad := bytes.Clone(file)
	sb := s.Bytes()
	clear(bad[sigAt+32 : sigAt+64])
	for i, c := range sb {
		bad[sigAt+32+len(sb)-1-i] = c
	}
	_, err := Verify(context.Background(), bytes.NewReader(bad), Limits{})
	if !errors.Is(err, ErrSignature) {
		t.Fatalf("S+L: got %v, want ErrSignature", err)
	}
	if _, err := Verify(context.Background(), bytes.NewReader(file), Limits{}); err != nil {
		t.Fatal(err)
	}
}

func reversed(b []byte) []byte {
	r := make([]byte, len(b))
	for i, c := range b {
		r[len(b)-1-i] = c
	}
	return r
}

var badNames = []string{
	"../../etc/passwd", "/abs", "a\x00b", "a\nb", "\x1b[2J", "tab\there", "del\x7f", "c1\u0085",
	"a/../b", "..", "a/..", "\\abs", "a\\..\\b", "x//..//y",
}

var goodNames = []string{"a..b", "model.layers.0.self_attn.q_proj.lora_A.weight", "a/b", "./a", "...", "ünïcode/名前", "a b"}

func TestNamesRefused(t *testing.T) {
	four := make([]byte, 4)
	for _, name := range badNames {
		file := build(None, 0, entry(name, FP32, []uint64{1}, four))
		if _, err := Read(context.Background(), bytes.NewReader(file), Limits{}); !errors.Is(err, ErrName) {
			t.Errorf("reader, name %q: got %v, want ErrName", name, err)
		}
		var buf bytes.Buffer
		_, err := Write(context.Background(), &buf, testKey(1), []Tensor{{Name: name, DType: FP32, Shape: []uint64{1}, Data: four}}, WriteOptions{})
		if !errors.Is(err, ErrName) || buf.Len() != 0 {
			t.Errorf("writer, name %q: got %v (%d bytes written), want ErrName", name, err, buf.Len())
		}
	}
	for _, name := range goodNames {
		file := encode(t, []Tensor{{Name: name, DType: FP32, Shape: []uint64{1}, Data: four}}, WriteOptions{})
		if _, err := Read(context.Background(), bytes.NewReader(file), Limits{}); err != nil {
			t.Errorf("name %q: %v", name, err)
		}
	}
}

// An empty tensor cannot carry dimensions no tensor could have.
func TestEveryDimensionBounded(t *testing.T) {
	const max64 = 1<<64 - 1
	cases := []struct {
		shape []uint64
		want  error
	}{
		{[]uint64{0, max64, max64}, ErrShape}, // the product of the rest overflows
		{[]uint64{max64 / 8, 0}, ErrLimit},    // one huge dimension
		{[]uint64{0, 1 << 31}, ErrLimit},      // 8 GiB of fp32 if it were not empty
	}
	for _, c := range cases {
		file := build(None, 0, entry("a", FP32, c.shape, nil))
		if _, err := Read(context.Background(), bytes.NewReader(file), Limits{}); !errors.Is(err, c.want) {
			t.Errorf("reader, shape %v: got %v, want %v", c.shape, err, c.want)
		}
		var buf bytes.Buffer
		if _, err := Write(context.Background(), &buf, testKey(1), []Tensor{{Name: "a", DType: FP32, Shape: c.shape}}, WriteOptions{}); !errors.Is(err, ErrShape) {
			t.Errorf("writer, shape %v: got %v, want ErrShape", c.shape, err)
		}
	}
	// Empty tensors with plausible dimensions still read.
	ok := encode(t, []Tensor{{Name: "e", DType: BF16, Shape: []uint64{0, 4096, 128}}}, WriteOptions{Compression: Zstd})
	if _, err := Read(context.Background(), bytes.NewReader(ok), Limits{}); err != nil {
		t.Fatal(err)
	}
}
