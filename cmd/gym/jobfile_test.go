package main

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/zooai/gym/jobconf"
	"github.com/zooai/gym/jobspec"
	"github.com/zooai/gym/trainer"
)

var testNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

const minimalJob = "model: m\ndataset: d\nepochs: 1\nmin_nodes: 3\n"

func TestParseJobFileDefaults(t *testing.T) {
	j, err := parseJobFile("j.yaml", []byte(minimalJob), testNow)
	if err != nil {
		t.Fatal(err)
	}
	if j.MaxNodes != 3 || j.Aggregation != "mean" || j.Utility != 1 || j.Deadline != nil || j.HasGSPO || j.GSPO != defaultGSPO() {
		t.Fatalf("defaults: %+v", j)
	}
	s := j.spec()
	if s.Model != "m" || s.Dataset != "d" || s.Epochs != 1 || s.MinNodes != 3 || s.MaxNodes != 3 || s.DeadlineUnixMs != 0 || s.Aggregation != "mean" {
		t.Fatalf("spec: %+v", s)
	}
}

func TestParseJobFileValues(t *testing.T) {
	for _, tc := range []struct {
		extra string
		check func(*jobFile) bool
	}{
		{"deadline: 36h\n", func(j *jobFile) bool { return j.Deadline.Equal(testNow.Add(36 * time.Hour)) }},
		{"deadline: 2d\n", func(j *jobFile) bool { return j.Deadline.Equal(testNow.Add(48 * time.Hour)) }},
		{"deadline: 2027-01-02T03:04:05.678+01:00\n", func(j *jobFile) bool {
			return j.Deadline.Equal(time.Date(2027, 1, 2, 2, 4, 5, 678e6, time.UTC)) && j.spec().DeadlineUnixMs == j.Deadline.UnixMilli()
		}},
		{`deadline: "2027-01-02T00:00:00Z"` + "\n", func(j *jobFile) bool { return j.Deadline.Year() == 2027 }},
		{"max_nodes: 64\nmin_vram_mib: 81920\naggregation: median\nutility: 5\nsubmitter: abc\n", func(j *jobFile) bool {
			return j.MaxNodes == 64 && j.MinVRAMMiB == 81920 && j.Aggregation == "median" && j.Utility == 5 && j.Submitter == "abc"
		}},
		{"gspo:\n  importance_sampling_level: token\n  beta: 0\n  lora_alpha: 8.5\n  learning_rate: 1e-4\n  use_4bit: false\n  warmup_steps: 0\n", func(j *jobFile) bool {
			g := j.GSPO
			return j.HasGSPO && g.ImportanceSamplingLevel == "token" && g.Beta == 0 && g.LoRAAlpha == 8.5 && g.LearningRate == 1e-4 &&
				!g.Use4Bit && g.WarmupSteps == 0 && g.GroupSize == 8 && g.LoRARank == 16
		}},
		{"gspo: {}\n", func(j *jobFile) bool { return j.HasGSPO && j.GSPO == defaultGSPO() }},
		// An anchor and an alias resolve to the value.
		{"max_nodes: &n 5\ngspo:\n  group_size: *n\n", func(j *jobFile) bool { return j.MaxNodes == 5 && j.GSPO.GroupSize == 5 }},
		// A whole number written as a float is a whole number.
		{"max_nodes: 1e1\n", func(j *jobFile) bool { return j.MaxNodes == 10 }},
	} {
		j, err := parseJobFile("j.yaml", []byte(minimalJob+tc.extra), testNow)
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
		_, err := parseJobFile("j.yaml", []byte(minimalJob+tc.extra), testNow)
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
		if _, err := parseJobFile("j.yaml", []byte(tc.file), testNow); err == nil || !strings.Contains(err.Error(), tc.want) {
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
	_, err := parseJobFile("j.yaml", []byte(b.String()), testNow)
	var je *jobFileError
	if !errors.As(err, &je) || len(je.problems) != maxProblems+1 || !strings.Contains(je.problems[maxProblems], "and 10 more") ||
		!strings.HasPrefix(je.problems[0], "j.yaml:5:") || !strings.HasPrefix(je.problems[1], "j.yaml:6:") {
		t.Fatalf("%v", err)
	}
}

func TestReadJobFileLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.yaml")
	os.WriteFile(path, []byte(minimalJob+"# "+strings.Repeat("x", maxJobFileBytes)+"\n"), 0o644)
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
		j, err := parseJobFile("f.yaml", data, testNow)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		switch {
		case j.Model == "" || len(j.Model) > maxJobName || j.Dataset == "" || len(j.Dataset) > maxJobName:
			t.Fatalf("names: %+v", j)
		case j.Epochs < 1 || j.Epochs > maxJobEpochs || j.MinNodes < minJobNodes || j.MaxNodes < j.MinNodes || j.MaxNodes > maxJobNodes:
			t.Fatalf("counts: %+v", j)
		case j.Utility < 1 || j.MinVRAMMiB > maxJobVRAMMiB || (j.Deadline != nil && !j.Deadline.After(testNow)):
			t.Fatalf("spec: %+v", j)
		case j.GSPO.GroupSize < 2 || j.GSPO.LoRARank < 1 || !(j.GSPO.LearningRate > 0) || j.GSPO.Beta < 0:
			t.Fatalf("gspo: %+v", j.GSPO)
		case j.StepsPerEpoch < 1 || j.StepsPerEpoch > maxJobSteps || j.StepsPerEpoch%j.GSPO.AggregateInterval != 0 ||
			j.PromptsPerStep < 1 || j.PromptsPerStep > maxJobPrompts || j.SpotCheckBP < 0 || j.SpotCheckBP > maxJobSpotCheck ||
			j.Byzantine < 0 || 3*j.Byzantine >= j.MinNodes || (j.Byzantine > 0 && j.Aggregation == "mean"):
			t.Fatalf("run: %+v", j)
		}
	})
}

const minimalBuiltin = "model: builtin\ndataset: sort\nepochs: 1\nmin_nodes: 3\ngspo:\n  aggregate_interval: 5\n  gradient_accumulation_steps: 1\n"

func TestParseJobFileRun(t *testing.T) {
	// Defaults: one sync per epoch, the trainer's prompts, 10% replayed.
	j, err := parseJobFile("j.yaml", []byte(minimalJob), testNow)
	if err != nil {
		t.Fatal(err)
	}
	if j.StepsPerEpoch != 50 || j.PromptsPerStep != 16 || j.Seed != 0 || j.Byzantine != 0 || j.SpotCheckBP != 1000 {
		t.Fatalf("defaults: %+v", j)
	}
	if s := j.spec(); s.StepsPerEpoch != 50 || s.PromptsPerStep != 16 || s.SpotCheckBp != 1000 || s.Byzantine != 0 || s.Seed != 0 {
		t.Fatalf("spec: %+v", s)
	}
	if d := trainer.DefaultConfig().PromptsPerStep; d != defaultPromptsPerStep {
		t.Fatalf("the trainer's default prompts_per_step is %d, the job file's %d", d, defaultPromptsPerStep)
	}
	for _, tc := range []struct {
		extra string
		check func(*jobFile) bool
	}{
		{"steps_per_epoch: 150\nprompts_per_step: 4\nseed: 18446744073709551615\n", func(j *jobFile) bool {
			s := j.spec()
			return j.StepsPerEpoch == 150 && j.PromptsPerStep == 4 && j.Seed == math.MaxUint64 && s.StepsPerEpoch == 150 && s.PromptsPerStep == 4 && s.Seed == math.MaxUint64
		}},
		{"seed: 1e3\n", func(j *jobFile) bool { return j.Seed == 1000 }},
		{"gspo:\n  aggregate_interval: 7\n", func(j *jobFile) bool { return j.StepsPerEpoch == 7 }},
		// 0 in the file is none; hanzod writes none as -1 (its 0 is the default).
		{"spot_check_bp: 0\n", func(j *jobFile) bool { return j.SpotCheckBP == 0 && j.spec().SpotCheckBp == -1 }},
		{"spot_check_bp: 10000\n", func(j *jobFile) bool { return j.SpotCheckBP == 10000 && j.spec().SpotCheckBp == 10000 }},
		// Byzantine workers: the aggregation defaults to median.
		{"min_nodes: 4\nbyzantine: 1\n", func(j *jobFile) bool { return j.Byzantine == 1 && j.Aggregation == "median" && j.spec().Byzantine == 1 }},
		{"min_nodes: 7\nbyzantine: 2\naggregation: trimmed-mean\n", func(j *jobFile) bool { return j.Aggregation == "trimmed-mean" }},
		{"byzantine: 0\naggregation: mean\n", func(j *jobFile) bool { return j.Aggregation == "mean" }},
	} {
		file := minimalJob + tc.extra
		if strings.Contains(tc.extra, "min_nodes") {
			file = strings.Replace(file, "min_nodes: 3\n", "", 1)
		}
		j, err := parseJobFile("j.yaml", []byte(file), testNow)
		if err != nil {
			t.Errorf("%q: %v", tc.extra, err)
			continue
		}
		if !tc.check(j) {
			t.Errorf("%q: %+v", tc.extra, j)
		}
	}
	// The dry-run JSON reads back to the same job.
	j, err = parseJobFile("j.yaml", []byte(minimalJob+"steps_per_epoch: 100\nprompts_per_step: 3\nseed: 9\nspot_check_bp: 250\nmin_vram_mib: 5\n"), testNow)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	var back jobFile
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
		_, err := parseJobFile("j.yaml", []byte(minimalJob+tc.extra), testNow)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.extra, err, tc.want)
		}
	}
}

// The built-in model's own rules are checked before anything is sent.
func TestParseJobFileBuiltin(t *testing.T) {
	if _, err := parseJobFile("j.yaml", []byte(minimalBuiltin), testNow); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, want string }{
		{strings.Replace(minimalBuiltin, "sort", "gsm8k", 1), `j.yaml:1: model: builtin: the built-in trainer cannot run these settings: task: unknown task "gsm8k"`},
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

// examples/builtin-job.yaml is gym up's job: the trainer's defaults and
// gym up's flag defaults.
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
	c := trainer.DefaultConfig()
	want := gspoConfig{ImportanceSamplingLevel: c.ImportanceSamplingLevel, Beta: c.Beta, GroupSize: c.GroupSize, AggregateInterval: flag("interval"),
		LoRARank: c.LoRARank, LoRAAlpha: c.LoRAAlpha, MaxSeqLen: c.MaxSeqLen, GradientAccumulationSteps: c.GradientAccumulationSteps,
		LearningRate: c.LearningRate, WarmupSteps: c.WarmupSteps, WeightDecay: c.WeightDecay}
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
