package pyref

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/sha3"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
)

func requirePython(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("GYM_REQUIRE_PYTHON") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

type verifyResult struct {
	Valid       bool            `json:"valid"`
	Error       *string         `json:"error"`
	Compression *int            `json:"compression"`
	Flags       *int            `json:"flags"`
	Pubkey      string          `json:"pubkey"`
	Tensors     []verifyTensor  `json:"tensors"`
	Metadata    json.RawMessage `json:"metadata"`
}

type verifyTensor struct {
	Name   string   `json:"name"`
	Dtype  int      `json:"dtype"`
	Shape  []uint64 `json:"shape"`
	SHA256 string   `json:"sha256"`
}

type specTensor struct {
	Name     string   `json:"name"`
	Dtype    int      `json:"dtype"`
	Shape    []uint64 `json:"shape"`
	DataFile string   `json:"data_file"`
	Offset   int      `json:"offset"`
	Length   int      `json:"length"`
}

func TestWriterThenVerifier(t *testing.T) {
	requirePython(t)
	ctx := context.Background()
	dir := t.TempDir()

	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i * 7)
	}
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)

	meta := []byte(`{"base_model":"test","lora_rank":4}`)
	fp32 := make([]byte, 2*3*4)
	for i := 0; i < 6; i++ {
		binary.LittleEndian.PutUint32(fp32[i*4:], 0x3f800000+uint32(i))
	}
	bf16 := make([]byte, 64*2)
	for i := range bf16 {
		bf16[i] = byte(i)
	}
	parts := []struct {
		name  string
		dtype int
		shape []uint64
		data  []byte
	}{
		{"__metadata__", 3, []uint64{uint64(len(meta))}, meta},
		{"w.fp32", 0, []uint64{2, 3}, fp32},
		{"w.bf16", 2, []uint64{8, 8}, bf16},
		{"w.fp16.scalar", 1, []uint64{}, []byte{0x00, 0x3c}},
		{"w.int8.empty", 3, []uint64{0, 5}, nil},
	}
	rawPath := filepath.Join(dir, "raw.bin")
	var raw []byte
	var tensors []specTensor
	for _, p := range parts {
		tensors = append(tensors, specTensor{p.name, p.dtype, p.shape, rawPath, len(raw), len(p.data)})
		raw = append(raw, p.data...)
	}
	if err := os.WriteFile(rawPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}

	for _, comp := range []int{0, 1, 2} {
		t.Run(fmt.Sprintf("compression%d", comp), func(t *testing.T) {
			spec, err := json.Marshal(map[string]any{
				"seed_hex":    hex.EncodeToString(seed),
				"compression": comp,
				"flags":       1,
				"tensors":     tensors,
			})
			if err != nil {
				t.Fatal(err)
			}
			specPath := filepath.Join(dir, fmt.Sprintf("spec%d.json", comp))
			out := filepath.Join(dir, fmt.Sprintf("out%d.delta", comp))
			if err := os.WriteFile(specPath, spec, 0o644); err != nil {
				t.Fatal(err)
			}
			stdout, err := Run(ctx, Writer, "--spec", specPath, "--out", out, "--time")
			if err != nil {
				t.Fatal(err)
			}
			var timing struct {
				Seconds float64 `json:"seconds"`
				Bytes   int     `json:"bytes"`
			}
			if err := json.Unmarshal(stdout, &timing); err != nil {
				t.Fatalf("writer --time output %q: %v", stdout, err)
			}
			if timing.Bytes != len(raw) || timing.Seconds < 0 {
				t.Errorf("timing = %+v, want bytes %d", timing, len(raw))
			}

			// Check header, checksum and signature independently in Go.
			file, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if len(file) < 24+96 || string(file[:5]) != "DELTA" || file[5] != 1 || int(file[6]) != comp || file[7] != 1 {
				t.Fatalf("bad header % x", file[:min(len(file), 24)])
			}
			body := file[:len(file)-96]
			sum := sha3.Sum256(body[24:])
			if string(sum[:16]) != string(file[8:24]) {
				t.Error("checksum mismatch")
			}
			digest := sha3.Sum256(body)
			if !ed25519.Verify(pub, digest[:], file[len(file)-96:len(file)-32]) {
				t.Error("Go ed25519 rejects the signature")
			}
			if string(file[len(file)-32:]) != string(pub) {
				t.Error("trailer public key mismatch")
			}

			got := runVerify(t, ctx, out, hex.EncodeToString(pub), true)
			if got.Compression == nil || *got.Compression != comp || got.Flags == nil || *got.Flags != 1 {
				t.Errorf("compression/flags = %v/%v", got.Compression, got.Flags)
			}
			if got.Pubkey != hex.EncodeToString(pub) {
				t.Errorf("pubkey = %s", got.Pubkey)
			}
			if len(got.Tensors) != len(parts) {
				t.Fatalf("got %d tensors, want %d", len(got.Tensors), len(parts))
			}
			for i, p := range parts {
				h := sha256.Sum256(p.data)
				want := verifyTensor{p.name, p.dtype, p.shape, hex.EncodeToString(h[:])}
				if !reflect.DeepEqual(got.Tensors[i], want) {
					t.Errorf("tensor %d = %+v, want %+v", i, got.Tensors[i], want)
				}
			}
			var gotMeta, wantMeta any
			if err := json.Unmarshal(got.Metadata, &gotMeta); err != nil {
				t.Fatal(err)
			}
			_ = json.Unmarshal(meta, &wantMeta)
			if !reflect.DeepEqual(gotMeta, wantMeta) {
				t.Errorf("metadata = %s, want %s", got.Metadata, meta)
			}

			// A flipped byte anywhere must be rejected.
			for _, pos := range []int{0, 6, 30, len(file) / 2, len(file) - 50, len(file) - 1} {
				bad := append([]byte(nil), file...)
				bad[pos] ^= 0x01
				badPath := filepath.Join(dir, "bad.delta")
				if err := os.WriteFile(badPath, bad, 0o644); err != nil {
					t.Fatal(err)
				}
				runVerify(t, ctx, badPath, "", false)
			}
			// A different expected key must be rejected.
			runVerify(t, ctx, out, hex.EncodeToString(make([]byte, 32)), false)
		})
	}
}

func runVerify(t *testing.T, ctx context.Context, path, pubHex string, wantValid bool) verifyResult {
	t.Helper()
	args := []string{path}
	if pubHex != "" {
		args = append(args, "--pubkey", pubHex)
	}
	stdout, err := Run(ctx, Verifier, args...)
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		t.Fatalf("verify.py: %v", err)
	}
	var res verifyResult
	if jerr := json.Unmarshal(stdout, &res); jerr != nil {
		t.Fatalf("verify.py output %q: %v", stdout, jerr)
	}
	if res.Valid != wantValid || (err == nil) != wantValid {
		msg := "<nil>"
		if res.Error != nil {
			msg = *res.Error
		}
		t.Fatalf("verify %s: valid=%v (exit err %v), want %v; error: %s", path, res.Valid, err, wantValid, msg)
	}
	if !wantValid && res.Error == nil {
		t.Fatalf("verify %s: invalid without an error message", path)
	}
	return res
}
