package worker

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/zooai/gym/protocol/delta"
)

// PeekDirs is an omniscient attacker's side channel for a test cluster
// (Config.Peek): the honest workers' kept delta files (each worker's
// DataDir/deltas, written once hanzod accepted them) in dirs, read
// directly from the shared disk. For sync k of epoch e it waits up to wait
// for every directory to hold that sync's delta and returns the ones there
// by then, in the order of dirs; a file still being written is read again
// on the next poll. Honest workers submit before they enter the sync's
// ring all-reduce, so the attacker learns the sync's honest updates before
// it must commit to its own. A real deployment has no such channel: an
// attacker there sees only its ring frames (docs/threat-model.md).
func PeekDirs(dirs []string, wait time.Duration) func(ctx context.Context, job string, epoch, sync int) ([][]float32, error) {
	return func(ctx context.Context, job string, epoch, sync int) ([][]float32, error) {
		pattern := fmt.Sprintf("%s-e%d-s%d-*.delta", safeName(job), epoch, sync)
		got := make([][]float32, len(dirs))
		deadline := time.Now().Add(wait)
		for {
			missing := 0
			for i, dir := range dirs {
				if got[i] == nil {
					got[i] = peekFile(ctx, dir, pattern)
				}
				if got[i] == nil {
					missing++
				}
			}
			if missing == 0 || !time.Now().Before(deadline) {
				break
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
		return slices.DeleteFunc(got, func(v []float32) bool { return v == nil }), nil
	}
}

// peekFile returns the newest delta in dir matching pattern, flattened
// (tensors in file order, which is jobconf.Flatten's), or nil.
func peekFile(ctx context.Context, dir, pattern string) []float32 {
	names, _ := filepath.Glob(filepath.Join(dir, pattern))
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	b, err := os.ReadFile(names[len(names)-1])
	if err != nil {
		return nil
	}
	d, err := delta.Read(ctx, bytes.NewReader(b), delta.DefaultLimits())
	if err != nil {
		return nil
	}
	var v []float32
	for _, t := range d.Tensors {
		if t.DType != delta.FP32 {
			return nil
		}
		for i := 0; i+4 <= len(t.Data); i += 4 {
			v = append(v, math.Float32frombits(binary.LittleEndian.Uint32(t.Data[i:])))
		}
	}
	return v
}
