package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/zooai/gym/devnet/localcluster"
	"github.com/zooai/gym/protocol/merge"
)

// newBenchOutliers measures the outlier tests on finished runs.
func newBenchOutliers() *cobra.Command {
	var c merge.OutlierConfig
	cmd := &cobra.Command{
		Use:   "outliers [--far 2] [--near 0.5] [--twin 0.5] [--small 0.5] [--large 2] DIR...",
		Short: "Apply hanzod's outlier tests to the accepted deltas of finished gym up runs (--out DIR): the ratios of honest and attacking deltas, and what a setting flags",
		Long: `Reads every DIR's deltas/ (the accepted deltas gym up keeps) and summary.json
(which names the attackers), applies merge.Outliers to each sync's deltas as
hanzod does, and prints the distribution of each test's ratio over the honest
and the attacking deltas, and how many of each the bounds flag (0: the
default bound, negative: the test off). A flagged honest delta costs hanzod
a replay; a flagged attacker is caught at that sync (docs/byzantine.md).`,
		Args: minArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := localcluster.MeasureOutliers(cmd.Context(), c, args)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%d runs, %d syncs, %d honest deltas, %d attacking\n\n", st.Runs, st.Syncs, len(st.Honest), len(st.Attack))
			fmt.Fprintln(w, "| ratio | deltas | min | 1% | 50% | 99% | max |")
			fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
			qs := []float64{0, 0.01, 0.5, 0.99, 1}
			for _, f := range []struct {
				name string
				get  func(merge.Ratios) float64
			}{
				{"distance to the centre / median", func(r merge.Ratios) float64 { return r.Distance }},
				{"norm / median norm", func(r merge.Ratios) float64 { return r.Norm }},
				{"nearest other / typical distance", func(r merge.Ratios) float64 { return r.Nearest }},
			} {
				for _, set := range []struct {
					who string
					rs  []merge.Ratios
				}{{"honest", st.Honest}, {"attacking", st.Attack}} {
					if len(set.rs) == 0 {
						continue
					}
					q := localcluster.Quantiles(set.rs, f.get, qs...)
					fmt.Fprintf(w, "| %s, %s | %d | %.3g | %.3g | %.3g | %.3g | %.3g |\n", f.name, set.who, len(set.rs), q[0], q[1], q[2], q[3], q[4])
				}
			}
			flagged := func(m map[string]int) (int, string) {
				n, parts := 0, []string{}
				for _, k := range slices.Sorted(func(yield func(string) bool) {
					for k := range m {
						if !yield(k) {
							return
						}
					}
				}) {
					n += m[k]
					parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
				}
				return n, strings.Join(parts, ", ")
			}
			hn, hs := flagged(st.HonestFlagged)
			an, as := flagged(st.AttackFlagged)
			fmt.Fprintf(w, "\nflagged: %d of %d honest deltas (%.1f%%; %s) in %d of %d syncs; %d of %d attacking (%s)\n",
				hn, len(st.Honest), 100*float64(hn)/float64(max(1, len(st.Honest))), hs, st.HonestSyncs, st.Syncs, an, len(st.Attack), as)
			return nil
		},
	}
	f := cmd.Flags()
	f.Float64Var(&c.Far, "far", 0, "distance to the centre above this × the median distance is an outlier (0: the default, negative: off)")
	f.Float64Var(&c.Near, "near", 0, "distance to the centre below this × the median distance is an outlier")
	f.Float64Var(&c.Twin, "twin", 0, "another delta closer than this × the typical distance apart is an outlier")
	f.Float64Var(&c.Small, "small", 0, "a norm below this × the median norm is an outlier")
	f.Float64Var(&c.Large, "large", 0, "a norm above this × the median norm is an outlier")
	return cmd
}
