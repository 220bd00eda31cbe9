package worker_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/zooai/gym/node/worker"
	"github.com/zooai/gym/protocol/delta"
)

// deltaFile is a signed delta file of two fp32 tensors holding v[:2] and v[2:].
func deltaFile(t *testing.T, v []float32) []byte {
	t.Helper()
	_, key, _ := ed25519.GenerateKey(nil)
	meta := delta.NewMetadata(delta.MetadataFields{Job: "job-00000001", Epoch: 1, Step: 4, Node: "n", Sequence: 1, Time: time.Unix(1, 0)})
	ts := []delta.Tensor{
		{Name: "a", DType: delta.FP32, Shape: []uint64{2}, Data: le(v[:2])},
		{Name: "b", DType: delta.FP32, Shape: []uint64{len64(v) - 2}, Data: le(v[2:])},
	}
	var b bytes.Buffer
	if _, err := delta.Write(context.Background(), &b, key, ts, delta.WriteOptions{Compression: delta.Zstd, Metadata: meta}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func len64(v []float32) uint64 { return uint64(len(v)) }

// le is v's little-endian bytes.
func le(v []float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// PeekDirs returns the sync's newest delta of each directory, flattened in
// tensor order and in the order of the directories; a directory without
// the sync's delta, or with a file cut short (still being written), is
// left out once the wait is over.
func TestPeekDirs(t *testing.T) {
	root := t.TempDir()
	var dirs []string
	for i := range 4 {
		d := filepath.Join(root, fmt.Sprintf("w%d", i), "deltas")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	write := func(dir, name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v0, v2 := []float32{1, 2, 3, 4, 5}, []float32{-1, 0.5, 0.25, 8, 9}
	write(dirs[0], "job-00000001-e1-s2-100.delta", deltaFile(t, []float32{7, 7, 7, 7, 7})) // an older copy of the slot
	write(dirs[0], "job-00000001-e1-s2-200.delta", deltaFile(t, v0))
	write(dirs[0], "job-00000001-e1-s1-300.delta", deltaFile(t, []float32{6, 6, 6, 6, 6})) // another sync
	// dirs[1]: nothing for the sync.
	write(dirs[2], "job-00000001-e1-s2-100.delta", deltaFile(t, v2))
	full := deltaFile(t, v2)
	write(dirs[3], "job-00000001-e1-s2-100.delta", full[:len(full)/2]) // cut short
	got, err := worker.PeekDirs(dirs, 100*time.Millisecond)(context.Background(), "job-00000001", 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !slices.Equal(got[0], v0) || !slices.Equal(got[1], v2) {
		t.Fatalf("peeked %v, want [%v %v]", got, v0, v2)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := worker.PeekDirs(dirs, time.Hour)(ctx, "job-00000001", 1, 2); err == nil {
		t.Fatal("a cancelled wait returned no error")
	}
}
