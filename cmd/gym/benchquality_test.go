package main

import (
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The statistics of gym bench quality: gaps seed by seed against the
// single worker, in points; mean, sample standard deviation, range.
func TestQualityRowSummary(t *testing.T) {
	single := qualityRow{Runs: []qualityRun{{Accuracy: 0.9}, {Accuracy: 0.94}}}
	single.summarise(nil)
	row := qualityRow{Name: "4 workers", Workers: 4, Runs: []qualityRun{{Accuracy: 0.92, Seconds: 10}, {Accuracy: 0.9, Seconds: 20}}}
	row.summarise(single.Runs)
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if !near(row.Gaps[0], 2) || !near(row.Gaps[1], -4) || !near(row.MeanGap, -1) || !near(row.GapStd, math.Sqrt(18)) ||
		!near(row.Mean, 0.91) || !near(row.Min, 0.9) || !near(row.Max, 0.92) || !near(row.MeanSeconds, 15) {
		t.Fatalf("row %+v", row)
	}
	if single.Gaps != nil || !near(single.Mean, 0.92) {
		t.Fatalf("single %+v", single)
	}
	var b strings.Builder
	printQuality(&b, &qualityReport{Seeds: []uint64{0, 1}, Samples: 11520, Rows: []qualityRow{single, row}})
	for _, want := range []string{"| 0 | 0.900 | 0.920 | +2.0 |", "| 1 | 0.940 | 0.900 | -4.0 |", "| 4 workers | 0.9100 |", "| -1.00 |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// The summary line of gym train and gym up --json.
func TestLastSummary(t *testing.T) {
	acc, st, err := lastSummary([]byte("{\"step\":1}\n{\"eval_after\":0.5,\"status\":\"published\"}\n"))
	if err != nil || acc != 0.5 || st != "published" {
		t.Fatalf("%v %q %v", acc, st, err)
	}
	if _, st, err := lastSummary([]byte(`{"eval_after":0.25}`)); err != nil || st != "done" {
		t.Fatalf("%q %v", st, err)
	}
	for _, bad := range []string{"", "{}", "not json"} {
		if _, _, err := lastSummary([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// Flag checks: worker counts must split the prompts evenly, steps whole
// epochs of whole syncs.
func TestQualityOptions(t *testing.T) {
	ok := qualityOptions{seeds: 2, workers: "4,8", epochs: 3, steps: 90, interval: 5, prompts: 16, out: "x"}
	if err := ok.check(); err != nil || len(ok.parsedSeeds) != 2 || ok.stepsPerEpoch != 30 || len(ok.parsedWorkers) != 2 {
		t.Fatalf("%+v %v", ok, err)
	}
	if own := (qualityOptions{seeds: 1, workers: "4", epochs: 3, steps: 93, prompts: 16, out: "x"}); own.check() != nil || own.stepsPerEpoch != 31 {
		t.Fatalf("gym up's own interval: %+v", own)
	}
	for _, edit := range []func(*qualityOptions){
		func(o *qualityOptions) { o.workers = "3" },  // 16 prompts do not split 3 ways
		func(o *qualityOptions) { o.workers = "2" },  // no ring of 2
		func(o *qualityOptions) { o.steps = 100 },    // not whole epochs of whole syncs
		func(o *qualityOptions) { o.seedList = "a" }, // not a seed
		func(o *qualityOptions) { o.seeds = 0 },
		func(o *qualityOptions) { o.interval, o.steps = 0, 91 }, // gym up's interval (1): whole epochs still
		func(o *qualityOptions) { o.interval = -1 },
	} {
		o := ok
		edit(&o)
		if err := o.check(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// gym bench quality end to end against a stand-in gym binary: every gym up
// run derives its keys from the seed, a --variant row runs with its flags
// and is compared seed by seed with the row without them.
func TestBenchQualityVariant(t *testing.T) {
	dir := t.TempDir()
	// Accuracy: 0.90 for gym train, 0.85 + seed/100 for gym up, 0.02
	// more with the variant's flag. It logs every command line.
	fake := filepath.Join(dir, "gym")
	script := `#!/bin/sh
echo "$*" >> "` + filepath.Join(dir, "calls") + `"
acc=0.90
seed=0
prev=
for a in "$@"; do
	[ "$prev" = "--seed" ] && seed=$a
	prev=$a
done
case "$1" in up)
	acc=$(awk "BEGIN{print 0.85 + $seed/100}")
	case "$*" in *--outer-lr=1.25*) acc=$(awk "BEGIN{print $acc + 0.02}");; esac;;
esac
echo "{\"eval_after\":$acc,\"status\":\"published\"}"
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	o := qualityOptions{seeds: 2, workers: "4", epochs: 3, steps: 90, interval: 5, prompts: 16, out: filepath.Join(dir, "out"),
		gym: fake, timeout: time.Minute, variant: []string{"--outer-lr=1.25"}}
	if err := o.check(); err != nil {
		t.Fatal(err)
	}
	rep, err := runBenchQuality(t.Context(), o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 3 || rep.Rows[2].Variant == nil {
		t.Fatalf("rows %+v", rep.Rows)
	}
	v := rep.Rows[2]
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6 }
	if len(v.VsBase) != 2 || !near(v.VsBase[0], 2) || !near(v.VsBase[1], 2) || !near(v.MeanVsBase, 2) || !near(rep.Rows[1].Gaps[1], -4) {
		t.Fatalf("variant row %+v, base gaps %v", v, rep.Rows[1].Gaps)
	}
	calls, _ := os.ReadFile(filepath.Join(dir, "calls"))
	ups := 0
	for _, line := range strings.Split(strings.TrimSpace(string(calls)), "\n") {
		if strings.HasPrefix(line, "up ") {
			ups++
			seed := line[strings.Index(line, "--seed ")+7:]
			seed = seed[:strings.IndexByte(seed, ' ')]
			if !strings.Contains(line, "--key-seed "+seed+" ") {
				t.Errorf("gym up without --key-seed %s: %s", seed, line)
			}
			if !strings.Contains(line, " --interval 5 ") {
				t.Errorf("gym up without the bench's --interval: %s", line)
			}
			if !strings.HasSuffix(line, " --timeout 1m0s") {
				t.Errorf("gym up without the bench's --timeout: %s", line)
			}
		}
	}
	if ups != 4 {
		t.Fatalf("%d gym up runs, want 4:\n%s", ups, calls)
	}
	var b strings.Builder
	printQuality(&b, rep)
	if !strings.Contains(b.String(), "4 workers, --outer-lr=1.25 against the same workers without it, seed by seed (same keys and data): +2.0 +2.0; mean +2.00 points") {
		t.Fatalf("report:\n%s", b.String())
	}
}
