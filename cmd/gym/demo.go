package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/zooai/gym/keys/nodekey"
	"github.com/zooai/gym/model/safetensors"
	"github.com/zooai/gym/protocol/delta"
)

func newDemo() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "demo [--dir DIR]",
		Short: "Walk through what Zoo Gym can do today, on generated data",
		Long: `demo runs the parts of Zoo Gym that exist today on a generated LoRA adapter:
it makes a node key, packs the adapter into a signed delta, inspects and
verifies it, shows that a single flipped bit is caught, and unpacks it again
to byte-identical safetensors. Every step prints the gym command that does
the same by hand. Files go to DIR (default: a new temporary directory, kept).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				var err error
				if dir, err = os.MkdirTemp("", "gym-demo-"); err != nil {
					return err
				}
			} else if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			return demo(cmd, dir)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory for the demo's files")
	return cmd
}

func demo(cmd *cobra.Command, dir string) error {
	ctx := cmd.Context()
	w := cmd.OutOrStdout()
	step := func(n int, what, command string) {
		fmt.Fprintf(w, "\n%d. %s\n   $ %s\n", n, what, command)
	}
	keyPath := filepath.Join(dir, "node.key")
	adapter := filepath.Join(dir, "adapter.safetensors")
	deltaPath := filepath.Join(dir, "adapter.delta")
	back := filepath.Join(dir, "unpacked.safetensors")

	step(1, "Make a node key", "gym keygen --out "+keyPath)
	key, err := nodekey.Generate(nil)
	if err != nil {
		return err
	}
	if err := nodekey.Save(keyPath, key, true); err != nil {
		return err
	}
	fmt.Fprintf(w, "   public key %s\n", nodekey.PublicHex(key))

	step(2, "Generate a rank-16 LoRA adapter for 4 attention projections (bf16)", "(generated in Go)")
	ts := demoAdapter()
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, ts, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	if err := os.WriteFile(adapter, buf.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(w, "   %s: %d tensors, %d bytes\n", adapter, len(ts), buf.Len())

	step(3, "Pack it into a signed delta with its metadata", fmt.Sprintf("gym delta pack --key %s --compression zstd --meta '{\"job\":\"demo\",\"epoch\":0,...}' %s %s", keyPath, adapter, deltaPath))
	tensors, err := readSafetensors(adapter)
	if err != nil {
		return err
	}
	meta := delta.NewMetadata(delta.MetadataFields{Job: "demo", Node: nodekey.PublicHex(key)[:16], Samples: 64, ClaimedLoss: 1.5, Time: time.Now()})
	start := time.Now()
	if err := writeAtomic(deltaPath, func(out io.Writer) error {
		_, err := delta.Write(ctx, out, key, tensors, delta.WriteOptions{Compression: delta.Zstd, Flags: delta.FlagLoRA, Metadata: meta})
		return err
	}); err != nil {
		return err
	}
	st, _ := os.Stat(deltaPath)
	fmt.Fprintf(w, "   %d bytes (%.0f%% of the raw tensors) in %v\n", st.Size(), 100*float64(st.Size())/float64(buf.Len()), time.Since(start).Round(time.Millisecond))

	step(4, "Inspect it", "gym delta inspect "+deltaPath)
	r, err := inspect(ctx, deltaPath, delta.Limits{})
	if err != nil {
		return err
	}
	printInspect(indent{w}, deltaPath, r)

	step(5, "Verify it against the signer's public key", fmt.Sprintf("gym delta verify --pubkey %s %s", nodekey.PublicHex(key), deltaPath))
	if err := verifyFile(ctx, deltaPath, key.Public().(ed25519.PublicKey), delta.Limits{}); err != nil {
		return fmt.Errorf("the demo's own delta does not verify: %w", err)
	}
	fmt.Fprintln(w, "   valid (exit status 0)")

	step(6, "Flip one bit in a copy and verify again", "gym delta verify tampered.delta")
	orig, err := os.ReadFile(deltaPath)
	if err != nil {
		return err
	}
	tampered := filepath.Join(dir, "tampered.delta")
	bad := append([]byte(nil), orig...)
	bad[len(bad)/2] ^= 0x01
	if err := os.WriteFile(tampered, bad, 0o644); err != nil {
		return err
	}
	verr := verifyFile(ctx, tampered, nil, delta.Limits{})
	if verr == nil {
		return fmt.Errorf("a tampered delta verified")
	}
	fmt.Fprintf(w, "   %s: %v (exit status 1)\n", tampered, verr)

	step(7, "Unpack the original and compare with the adapter", fmt.Sprintf("gym delta unpack %s %s", deltaPath, back))
	if err := unpack(ctx, deltaPath, back, nil, delta.Limits{}); err != nil {
		return err
	}
	unpacked, err := readSafetensors(back)
	if err != nil {
		return err
	}
	for i, t := range unpacked {
		if t.Name != tensors[i].Name || !bytes.Equal(t.Data, tensors[i].Data) {
			return fmt.Errorf("tensor %q came back different", t.Name)
		}
	}
	fmt.Fprintf(w, "   all %d tensors byte-identical\n", len(unpacked))
	fmt.Fprintf(w, "\nFiles are in %s. Next: 'gym bench delta' measures packing and verification here.\n", dir)
	return nil
}

// demoAdapter makes LoRA A/B matrices for q, k, v, o of one 512-wide layer.
func demoAdapter() []safetensors.Tensor {
	rng := rand.New(rand.NewPCG(1, 2))
	var ts []safetensors.Tensor
	for _, m := range []string{"q_proj", "k_proj", "v_proj", "o_proj"} {
		for _, ab := range []struct {
			name  string
			shape []uint64
		}{{"A", []uint64{16, 512}}, {"B", []uint64{512, 16}}} {
			n := ab.shape[0] * ab.shape[1]
			data := make([]byte, 2*n)
			for i := range n {
				f := float32(rng.NormFloat64() * 0.02)
				binary.LittleEndian.PutUint16(data[2*i:], uint16(math.Float32bits(f)>>16))
			}
			ts = append(ts, safetensors.Tensor{Name: "lora." + m + "." + ab.name + ".weight", DType: "BF16", Shape: ab.shape, Data: data})
		}
	}
	return ts
}

// indent prefixes every line with three spaces.
type indent struct{ w io.Writer }

func (i indent) Write(p []byte) (int, error) {
	for _, line := range bytes.SplitAfter(p, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if _, err := i.w.Write(append([]byte("   "), line...)); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}
