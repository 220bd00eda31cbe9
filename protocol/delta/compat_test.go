package delta_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zooai/gym/internal/pyref"
	"github.com/zooai/gym/protocol/delta"
)

func needPython(t *testing.T) {
	t.Helper()
	if err := pyref.Available(); err != nil {
		if os.Getenv("GYM_REQUIRE_PYTHON") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

func compatTensors() []delta.Tensor {
	mk := func(name string, d delta.DType, shape []uint64, seed byte) delta.Tensor {
		n, _ := delta.NumBytes(d, shape)
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7) ^ seed ^ byte(i>>9)
		}
		return delta.Tensor{Name: name, DType: d, Shape: shape, Data: b}
	}
	return []delta.Tensor{
		mk("lora.q_proj.A.weight", delta.BF16, []uint64{8, 300}, 1),
		mk("lora.q_proj.B.weight", delta.BF16, []uint64{300, 8}, 2),
		mk("w32", delta.FP32, []uint64{5, 3, 2}, 3),
		mk("w16", delta.FP16, []uint64{70000}, 4), // more than one 64 KiB LZ4 block: linked blocks
		mk("scalar", delta.FP32, nil, 5),
		mk("empty", delta.Int8, []uint64{0}, 6),
		mk("i8", delta.Int8, []uint64{1000}, 7),
	}
}

// Files from the seed's Python writer (lz4.frame.compress with its defaults:
// linked 64 KiB blocks, content size stored; zstandard with its defaults)
// must read back to identical tensors.
func TestPythonWriterToGoReader(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	ts := compatTensors()
	var pts []pyref.Tensor
	for _, tn := range ts {
		pts = append(pts, pyref.Tensor{Name: tn.Name, DType: int(tn.DType), Shape: tn.Shape, Data: tn.Data})
	}
	seed := bytes.Repeat([]byte{9}, 32)
	for _, c := range []delta.Compression{delta.None, delta.LZ4, delta.Zstd} {
		t.Run(c.String(), func(t *testing.T) {
			sp, err := pyref.WriteSpec(dir, seed, int(c), 1, pts)
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, c.String()+".delta")
			if _, err := pyref.Run(context.Background(), pyref.Writer, "--spec", sp, "--out", out); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			d, err := delta.Read(context.Background(), f, delta.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(d.Info.PublicKey, ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)) {
				t.Fatal("public key differs")
			}
			if d.Info.Header.Compression != c || d.Info.Header.Flags != delta.FlagLoRA {
				t.Fatalf("header %+v", d.Info.Header)
			}
			for i, want := range ts {
				got := d.Tensors[i]
				if got.Name != want.Name || got.DType != want.DType || !slices.Equal(got.Shape, want.Shape) || !bytes.Equal(got.Data, want.Data) {
					t.Fatalf("tensor %d %q differs", i, want.Name)
				}
			}
			// The random-access reader agrees.
			st, _ := f.Stat()
			ra, err := delta.Open(context.Background(), f, st.Size(), delta.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range ts {
				got, err := ra.Tensor(want.Name)
				if err != nil || !bytes.Equal(got.Data, want.Data) {
					t.Fatalf("Open/Tensor(%q): %v", want.Name, err)
				}
			}
		})
	}
}

// Files from the Go writer must verify with the independent Python reader,
// which decodes every frame with the Python lz4 and zstandard bindings.
func TestGoWriterToPythonVerifier(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	ts := compatTensors()
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, 32))
	meta := delta.NewMetadata(delta.MetadataFields{Job: "j", Epoch: 1, Node: "n"})
	for _, c := range []delta.Compression{delta.None, delta.LZ4, delta.Zstd} {
		t.Run(c.String(), func(t *testing.T) {
			var buf bytes.Buffer
			if _, err := delta.Write(context.Background(), &buf, key, ts, delta.WriteOptions{Compression: c, Flags: delta.FlagFull, Metadata: meta}); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, c.String()+".delta")
			os.WriteFile(path, buf.Bytes(), 0o600)
			pub := hex.EncodeToString(key.Public().(ed25519.PublicKey))
			out, err := pyref.Run(context.Background(), pyref.Verifier, path, "--pubkey", pub)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var res struct {
				Valid   bool   `json:"valid"`
				Error   any    `json:"error"`
				Flags   int    `json:"flags"`
				Pubkey  string `json:"pubkey"`
				Tensors []struct {
					Name   string `json:"name"`
					SHA256 string `json:"sha256"`
				} `json:"tensors"`
				Metadata map[string]any `json:"metadata"`
			}
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if !res.Valid || res.Pubkey != pub || res.Flags != int(delta.FlagFull) {
				t.Fatalf("python says %s", out)
			}
			if res.Metadata["job"] != "j" {
				t.Fatalf("metadata %v", res.Metadata)
			}
			var names []string
			for _, tn := range res.Tensors {
				if tn.Name == delta.MetadataName {
					continue
				}
				names = append(names, tn.Name)
				for _, want := range ts {
					if want.Name == tn.Name {
						sum := sha256.Sum256(want.Data)
						if hex.EncodeToString(sum[:]) != tn.SHA256 {
							t.Fatalf("%s decodes differently in Python", tn.Name)
						}
					}
				}
			}
			if len(names) != len(ts) {
				t.Fatalf("python saw %v", names)
			}
			// And a flipped byte is caught there too.
			b := buf.Bytes()
			b[len(b)/2] ^= 0x10
			os.WriteFile(path, b, 0o600)
			if out, err := pyref.Run(context.Background(), pyref.Verifier, path); err == nil {
				t.Fatalf("python accepted a corrupted file: %s", out)
			}
		})
	}
}
