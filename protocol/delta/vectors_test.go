package delta

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"filippo.io/edwards25519"
	"github.com/pierrec/lz4/v4"

	"github.com/zooai/gym/keys/edkey"
)

// The shared test vectors: testdata/vectors holds valid files written by
// this package (go-*.delta) and by the Python package gym_protocol
// (py-*.delta, written by python/tests/test_delta_vectors.py with
// GYM_UPDATE_VECTORS=1), and hostile files, each with one defect and a
// valid checksum and signature, with the sentinel a reader must answer.
// manifest.json says what each file holds. This test and the pytest read
// every file with their own reader and must agree.
var updateVectors = flag.Bool("update-vectors", false, "rewrite testdata/vectors (the Go-written and hostile files and manifest.json)")

const vectorsDir = "testdata/vectors"

type vectorTensor struct {
	Name   string   `json:"name"`
	DType  string   `json:"dtype"`
	Shape  []uint64 `json:"shape"`
	SHA256 string   `json:"sha256"`
}

type vectorFile struct {
	File        string `json:"file"`
	Writer      string `json:"writer,omitempty"`
	Compression string `json:"compression,omitempty"`
	Flags       int    `json:"flags,omitempty"`
	Error       string `json:"error,omitempty"` // Go sentinel name (ErrMagic, …)
	What        string `json:"what,omitempty"`
}

type vectorManifest struct {
	SeedHex  string          `json:"seed_hex"`
	Pubkey   string          `json:"pubkey"`
	Metadata json.RawMessage `json:"metadata"`
	Tensors  []vectorTensor  `json:"tensors"`
	Valid    []vectorFile    `json:"valid"`
	Invalid  []vectorFile    `json:"invalid"`
	// Keys are trailer keys with edkey's verdict: real keys, keys with a
	// torsion component (usable), small-order, non-canonical and off-curve
	// encodings, random bytes.
	Keys []vectorKey `json:"keys"`
}

type vectorKey struct {
	Hex   string `json:"hex"`
	Valid bool   `json:"valid"`
}

func vectorKeys() []vectorKey {
	rng := rand.New(rand.NewPCG(5, 5))
	var ks [][]byte
	for i := range 8 {
		ks = append(ks, testKey(byte(10+i)).Public().(ed25519.PublicKey))
	}
	small := []string{
		"0100000000000000000000000000000000000000000000000000000000000000",
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"0000000000000000000000000000000000000000000000000000000000000000",
		"0000000000000000000000000000000000000000000000000000000000000080",
		"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
		"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
		"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
		"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
		"0100000000000000000000000000000000000000000000000000000000000080", // identity with the sign bit
		"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // y = p + 1 ≥ p
		"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // y = p
	}
	for _, h := range small {
		ks = append(ks, mustHex(h))
	}
	// A real key plus each point of small order: mixed order, usable.
	for _, h := range small[2:8] {
		t, err := new(edwards25519.Point).SetBytes(mustHex(h))
		if err != nil {
			panic(err)
		}
		a, _ := new(edwards25519.Point).SetBytes(testKey(20).Public().(ed25519.PublicKey))
		ks = append(ks, new(edwards25519.Point).Add(a, t).Bytes())
	}
	for range 64 {
		b := make([]byte, 32)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		ks = append(ks, b)
	}
	var out []vectorKey
	for _, k := range ks {
		out = append(out, vectorKey{Hex: hex.EncodeToString(k), Valid: edkey.CheckPublicKey(k) == nil})
	}
	return out
}

var sentinelNames = map[string]error{
	"ErrMagic": ErrMagic, "ErrVersion": ErrVersion, "ErrCompression": ErrCompression, "ErrFlags": ErrFlags,
	"ErrDType": ErrDType, "ErrName": ErrName, "ErrDuplicate": ErrDuplicate, "ErrShape": ErrShape,
	"ErrLimit": ErrLimit, "ErrFrame": ErrFrame, "ErrSize": ErrSize, "ErrTrailingData": ErrTrailingData,
	"ErrTruncated": ErrTruncated, "ErrChecksum": ErrChecksum, "ErrSignature": ErrSignature, "ErrKey": ErrKey,
	"ErrMetadata": ErrMetadata,
}

// vectorTensors: every dtype, a scalar, an empty tensor, PEFT and non-ASCII
// names, and one tensor of 40 KB; small enough to commit six files of.
func vectorTensors() []Tensor {
	ts := sampleTensors(3)
	ts[5] = Tensor{Name: "base_model.model.model.layers.0.mlp.down_proj.lora_B.weight", DType: FP16, Shape: []uint64{20000}, Data: ts[5].Data[:40000]}
	return ts
}

func vectorMetadata() *Metadata {
	return NewMetadata(MetadataFields{
		Job: "job-00000001", Epoch: 2, Step: 15, Node: hex.EncodeToString(testKey(1).Public().(ed25519.PublicKey)),
		Sequence: 7, BaseCheckpoint: "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi",
		ClaimedLoss: 0.5, Samples: 64, Time: time.Date(2026, 12, 2, 1, 2, 3, 456000000, time.UTC),
	})
}

// hostileVectors are the refusals both readers must agree on.
func hostileVectors(t *testing.T) []struct {
	name, what string
	file       []byte
	want       string
} {
	valid := encode(t, sampleTensors(3)[:3], WriteOptions{Compression: LZ4, Metadata: vectorMetadata()})
	validNone := encode(t, sampleTensors(3)[:2], WriteOptions{Compression: None})
	mod := func(b []byte, f func([]byte)) []byte {
		c := bytes.Clone(b)
		f(c)
		return c
	}
	four := make([]byte, 4)
	lz := func(b []byte) []byte { c := compressor{}; f, _ := c.compress(LZ4, b); return f }
	zs := func(b []byte) []byte { c := compressor{}; f, _ := c.compress(Zstd, b); return f }
	lzNoSize := func(b []byte) []byte {
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		w.Write(b)
		w.Close()
		return buf.Bytes()
	}
	// S + L: the malleable form of a valid signature.
	sigAt := len(validNone) - TrailerSize
	s := new(big.Int).SetBytes(reversed(validNone[sigAt+32 : sigAt+64]))
	s.Add(s, new(big.Int).SetBytes(reversed(mustHex("edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010"))))
	malleable := bytes.Clone(validNone)
	clear(malleable[sigAt+32 : sigAt+64])
	for i, c := range s.Bytes() {
		malleable[sigAt+32+len(s.Bytes())-1-i] = c
	}
	// A Zstandard frame whose window exceeds what its size justifies.
	bigWindow := zs(make([]byte, 10))
	bigWindow = append([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x70}, bigWindow[6:]...) // FHD 0: window descriptor 0x70 = 16 MiB, no content size
	return []struct {
		name, what string
		file       []byte
		want       string
	}{
		{"empty", "an empty file", nil, "ErrTruncated"},
		{"short", "10 bytes of a valid file", valid[:10], "ErrTruncated"},
		{"magic", "magic XELTA", mod(valid, func(b []byte) { b[0] = 'X' }), "ErrMagic"},
		{"version", "version 2", mod(valid, func(b []byte) { b[5] = 2 }), "ErrVersion"},
		{"compression", "compression 3", mod(valid, func(b []byte) { b[6] = 3 }), "ErrCompression"},
		{"flags", "reserved flag bit 2", mod(valid, func(b []byte) { b[7] = 0x05 }), "ErrFlags"},
		{"checksum", "a payload byte flipped", mod(validNone, func(b []byte) { b[HeaderSize+100] ^= 1 }), "ErrChecksum"},
		{"signature", "a signature byte flipped", mod(valid, func(b []byte) { b[len(b)-40] ^= 1 }), "ErrSignature"},
		{"other-key", "a trailer key byte flipped", mod(valid, func(b []byte) { b[len(b)-1] ^= 1 }), "ErrSignature"},
		{"identity-key", "content nobody signed under the identity key (R = identity, S = 0)", forgedFile(), "ErrKey"},
		{"malleable", "the signature's S + L", malleable, "ErrSignature"},
		{"truncated-frame", "the last LZ4 frame cut short", resign(valid[:len(valid)-100]), "ErrTruncated"},
		{"truncated-raw", "raw data shorter than the shape", build(None, 0, entry("a", FP32, []uint64{4}, four)), "ErrTruncated"},
		{"dtype", "dtype 7", build(None, 0, entry("a", 7, []uint64{1}, four)), "ErrDType"},
		{"empty-name", "a name of 0 bytes", build(None, 0, entry("", FP32, []uint64{1}, four)), "ErrName"},
		{"name-utf8", "a name that is not UTF-8", build(None, 0, entry("\xc3\x28", FP32, []uint64{1}, four)), "ErrName"},
		{"name-dotdot", "the name ../../etc/passwd", build(None, 0, entry("../../etc/passwd", FP32, []uint64{1}, four)), "ErrName"},
		{"name-control", "a name with an escape sequence", build(None, 0, entry("a\x1b[2J", FP32, []uint64{1}, four)), "ErrName"},
		{"name-c1", "a name with a C1 control", build(None, 0, entry("a\u0085b", FP32, []uint64{1}, four)), "ErrName"},
		{"name-long", "a name of 2000 bytes", build(None, 0, entry(string(bytes.Repeat([]byte{'a'}, 2000)), FP32, []uint64{1}, four)), "ErrLimit"},
		{"duplicate", "a name twice", build(None, 0, append(entry("a", FP32, []uint64{1}, four), entry("a", FP32, []uint64{1}, four)...)), "ErrDuplicate"},
		{"shape-overflow", "a shape of 2^70 bytes", build(None, 0, entry("a", FP32, []uint64{1 << 40, 1 << 30}, nil)), "ErrShape"},
		{"empty-overflow", "an empty tensor [0, 2^64-1, 2^64-1]", build(None, 0, entry("a", FP32, []uint64{0, 1<<64 - 1, 1<<64 - 1}, nil)), "ErrShape"},
		{"empty-extent", "an empty tensor [0, 2^40]", build(None, 0, entry("a", FP32, []uint64{0, 1 << 40}, nil)), "ErrLimit"},
		{"tensor-limit", "a tensor of 4 TiB", build(None, 0, entry("a", FP32, []uint64{1 << 40}, nil)), "ErrLimit"},
		{"rank", "rank 9", build(None, 0, entry("a", Int8, make([]uint64, 9), nil)), "ErrLimit"},
		{"trailing", "3 bytes after the last entry", build(None, 0, append(entry("a", FP32, []uint64{1}, four), 1, 2, 3)), "ErrTrailingData"},
		{"junk-entry", "a junk entry after the last", build(None, 0, append(entry("a", FP32, []uint64{1}, four), 0xff, 0xff, 0xff, 0xff, 0)), "ErrLimit"},
		{"lz4-short", "an LZ4 frame that decodes to 9 of 10 bytes", build(LZ4, 0, entry("a", Int8, []uint64{10}, lzNoSize(make([]byte, 9)))), "ErrSize"},
		{"lz4-long", "an LZ4 frame that decodes to 11 of 10 bytes", build(LZ4, 0, entry("a", Int8, []uint64{10}, lzNoSize(make([]byte, 11)))), "ErrSize"},
		{"lz4-bomb", "an LZ4 frame of 512 KiB of zeros for 10 bytes", build(LZ4, 0, entry("a", Int8, []uint64{10}, lzNoSize(make([]byte, 512<<10)))), "ErrSize"},
		{"lz4-size", "an LZ4 frame declaring 11 bytes for 10", build(LZ4, 0, entry("a", Int8, []uint64{10}, lz(make([]byte, 11)))), "ErrSize"},
		{"lz4-truncated", "an LZ4 frame cut after 12 bytes", build(LZ4, 0, entry("a", Int8, []uint64{1000}, lz(make([]byte, 1000))[:12])), "ErrTruncated"},
		{"lz4-offset", "an LZ4 match reaching before the start of the output", build(LZ4, 0, entry("a", Int8, []uint64{1000}, func() []byte {
			f := lz(bytes.Repeat([]byte("abcdefgh"), 125))
			// header (15) · block size (4) · token · 8 literals · offset: 8 → 9
			if f[19] != 0x8f || f[28] != 8 {
				panic("unexpected LZ4 block layout")
			}
			f[28] = 9
			return f
		}())), "ErrFrame"},
		{"zstd-size", "a Zstandard frame declaring 11 bytes for 10", build(Zstd, 0, entry("a", Int8, []uint64{10}, zs(make([]byte, 11)))), "ErrSize"},
		{"zstd-bomb", "a Zstandard frame of 64 MiB of zeros for 10 bytes", build(Zstd, 0, entry("a", Int8, []uint64{10}, zs(make([]byte, 64<<20)))), "ErrSize"},
		{"zstd-window", "a Zstandard frame with a 64 MiB window for 10 bytes", build(Zstd, 0, entry("a", Int8, []uint64{10}, bigWindow)), "ErrFrame"},
		{"zstd-truncated", "a Zstandard frame cut after 12 bytes", build(Zstd, 0, entry("a", Int8, []uint64{1000}, zs(bytes.Repeat([]byte{1, 2, 3}, 334)[:1000])[:12])), "ErrTruncated"},
		{"zstd-in-lz4", "a Zstandard frame in an LZ4 file", build(LZ4, 0, entry("a", Int8, []uint64{10}, zs(make([]byte, 10)))), "ErrFrame"},
		{"skippable", "a skippable frame", build(LZ4, 0, entry("a", Int8, []uint64{0}, []byte{0x50, 0x2a, 0x4d, 0x18, 0, 0, 0, 0})), "ErrFrame"},
		{"two-frames", "two Zstandard frames for one tensor", build(Zstd, 0, append(entry("a", Int8, []uint64{10}, zs(make([]byte, 10))), zs(make([]byte, 10))...)), "ErrLimit"},
		{"metadata-dtype", "__metadata__ as fp32", build(None, 0, entry(MetadataName, FP32, []uint64{1}, []byte("{}  "))), "ErrMetadata"},
		{"metadata-json", "__metadata__ that is not JSON", build(None, 0, entry(MetadataName, Int8, []uint64{3}, []byte("{x}"))), "ErrMetadata"},
		{"metadata-array", "__metadata__ that is a JSON array", build(None, 0, entry(MetadataName, Int8, []uint64{2}, []byte("[]"))), "ErrMetadata"},
		{"metadata-type", `__metadata__ with "epoch":"1"`, build(None, 0, entry(MetadataName, Int8, []uint64{13}, []byte(`{"epoch":"1"}`))), "ErrMetadata"},
		{"metadata-negative", `__metadata__ with "step":-1`, build(None, 0, entry(MetadataName, Int8, []uint64{11}, []byte(`{"step":-1}`))), "ErrMetadata"},
		{"metadata-nan", `__metadata__ with "claimed_loss":NaN`, build(None, 0, entry(MetadataName, Int8, []uint64{20}, []byte(`{"claimed_loss":NaN}`))), "ErrMetadata"},
		{"metadata-time", `__metadata__ with a time that is not RFC 3339`, build(None, 0, entry(MetadataName, Int8, []uint64{19}, []byte(`{"time":"yesterday"}`))), "ErrMetadata"},
	}
}

func TestVectors(t *testing.T) {
	if *updateVectors {
		writeVectors(t)
	}
	raw, err := os.ReadFile(filepath.Join(vectorsDir, "manifest.json"))
	if err != nil {
		t.Fatalf("%v (go test ./delta -run TestVectors -update-vectors makes it)", err)
	}
	var m vectorManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	var wantMeta map[string]any
	json.Unmarshal(m.Metadata, &wantMeta)
	writers := map[string]int{}
	for _, v := range m.Valid {
		t.Run(v.File, func(t *testing.T) {
			f, err := os.ReadFile(filepath.Join(vectorsDir, v.File))
			if err != nil {
				t.Fatal(err)
			}
			d, err := Read(context.Background(), bytes.NewReader(f), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Verify(context.Background(), bytes.NewReader(f), Limits{}); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if _, err := Open(context.Background(), bytes.NewReader(f), int64(len(f)), Limits{}); err != nil {
				t.Fatalf("Open: %v", err)
			}
			if hex.EncodeToString(d.Info.PublicKey) != m.Pubkey || d.Info.Header.Compression.String() != v.Compression || int(d.Info.Header.Flags) != v.Flags {
				t.Fatalf("key %x, compression %s, flags %d", []byte(d.Info.PublicKey), d.Info.Header.Compression, d.Info.Header.Flags)
			}
			js, _ := d.Info.Metadata.MarshalJSON()
			var got map[string]any
			json.Unmarshal(js, &got)
			if !mapsEqualJSON(got, wantMeta) {
				t.Fatalf("metadata %s, want %s", js, m.Metadata)
			}
			if len(d.Tensors) != len(m.Tensors) {
				t.Fatalf("%d tensors, want %d", len(d.Tensors), len(m.Tensors))
			}
			for i, want := range m.Tensors {
				got := d.Tensors[i]
				sum := sha256.Sum256(got.Data)
				if got.Name != want.Name || got.DType.String() != want.DType || !slices.Equal(got.Shape, want.Shape) || hex.EncodeToString(sum[:]) != want.SHA256 {
					t.Fatalf("tensor %d: %s %s %v, want %+v", i, got.Name, got.DType, got.Shape, want)
				}
			}
		})
		writers[v.Writer]++
	}
	if writers["go"] != 3 || writers["python"] != 3 {
		t.Fatalf("vectors by writer %v: want 3 from each (python/tests/test_delta_vectors.py writes the Python ones)", writers)
	}
	// Python and Go write the same bytes without compression.
	g, _ := os.ReadFile(filepath.Join(vectorsDir, "go-none.delta"))
	p, _ := os.ReadFile(filepath.Join(vectorsDir, "py-none.delta"))
	if !bytes.Equal(g, p) {
		t.Fatal("go-none.delta and py-none.delta differ: the writers disagree on bytes")
	}
	valid := 0
	for _, k := range m.Keys {
		if got := edkey.CheckPublicKey(mustHex(k.Hex)) == nil; got != k.Valid {
			t.Errorf("key %s: valid %v, manifest says %v", k.Hex, got, k.Valid)
		}
		if k.Valid {
			valid++
		}
	}
	if valid < 10 || len(m.Keys)-valid < 10 {
		t.Fatalf("%d of %d keys valid: want both kinds", valid, len(m.Keys))
	}
	if len(m.Invalid) < 40 {
		t.Fatalf("%d hostile vectors", len(m.Invalid))
	}
	for _, v := range m.Invalid {
		t.Run(v.File, func(t *testing.T) {
			f, err := os.ReadFile(filepath.Join(vectorsDir, v.File))
			if err != nil {
				t.Fatal(err)
			}
			want, ok := sentinelNames[v.Error]
			if !ok {
				t.Fatalf("unknown sentinel %q", v.Error)
			}
			if _, err := Read(context.Background(), bytes.NewReader(f), Limits{}); !errors.Is(err, want) {
				t.Fatalf("%s: got %v, want %v", v.What, err, want)
			}
			// The other full readers agree.
			if _, err := Verify(context.Background(), bytes.NewReader(f), Limits{}); !errors.Is(err, want) {
				t.Fatalf("%s: Verify got %v, want %v", v.What, err, want)
			}
			if _, err := Open(context.Background(), bytes.NewReader(f), int64(len(f)), Limits{}); err == nil {
				t.Fatalf("%s: Open accepted it", v.What)
			}
		})
	}
}

func mapsEqualJSON(a, b map[string]any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func writeVectors(t *testing.T) {
	if err := os.MkdirAll(vectorsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	key := testKey(1)
	meta := vectorMetadata()
	js, _ := meta.MarshalJSON()
	m := vectorManifest{
		SeedHex:  hex.EncodeToString(key.Seed()),
		Pubkey:   hex.EncodeToString(key.Public().(ed25519.PublicKey)),
		Metadata: js,
	}
	ts := vectorTensors()
	for _, tn := range ts {
		sum := sha256.Sum256(tn.Data)
		m.Tensors = append(m.Tensors, vectorTensor{Name: tn.Name, DType: tn.DType.String(), Shape: append([]uint64{}, tn.Shape...), SHA256: hex.EncodeToString(sum[:])})
	}
	for _, c := range []Compression{None, LZ4, Zstd} {
		name := "go-" + c.String() + ".delta"
		if err := os.WriteFile(filepath.Join(vectorsDir, name), encode(t, ts, WriteOptions{Compression: c, Flags: FlagLoRA, Metadata: meta}), 0o644); err != nil {
			t.Fatal(err)
		}
		m.Valid = append(m.Valid, vectorFile{File: name, Writer: "go", Compression: c.String(), Flags: int(FlagLoRA)})
	}
	for _, c := range []Compression{None, LZ4, Zstd} {
		m.Valid = append(m.Valid, vectorFile{File: "py-" + c.String() + ".delta", Writer: "python", Compression: c.String(), Flags: int(FlagLoRA)})
	}
	for _, h := range hostileVectors(t) {
		name := "bad-" + h.name + ".delta"
		if err := os.WriteFile(filepath.Join(vectorsDir, name), h.file, 0o644); err != nil {
			t.Fatal(err)
		}
		m.Invalid = append(m.Invalid, vectorFile{File: name, Error: h.want, What: h.what})
	}
	m.Keys = vectorKeys()
	out, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(vectorsDir, "manifest.json"), append(out, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
