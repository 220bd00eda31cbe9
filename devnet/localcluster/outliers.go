package localcluster

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/zooai/gym/protocol/delta"
	"github.com/zooai/gym/protocol/merge"
)

// OutlierStats is what the outlier tests (merge.Outliers) make of the
// accepted deltas of finished runs (gym bench outliers): per sync, every
// contribution's ratios, and how many honest and attacking contributions
// a configuration flags. It measures the false-positive rate of the tests
// per profile (docs/byzantine.md, "Outlier tests for every profile").
type OutlierStats struct {
	Runs, Syncs int
	// Honest and Attack are the ratios of the honest nodes' and the
	// attackers' deltas (a run's summary.json names its attackers).
	Honest, Attack []merge.Ratios
	// Flagged counts the deltas Outliers names, by the reason's first
	// word (far, close, a, small, large), for honest and attacking nodes.
	HonestFlagged, AttackFlagged map[string]int
	// HonestSyncs is the number of syncs with at least one honest delta
	// flagged.
	HonestSyncs int
}

// MeasureOutliers reads the accepted deltas of each run directory (gym up
// --out: deltas/eEPOCH-sSTEP-NODE.delta and summary.json) and applies the
// outlier tests of c to every sync's deltas, as the judge does.
func MeasureOutliers(ctx context.Context, c merge.OutlierConfig, dirs []string) (*OutlierStats, error) {
	st := &OutlierStats{HonestFlagged: map[string]int{}, AttackFlagged: map[string]int{}}
	for _, dir := range dirs {
		attackers := map[string]bool{}
		if b, err := os.ReadFile(filepath.Join(dir, "summary.json")); err == nil {
			var sum Summary
			if err := json.Unmarshal(b, &sum); err != nil {
				return nil, fmt.Errorf("%s: %w", dir, err)
			}
			for _, n := range sum.Nodes {
				if n.Attack != "" {
					attackers[n.ID] = true
				}
			}
		}
		files, err := filepath.Glob(filepath.Join(dir, "deltas", "e*-s*-*.delta"))
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("%s: no deltas/e*-s*-*.delta (a gym up --out directory?)", dir)
		}
		st.Runs++
		bySync := map[string][]merge.Input{}
		for _, f := range files {
			name := strings.TrimSuffix(filepath.Base(f), ".delta")
			parts := strings.SplitN(name, "-", 3)
			if len(parts) != 3 {
				continue
			}
			vec, err := readFlat(ctx, f)
			if err != nil {
				return nil, err
			}
			key := parts[0] + "-" + parts[1]
			bySync[key] = append(bySync[key], merge.Input{Node: parts[2], Vec: vec})
		}
		keys := make([]string, 0, len(bySync))
		for k := range bySync {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out, rs, err := merge.OutlierRatios(c, bySync[k])
			if err != nil {
				return nil, fmt.Errorf("%s sync %s: %w", dir, k, err)
			}
			if len(rs) == 0 {
				continue
			}
			st.Syncs++
			honestHit := false
			for _, r := range rs {
				if attackers[r.Node] {
					st.Attack = append(st.Attack, r)
				} else {
					st.Honest = append(st.Honest, r)
				}
			}
			for _, o := range out {
				why, _, _ := strings.Cut(o.Reason, " ")
				if attackers[o.Node] {
					st.AttackFlagged[why]++
				} else {
					st.HonestFlagged[why]++
					honestHit = true
				}
			}
			if honestHit {
				st.HonestSyncs++
			}
		}
	}
	return st, nil
}

// readFlat reads a delta file's float32 tensors, concatenated in the
// file's order (every worker writes them in one order).
func readFlat(ctx context.Context, path string) ([]float32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d, err := delta.Read(ctx, f, delta.Limits{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []float32
	for _, t := range d.Tensors {
		if len(t.Data)%4 != 0 {
			return nil, fmt.Errorf("%s: tensor %q is not float32", path, t.Name)
		}
		for i := 0; i < len(t.Data); i += 4 {
			out = append(out, math.Float32frombits(binary.LittleEndian.Uint32(t.Data[i:])))
		}
	}
	return out, nil
}

// Quantiles returns the q-quantiles (0..1) of the field of rs that get
// picks.
func Quantiles(rs []merge.Ratios, get func(merge.Ratios) float64, qs ...float64) []float64 {
	if len(rs) == 0 {
		return make([]float64, len(qs))
	}
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = get(r)
	}
	slices.Sort(v)
	out := make([]float64, len(qs))
	for i, q := range qs {
		out[i] = v[min(len(v)-1, int(q*float64(len(v)-1)+0.5))]
	}
	return out
}
