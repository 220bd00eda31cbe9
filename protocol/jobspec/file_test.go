package jobspec

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

var testNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

const minimalJob = "model: m\ndataset: d\nepochs: 1\nmin_nodes: 3\n"

const minimalBuiltin = "model: builtin\ndataset: sort\nepochs: 1\nmin_nodes: 3\ngspo:\n  aggregate_interval: 5\n  gradient_accumulation_steps: 1\n"

// The example job files of the repository seed the fuzz target.
const (
	exampleJob = "../../examples/job.yaml"
	builtinJob = "../../examples/builtin-job.yaml"
)

func parse(name string, data []byte, now time.Time) (*File, error) {
	return ParseFile(name, data, now, nil)
}

func TestParseJobFileDefaults(t *testing.T) {
	j, err := parse("j.yaml", []byte(minimalJob), testNow)
	if err != nil {
		t.Fatal(err)
	}
	if j.MaxNodes != 3 || j.Aggregation != "mean" || j.Utility != 1 || j.Deadline != nil || j.HasGSPO || j.GSPO != DefaultGSPO() {
		t.Fatalf("defaults: %+v", j)
	}
	s := ToProto(j.Spec())
	if s.Model != "m" || s.Dataset != "d" || s.Epochs != 1 || s.MinNodes != 3 || s.MaxNodes != 3 || s.DeadlineUnixMs != 0 || s.Aggregation != "mean" {
		t.Fatalf("spec: %+v", s)
	}
}

func TestParseJobFileValues(t *testing.T) {
	for _, tc := range []struct {
		extra string
		check func(*File) bool
	}{
		{"deadline: 36h\n", func(j *File) bool { return j.Deadline.Equal(testNow.Add(36 * time.Hour)) }},
		{"deadline: 2d\n", func(j *File) bool { return j.Deadline.Equal(testNow.Add(48 * time.Hour)) }},
		{"deadline: 2027-01-02T03:04:05.678+01:00\n", func(j *File) bool {
			return j.Deadline.Equal(time.Date(2027, 1, 2, 2, 4, 5, 678e6, time.UTC)) && ToProto(j.Spec()).DeadlineUnixMs == j.Deadline.UnixMilli()
		}},
		{`deadline: "2027-01-02T00:00:00Z"` + "\n", func(j *File) bool { return j.Deadline.Year() == 2027 }},
		{"max_nodes: 64\nmin_vram_mib: 81920\naggregation: median\nutility: 5\nsubmitter: abc\n", func(j *File) bool {
			return j.MaxNodes == 64 && j.MinVRAMMiB == 81920 && j.Aggregation == "median" && j.Utility == 5 && j.Submitter == "abc"
		}},
		{"gspo:\n  importance_sampling_level: token\n  beta: 0\n  lora_alpha: 8.5\n  learning_rate: 1e-4\n  use_4bit: false\n  warmup_steps: 0\n", func(j *File) bool {
			g := j.GSPO
			return j.HasGSPO && g.ImportanceSamplingLevel == "token" && g.Beta == 0 && g.LoRAAlpha == 8.5 && g.LearningRate == 1e-4 &&
				!g.Use4Bit && g.WarmupSteps == 0 && g.GroupSize == 8 && g.LoRARank == 16
		}},
		{"gspo: {}\n", func(j *File) bool { return j.HasGSPO && j.GSPO == DefaultGSPO() }},
		{"gspo:\n  inner_optimizer: adamw\n  outer_optimizer: sgd\n", func(j *File) bool { return j.GSPO == DefaultGSPO() }},
		// num_iterations: the default is stored as 0, its one encoding.
		{"gspo:\n  num_iterations: 2\n", func(j *File) bool { return j.GSPO == DefaultGSPO() && j.GSPO.Iterations() == 2 }},
		{"gspo:\n  num_iterations: 1\n", func(j *File) bool { return j.GSPO.NumIterations == 1 && j.GSPO.Iterations() == 1 }},
		{"gspo:\n  aggregate_interval: 1\n  inner_optimizer: sgd\n  outer_optimizer: adam\n  outer_learning_rate: 1.5e-3\n", func(j *File) bool {
			s := j.Spec()
			return s.Normalise() == nil && s.GSPO.InnerSGD() && s.GSPO.OuterAdam() && s.GSPO.OuterLR == 1.5e-3
		}},
		// An anchor and an alias resolve to the value.
		{"max_nodes: &n 5\ngspo:\n  group_size: *n\n", func(j *File) bool { return j.MaxNodes == 5 && j.GSPO.GroupSize == 5 }},
		// A whole number written as a float is a whole number.
		{"max_nodes: 1e1\n", func(j *File) bool { return j.MaxNodes == 10 }},
	} {
		j, err := parse("j.yaml", []byte(minimalJob+tc.extra), testNow)
		if err != nil {
			t.Errorf("%q: %v", tc.extra, err)
			continue
		}
		if !tc.check(j) {
			t.Errorf("%q: %+v", tc.extra, j)
		}
	}
}

func TestParseJobFileProblems(t *testing.T) {
	for _, tc := range []struct{ extra, want string }{
		{"max_nodes: 2\n", "j.yaml:5: max_nodes: 2 is outside 3..4096"},
		{"min_nodes: 3\n", "j.yaml:5: min_nodes is given twice (first on line 4)"},
		{"max_nodes: 4\n", ""},
		{"gspo:\n  inner_optimizer: lion\n", `gspo.inner_optimizer: "lion" is not one of adamw, sgd`},
		// Settings that contradict each other, at their section's line.
		{"gspo:\n  outer_momentum: 0.5\n", "j.yaml:5: gspo.outer_momentum 0.5 needs gspo.outer_learning_rate > 0"},
		{"gspo:\n  inner_optimizer: sgd\n", "j.yaml:5: gspo.inner_optimizer sgd needs gspo.outer_optimizer adam"},
		{"gspo:\n  num_iterations: 0\n", "j.yaml:6: gspo.num_iterations: 0 is outside 1..64"},
		{"epochs: 1\n", "given twice"},
		{"utility: 0\n", "j.yaml:5: utility: 0 is outside 1..1000000"},
		{"min_vram_mib: -1\n", "min_vram_mib: -1 is outside 0..16777216"},
		{"min_vram_mib: 24GiB\n", `min_vram_mib: want a whole number, got "24GiB"`},
		{"max_nodes: 3.5\n", `max_nodes: want a whole number, got "3.5"`},
		{"max_nodes: 99999999999999999999\n", "max_nodes: want a whole number"},
		{"deadline: 0s\n", "deadline: 0s is not in the future"},
		{"deadline: tomorrow\n", `deadline: cannot read "tomorrow"`},
		{"deadline: 99999999d\n", `deadline: cannot read "99999999d"`},
		{"deadline:\n", "deadline: want a string, got empty value"},
		{"submitter: [a, b]\n", "submitter: want a string, got list"},
		{"submitter: " + strings.Repeat("x", 129) + "\n", "submitter: 129 bytes, at most 128"},
		{"gspo: 3\n", "gspo: want a mapping of GSPO settings"},
		{"gspo:\n  beta: -0.1\n", "j.yaml:6: gspo.beta: -0.1 is negative"},
		{"gspo:\n  beta: .inf\n", "gspo.beta: want a finite number"},
		{"gspo:\n  beta: high\n", `gspo.beta: want a number, got "high"`},
		{"gspo:\n  lora_alpha: 0\n", "gspo.lora_alpha: 0 must be above 0"},
		{"gspo:\n  lora_rank: 0\n", "gspo.lora_rank: 0 is outside 1..4096"},
		{"gspo:\n  weight_decay: 2\n", "gspo.weight_decay: 2 is outside [0, 1]"},
		{"gspo:\n  learning_rate: 0\n", "gspo.learning_rate: 0 is outside (0, 1]"},
		{"gspo:\n  max_seq_len: 0\n", "gspo.max_seq_len: 0 is outside 1..1048576"},
		{"gspo:\n  gradient_accumulation_steps: 0\n", "gspo.gradient_accumulation_steps: 0 is outside 1..65536"},
		{"gspo:\n  aggregate_interval: 0\n", "gspo.aggregate_interval: 0 is outside 1..1000000"},
		{"gspo:\n  warmup_steps: -1\n", "gspo.warmup_steps: -1 is outside 0..1000000000"},
		{"gspo:\n  use_4bit: 1\n", `gspo.use_4bit: want true or false, got "1"`},
		{"gspo:\n  lora_rank: 8\n  lora_rank: 16\n", "j.yaml:7: gspo.lora_rank is given twice (first on line 6)"},
		{"gspo:\n  group_size: 8\n  grup_size: 8\n", `j.yaml:7: unknown key "gspo.grup_size" (did you mean "gspo.group_size"?); known keys in gspo:`},
		{"min_vram: 1\n", `unknown key "min_vram" (did you mean "min_vram_mib"?)`},
		{"colour: blue\n", `j.yaml:5: unknown key "colour"; known keys: model,`},
		{"<<: {a: 1}\n", "merge keys (<<) are not supported"},
		{"? [a]\n: 1\n", "keys are plain words"},
	} {
		_, err := parse("j.yaml", []byte(minimalJob+tc.extra), testNow)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.extra, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.extra, err, tc.want)
		}
	}
}

func TestParseJobFileModelNames(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"model: ''\ndataset: d\nepochs: 1\nmin_nodes: 3\n", "j.yaml:1: model is empty"},
		{"model: m\ndataset: \"a\\x01b\"\nepochs: 1\nmin_nodes: 3\n", "j.yaml:2: dataset contains a control character"},
		{"model: " + strings.Repeat("m", 257) + "\ndataset: d\nepochs: 1\nmin_nodes: 3\n", "model: 257 bytes, at most 256"},
		{"model:\n  name: m\ndataset: d\nepochs: 1\nmin_nodes: 3\n", "j.yaml:2: model: want a string, got mapping"},
	} {
		if _, err := parse("j.yaml", []byte(tc.file), testNow); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.file, err, tc.want)
		}
	}
}

// Problems are listed in line order, all of them up to a bound.
func TestParseJobFileManyProblems(t *testing.T) {
	var b strings.Builder
	b.WriteString(minimalJob)
	for i := range 30 {
		b.WriteString("key" + strings.Repeat("x", i) + ": 1\n")
	}
	_, err := parse("j.yaml", []byte(b.String()), testNow)
	var je *FileError
	if !errors.As(err, &je) || len(je.Problems) != maxProblems+1 || !strings.Contains(je.Problems[maxProblems], "and 10 more") ||
		!strings.HasPrefix(je.Problems[0], "j.yaml:5:") || !strings.HasPrefix(je.Problems[1], "j.yaml:6:") {
		t.Fatalf("%v", err)
	}
}

func TestClosestKey(t *testing.T) {
	known := []string{"model", "dataset", "epochs", "min_nodes", "max_nodes", "min_vram_mib"}
	for in, want := range map[string]string{"epoch": "epochs", "Model": "model", "data_set": "dataset", "min_vram": "min_vram_mib", "minnodes": "min_nodes", "colour": "", "x": ""} {
		if got := closest(in, known); got != want {
			t.Errorf("closest(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzParseJobFile: any input is parsed or refused with a message, never a
// panic, and what is accepted is within hanzod's limits.
func FuzzParseJobFile(f *testing.F) {
	for _, ex := range []string{exampleJob, builtinJob} {
		if b, err := os.ReadFile(ex); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(minimalJob))
	f.Add([]byte(minimalBuiltin + "steps_per_epoch: 10\nbyzantine: 0\nseed: 3\nspot_check_bp: 0\n"))
	f.Add([]byte(minimalJob + "gspo:\n  beta: &b 0.5\n  lora_alpha: *b\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("model: [\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := parse("f.yaml", data, testNow)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		f := &Fields
		switch {
		case j.Model == "" || len(j.Model) > f.Model.MaxLen || j.Dataset == "" || len(j.Dataset) > f.Dataset.MaxLen:
			t.Fatalf("names: %+v", j)
		case !f.Epochs.Contains(int64(j.Epochs)) || !f.MinNodes.Contains(int64(j.MinNodes)) || j.MaxNodes < j.MinNodes || !f.MaxNodes.Contains(int64(j.MaxNodes)):
			t.Fatalf("counts: %+v", j)
		case !f.Utility.Contains(int64(j.Utility)) || j.MinVRAMMiB > uint64(f.MinVRAMMiB.Max) || (j.Deadline != nil && !j.Deadline.After(testNow)):
			t.Fatalf("spec: %+v", j)
		case j.GSPO.GroupSize < 2 || j.GSPO.LoRARank < 1 || !(j.GSPO.LearningRate > 0) || j.GSPO.Beta < 0:
			t.Fatalf("gspo: %+v", j.GSPO)
		case !f.StepsPerEpoch.Contains(int64(j.StepsPerEpoch)) || j.StepsPerEpoch%j.GSPO.AggregateInterval != 0 ||
			!f.PromptsPerStep.Contains(int64(j.PromptsPerStep)) || !f.SpotCheckBP.Contains(int64(j.SpotCheckBP)) ||
			j.Byzantine < 0 || 3*j.Byzantine >= j.MinNodes || (j.Byzantine > 0 && j.Aggregation == "mean"):
			t.Fatalf("run: %+v", j)
		}
		// What the parser accepts, hanzod accepts unchanged.
		s := j.Spec()
		want := s
		if err := s.Normalise(); err != nil || s != want {
			t.Fatalf("hanzod refuses or changes %+v: %v (%+v)", want, err, s)
		}
		if back := FromProto(ToProto(want)); back != want {
			t.Fatalf("wire round trip: %+v, want %+v", back, want)
		}
	})
}

func TestParseJobFileRun(t *testing.T) {
	// Defaults: one sync per epoch, the trainer's prompts, 10% replayed.
	j, err := parse("j.yaml", []byte(minimalJob), testNow)
	if err != nil {
		t.Fatal(err)
	}
	if j.StepsPerEpoch != 50 || j.PromptsPerStep != 16 || j.Seed != 0 || j.Byzantine != 0 || j.SpotCheckBP != 1000 {
		t.Fatalf("defaults: %+v", j)
	}
	if s := ToProto(j.Spec()); s.StepsPerEpoch != 50 || s.PromptsPerStep != 16 || s.SpotCheckBp != 1000 || s.Byzantine != 0 || s.Seed != 0 {
		t.Fatalf("spec: %+v", s)
	}
	for _, tc := range []struct {
		extra string
		check func(*File) bool
	}{
		{"steps_per_epoch: 150\nprompts_per_step: 4\nseed: 18446744073709551615\n", func(j *File) bool {
			s := ToProto(j.Spec())
			return j.StepsPerEpoch == 150 && j.PromptsPerStep == 4 && j.Seed == math.MaxUint64 && s.StepsPerEpoch == 150 && s.PromptsPerStep == 4 && s.Seed == math.MaxUint64
		}},
		{"seed: 1e3\n", func(j *File) bool { return j.Seed == 1000 }},
		{"gspo:\n  aggregate_interval: 7\n", func(j *File) bool { return j.StepsPerEpoch == 7 }},
		// 0 in the file is none; hanzod writes none as -1 (its 0 is the default).
		{"spot_check_bp: 0\n", func(j *File) bool { return j.SpotCheckBP == 0 && ToProto(j.Spec()).SpotCheckBp == -1 }},
		{"spot_check_bp: 10000\n", func(j *File) bool { return j.SpotCheckBP == 10000 && ToProto(j.Spec()).SpotCheckBp == 10000 }},
		// Byzantine workers: the aggregation defaults to median.
		{"min_nodes: 4\nbyzantine: 1\n", func(j *File) bool {
			return j.Byzantine == 1 && j.Aggregation == "median" && ToProto(j.Spec()).Byzantine == 1
		}},
		{"min_nodes: 7\nbyzantine: 2\naggregation: trimmed-mean\n", func(j *File) bool { return j.Aggregation == "trimmed-mean" }},
		{"byzantine: 0\naggregation: mean\n", func(j *File) bool { return j.Aggregation == "mean" }},
	} {
		file := minimalJob + tc.extra
		if strings.Contains(tc.extra, "min_nodes") {
			file = strings.Replace(file, "min_nodes: 3\n", "", 1)
		}
		j, err := parse("j.yaml", []byte(file), testNow)
		if err != nil {
			t.Errorf("%q: %v", tc.extra, err)
			continue
		}
		if !tc.check(j) {
			t.Errorf("%q: %+v", tc.extra, j)
		}
	}
	// The dry-run JSON reads back to the same job.
	j, err = parse("j.yaml", []byte(minimalJob+"steps_per_epoch: 100\nprompts_per_step: 3\nseed: 9\nspot_check_bp: 250\nmin_vram_mib: 5\n"), testNow)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	var back File
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	back.HasGSPO = j.HasGSPO
	if !reflect.DeepEqual(&back, j) {
		t.Fatalf("round trip: %+v, want %+v", back, *j)
	}
}

func TestParseJobFileRunProblems(t *testing.T) {
	for _, tc := range []struct{ extra, want string }{
		{"steps_per_epoch: 0\n", "j.yaml:5: steps_per_epoch: 0 is outside 1..1000000 (training steps per epoch, a multiple of gspo.aggregate_interval)"},
		{"steps_per_epoch: 75\n", "j.yaml:5: steps_per_epoch: 75 is not a multiple of gspo.aggregate_interval 50 (an epoch is whole syncs); make it 50 or 100"},
		{"steps_per_epoch: 20\n", "make it 50"},
		{"steps_per_epoch: \"50\"\n", `steps_per_epoch: want a whole number, got "50" (remove the quotes)`},
		{"prompts_per_step: 0\n", "prompts_per_step: 0 is outside 1..65536"},
		{"prompts_per_step: 65537\n", "prompts_per_step: 65537 is outside 1..65536"},
		{"seed: -1\n", `seed: want a whole number from 0 to 18446744073709551615, got "-1" (it is 0 or more)`},
		{"seed: 18446744073709551616\n", "seed: want a whole number"},
		{"seed: \"7\"\n", `seed: want a whole number from 0 to 18446744073709551615, got "7" (remove the quotes)`},
		{"seed: 1.5\n", `seed: want a whole number`},
		{"seed: [1]\n", "seed: want a whole number, got list"},
		{"byzantine: -1\n", "byzantine: -1 is outside 0..1365"},
		{"byzantine: 1\n", "j.yaml:5: byzantine: 1 needs min_nodes above 3 (f < n/3), min_nodes is 3; raise min_nodes or declare fewer"},
		{"byzantine: 1\naggregation: mean\n", "j.yaml:5: byzantine: 1 needs aggregation median or trimmed-mean (a mean cannot defend against any Byzantine worker); change aggregation on line 6"},
		{"spot_check_bp: -1\n", "spot_check_bp: -1 is outside 0..10000 (basis points of deltas replayed: 1000 is 10%, 0 none)"},
		{"spot_check_bp: 10001\n", "spot_check_bp: 10001 is outside 0..10000"},
		{"spot_check: 5\n", `unknown key "spot_check" (did you mean "spot_check_bp"?)`},
		{"step_per_epoch: 5\n", `unknown key "step_per_epoch" (did you mean "steps_per_epoch"?)`},
	} {
		_, err := parse("j.yaml", []byte(minimalJob+tc.extra), testNow)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.extra, err, tc.want)
		}
	}
}

func TestReadFileLimit(t *testing.T) {
	big := minimalJob + "# " + strings.Repeat("x", MaxFileBytes) + "\n"
	if _, err := ReadFile("big.yaml", strings.NewReader(big), testNow, nil); err == nil || !strings.Contains(err.Error(), "big.yaml: larger than") {
		t.Fatalf("oversized file: %v", err)
	}
	if j, err := ReadFile("j.yaml", strings.NewReader(minimalJob), testNow, nil); err != nil || j.Model != "m" {
		t.Fatalf("%+v %v", j, err)
	}
}

// A model's own check is reported on the model line, once the rest of
// the file is sound, with the spec the file makes.
func TestParseFileCheck(t *testing.T) {
	var got Spec
	check := func(s Spec) error { got = s; return errors.New("no such thing") }
	_, err := ParseFile("j.yaml", []byte("dataset: d\nmodel: m\nepochs: 1\nmin_nodes: 3\nspot_check_bp: 0\n"), testNow, check)
	if err == nil || err.Error() != "j.yaml:2: model: m: no such thing" {
		t.Fatalf("%v", err)
	}
	if got.Model != "m" || got.SpotCheckBP != -1 || got.GSPO != DefaultGSPO() || got.StepsPerEpoch != 50 {
		t.Fatalf("check saw %+v", got)
	}
	got = Spec{}
	if _, err := ParseFile("j.yaml", []byte("model: m\n"), testNow, check); err == nil || got.Model != "" {
		t.Fatalf("check ran on a broken file: %v", err)
	}
}
