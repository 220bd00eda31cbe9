package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zooai/gym/protocol/jobconf"
	"github.com/zooai/gym/protocol/jobspec"
)

var testNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

const minimalJob = "model: m\ndataset: d\nepochs: 1\nmin_nodes: 3\n"

const minimalBuiltin = "model: builtin\ndataset: sort\nepochs: 1\nmin_nodes: 3\ngspo:\n  aggregate_interval: 5\n  gradient_accumulation_steps: 1\n"

// parseJobFile parses as gym job submit does: the built-in model's own
// rules checked.
func parseJobFile(name string, data []byte, now time.Time) (*jobspec.File, error) {
	return jobspec.ParseFile(name, data, now, checkBuiltin)
}

func TestReadJobFileLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.yaml")
	os.WriteFile(path, []byte(minimalJob+"# "+strings.Repeat("x", jobspec.MaxFileBytes)+"\n"), 0o644)
	if _, err := readJobFile(path, nil, testNow); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized file: %v", err)
	}
	if _, err := readJobFile("-", strings.NewReader("model: m\n"), testNow); err == nil || !strings.HasPrefix(err.Error(), "stdin has 3 problems") {
		t.Fatalf("standard input: %v", err)
	}
	if j, err := readJobFile("-", strings.NewReader(minimalJob), testNow); err != nil || j.Model != "m" {
		t.Fatalf("standard input: %+v %v", j, err)
	}
}

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		in     string
		haveCA bool
		want   string
		tls    bool
		bad    bool
	}{
		{in: "localhost:9550", want: "localhost:9550"},
		{in: "localhost", want: "localhost:9550"},
		{in: ":9550", want: "localhost:9550"},
		{in: "127.0.0.1:1234", want: "127.0.0.1:1234"},
		{in: "[::1]:1234", want: "[::1]:1234"},
		{in: "::1", want: "[::1]:9550"},
		{in: "10.0.0.5:9550", want: "10.0.0.5:9550", tls: true},
		{in: "hanzod.example.org", want: "hanzod.example.org:9550", tls: true},
		{in: "localhost:9550", haveCA: true, want: "localhost:9550", tls: true},
		{in: "grpc://10.0.0.5:9550", want: "10.0.0.5:9550"},
		{in: "grpcs://localhost:9550", want: "localhost:9550", tls: true},
		{in: "https://h.example.org/", want: "h.example.org:9550", tls: true},
		{in: "GRPC://h:1", want: "h:1"},
		{in: "", bad: true},
		{in: "ftp://h:1", bad: true},
		{in: "grpc://h:1/path", bad: true},
		{in: "grpcs://user@h:1", bad: true},
		{in: "grpc://h:1", haveCA: true, bad: true},
		{in: "h:notaport", bad: true},
		{in: "h:0", bad: true},
		{in: "a:b:c", bad: true},
	} {
		got, err := parseTarget(tc.in, tc.haveCA)
		if tc.bad {
			if err == nil || !isUsage(err) {
				t.Errorf("%q: %+v %v, want a usage error", tc.in, got, err)
			}
			continue
		}
		if err != nil || got.hostport != tc.want || got.tls != tc.tls {
			t.Errorf("%q: %+v %v, want %s tls=%v", tc.in, got, err, tc.want, tc.tls)
		}
	}
}

// The built-in model's own rules are checked before anything is sent.
func TestParseJobFileBuiltin(t *testing.T) {
	if _, err := parseJobFile("j.yaml", []byte(minimalBuiltin), testNow); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, want string }{
		{strings.Replace(minimalBuiltin, "sort", "gsm8k", 1), `j.yaml:1: model: builtin: the trainer cannot run these settings on the built-in model: jobspec: dataset must be a built-in task (addition, sort) or the CID of a dataset artifact: "gsm8k" is neither`},
		{minimalBuiltin + "prompts_per_step: 2\n" + "", ""},
		{strings.Replace(minimalBuiltin, "gradient_accumulation_steps: 1", "gradient_accumulation_steps: 4", 1) + "prompts_per_step: 2\n",
			"gradient_accumulation_steps 4 must divide prompts_per_step 2"},
		{minimalBuiltin + "  max_seq_len: 3\n", "max_seq_len 3 <"},
	} {
		_, err := parseJobFile("j.yaml", []byte(tc.file), testNow)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.file, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.file, err, tc.want)
		}
	}
}

// examples/builtin-job.yaml is gym up's job: its default profile
// (synchronous data parallelism, a sync every step) and flag defaults.
func TestJobBuiltinExample(t *testing.T) {
	b, err := os.ReadFile(builtinJob)
	if err != nil {
		t.Fatal(err)
	}
	j, err := parseJobFile(builtinJob, b, testNow)
	if err != nil {
		t.Fatal(err)
	}
	up := newUp().Flags()
	flag := func(name string) int {
		v, err := up.GetInt(name)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	task, _ := up.GetString("task")
	if dp, err := up.GetBool("data-parallel"); err != nil || !dp {
		t.Fatalf("gym up's default profile is not data-parallel: %v %v", dp, err)
	}
	want := jobconf.BuiltinDataParallelGSPO()
	switch {
	case j.Model != jobconf.BuiltinModel || j.Dataset != task || j.Epochs != flag("epochs") || j.MinNodes != flag("workers") || j.MaxNodes != flag("workers"):
		t.Errorf("job: %+v", j)
	case j.StepsPerEpoch != flag("steps-per-epoch") || j.PromptsPerStep != flag("prompts") || j.Byzantine != 0 || j.Aggregation != "mean" ||
		j.SpotCheckBP != (jobspec.Spec{SpotCheckBP: flag("spot-check-bp")}).SpotCheckShare():
		t.Errorf("run: %+v", j)
	case !j.HasGSPO || j.GSPO != want:
		t.Errorf("gspo: %+v, want %+v", j.GSPO, want)
	}
}

// examples/dataset-job.yaml parses and names a dataset by CID with its
// mapping and reward.
func TestJobDatasetExample(t *testing.T) {
	_, s := readExample(t, "../../examples/dataset-job.yaml")
	if _, byCID, err := jobspec.DatasetCID(s.Dataset); !byCID || err != nil || s.Data.Extract != "numeric" || s.Reward == "" {
		t.Fatalf("%+v", s)
	}
}

// examples/local-steps-job.yaml is gym up --data-parallel=false's job
// (--interval 5, its default there, four workers).
func TestJobLocalStepsExample(t *testing.T) {
	j, _ := readExample(t, "../../examples/local-steps-job.yaml")
	if want := jobconf.BuiltinGSPOFor(5, 4); !j.HasGSPO || j.GSPO != want {
		t.Errorf("gspo: %+v, want %+v", j.GSPO, want)
	}
}

// readExample parses an example job file and returns it with its spec,
// normalised as hanzod would.
func readExample(t *testing.T, path string) (*jobspec.File, jobspec.Spec) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	j, err := parseJobFile(path, b, testNow)
	if err != nil {
		t.Fatal(err)
	}
	s := j.Spec()
	if err := s.Normalise(); err != nil {
		t.Fatal(err)
	}
	return j, s
}
