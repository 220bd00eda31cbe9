package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/zooai/gym/internal/pyenv"
	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/prng"
	"github.com/zooai/gym/model/rollout"
	"github.com/zooai/gym/model/task"
)

// sampled is a real batch: 3 addition prompts × 4 completions from the
// built-in base.
func sampled(t testing.TB) *Set {
	t.Helper()
	base, err := basemodel.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	md, err := llama.New(base.Weights, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	probs := task.NewSplit(task.Addition{Digits: 2}, 10).Batch(7, 0, 1, 3)
	c := rollout.Config{Temperature: 1, TopK: 0}
	ro, err := rollout.Generate(md, base.Tokenizer, probs, 4, c, prng.New(7, 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	return FromRollouts(Header{Model: "builtin", Dataset: "addition", Seed: 7, Stream: []uint64{1, 2}, Temperature: 1,
		Vocab: base.Tokenizer.VocabSize()}, ro)
}

func encode(t testing.TB, s *Set) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, s); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestRoundTrip: a sampled batch written and read back is the same set,
// log-probabilities bit for bit (float32 through JSON's shortest form).
func TestRoundTrip(t *testing.T) {
	s := sampled(t)
	raw := encode(t, s)
	got, err := Read(bytes.NewReader(raw), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("read back differs:\n%+v\n%+v", got.Header, s.Header)
	}
	for i := range s.Seqs {
		for k, lp := range s.Seqs[i].LogProbs {
			if math.Float32bits(lp) != math.Float32bits(got.Seqs[i].LogProbs[k]) {
				t.Fatalf("sequence %d token %d: %v → %v", i, k, lp, got.Seqs[i].LogProbs[k])
			}
		}
	}
	if lines := bytes.Count(raw, []byte("\n")); lines != 1+12 {
		t.Errorf("%d lines, want a header and 12 sequences", lines)
	}
	if s.Tokens() == 0 || s.MeanReward() < 0 || s.MeanReward() > 1 {
		t.Errorf("tokens %d, mean reward %v", s.Tokens(), s.MeanReward())
	}
	// Without a trailing newline it reads the same.
	if _, err := Read(bytes.NewReader(bytes.TrimSuffix(raw, []byte("\n"))), DefaultLimits()); err != nil {
		t.Errorf("without the final newline: %v", err)
	}
}

// TestRefuses: every kind of bad file is refused with ErrFormat naming what.
func TestRefuses(t *testing.T) {
	s := sampled(t)
	raw := string(encode(t, s))
	lines := strings.Split(strings.TrimSuffix(raw, "\n"), "\n")
	join := func(ls []string) string { return strings.Join(ls, "\n") + "\n" }
	with := func(i int, old, new string) string {
		ls := append([]string(nil), lines...)
		if !strings.Contains(ls[i], old) {
			t.Fatalf("line %d has no %q: %s", i, old, ls[i])
		}
		ls[i] = strings.Replace(ls[i], old, new, 1)
		return join(ls)
	}
	cases := map[string]struct{ file, want string }{
		"empty":           {"", "empty file"},
		"no sequences":    {lines[0] + "\n", "0 sequences"},
		"one missing":     {join(lines[:len(lines)-1]), "11 sequences"},
		"one extra":       {join(append(append([]string(nil), lines...), lines[len(lines)-1])), "more than"},
		"swapped":         {join(append([]string{lines[0], lines[2], lines[1]}, lines[3:]...)), "want prompt 0 sample 0"},
		"unknown field":   {with(0, `"format"`, `"bogus":1,"format"`), "unknown field"},
		"wrong format":    {with(0, Format, "other"), "format"},
		"future version":  {with(0, `"version":1`, `"version":2`), "version 2"},
		"no vocab":        {with(0, `"vocab":`, `"vocab":0,"x":`), "unknown field"},
		"big group":       {with(0, `"group_size":4`, `"group_size":4000000`), "sequences"},
		"id out of vocab": {with(1, `"prompt_ids":[`, `"prompt_ids":[99999,`), "outside the vocabulary"},
		"lp count":        {with(1, `"logprobs":[`, `"logprobs":[-1,`), "log-probabilities for"},
		"positive lp":     {with(1, `"logprobs":[`, `"logprobs":[0.5,`), ""},
		"two values":      {with(1, `}`, `}{}`), ""},
		"blank line":      {join(append([]string{lines[0], ""}, lines[1:]...)), "empty"},
		"prompt differs":  {with(2, `"prompt_ids":[`, `"prompt_ids":[1,`), "prompt ids differ"},
		"not json":        {"DELTA\x00\x01\n", ""},
	}
	for name, c := range cases {
		_, err := Read(strings.NewReader(c.file), DefaultLimits())
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrFormat saying %q", name, err, c.want)
		}
	}
	// A NaN reward cannot be written; a long line is refused before it is
	// held whole.
	bad := sampled(t)
	bad.Seqs[3].Reward = math.NaN()
	if err := Write(&bytes.Buffer{}, bad); !errors.Is(err, ErrFormat) {
		t.Errorf("NaN reward written: %v", err)
	}
	lim := DefaultLimits()
	lim.MaxLine = 64
	if _, err := Read(strings.NewReader(raw), lim); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "longer than 64") {
		t.Errorf("long line: %v", err)
	}
}

func FuzzRead(f *testing.F) {
	s := sampled(f)
	f.Add(encode(f, s))
	es, _ := episodeSet(f)
	f.Add(encode(f, es))
	f.Add([]byte(`{"format":"zoo-gym-traces","version":1,"model":"m","dataset":"d","seed":0,"temperature":1,"top_k":0,"max_new_tokens":0,"prompts":1,"group_size":1,"vocab":5}` + "\n" +
		`{"prompt":0,"sample":0,"prompt_text":"","prompt_ids":[1],"completion":"","completion_ids":[2],"logprobs":[-0.5],"reward":1}`))
	lim := Limits{MaxLine: 1 << 16, MaxSequences: 64, MaxTokens: 256}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Read(bytes.NewReader(b), lim)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error without ErrFormat: %v", err)
			}
			return
		}
		// What reads writes, and reads back the same.
		var out bytes.Buffer
		if err := Write(&out, s); err != nil {
			t.Fatalf("a set Read accepted does not write: %v", err)
		}
		again, err := Read(&out, lim)
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// TestBundle: sets written one after another read back the same; a bundle
// cut inside a set, or a file with trailing sequences, is refused; Read
// refuses a bundle of two (it wants one set).
func TestBundle(t *testing.T) {
	a := sampled(t)
	b := sampled(t)
	b.Header.Step, b.Header.Policy = 2, "ab"
	var buf bytes.Buffer
	if err := WriteBundle(&buf, []*Set{a, b}); err != nil {
		t.Fatal(err)
	}
	raw := buf.Bytes()
	got, err := ReadBundle(bytes.NewReader(raw), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !reflect.DeepEqual(got[0], a) || !reflect.DeepEqual(got[1], b) {
		t.Fatalf("bundle read back differs: %d sets", len(got))
	}
	if _, err := Read(bytes.NewReader(raw), DefaultLimits()); !errors.Is(err, ErrFormat) {
		t.Errorf("Read of a two-set bundle: %v", err)
	}
	cut := raw[:len(raw)-len(raw)/5]
	cut = cut[:bytes.LastIndexByte(cut, '\n')+1]
	if _, err := ReadBundle(bytes.NewReader(cut), DefaultLimits()); !errors.Is(err, ErrFormat) {
		t.Errorf("cut bundle: %v", err)
	}
	if _, err := ReadBundle(bytes.NewReader(nil), DefaultLimits()); !errors.Is(err, ErrFormat) {
		t.Errorf("empty bundle: %v", err)
	}
	if err := WriteBundle(&buf, nil); !errors.Is(err, ErrFormat) {
		t.Errorf("writing no sets: %v", err)
	}
	// Rollouts is FromRollouts' inverse.
	back := FromRollouts(a.Header, a.Rollouts())
	if !reflect.DeepEqual(back, a) {
		t.Errorf("FromRollouts(Rollouts()) differs")
	}
}

func FuzzReadBundle(f *testing.F) {
	s := sampled(f)
	var buf bytes.Buffer
	if err := WriteBundle(&buf, []*Set{s, s}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	lim := Limits{MaxLine: 1 << 16, MaxSequences: 64, MaxTokens: 256}
	f.Fuzz(func(t *testing.T, b []byte) {
		sets, err := ReadBundle(bytes.NewReader(b), lim)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error without ErrFormat: %v", err)
			}
			return
		}
		var out bytes.Buffer
		if err := WriteBundle(&out, sets); err != nil {
			t.Fatalf("a bundle ReadBundle accepted does not write: %v", err)
		}
		again, err := ReadBundle(&out, lim)
		if err != nil || !reflect.DeepEqual(again, sets) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// TestParquet: a sampled batch written as Parquet reads back the same set
// (log-probabilities bit for bit); a file without the header metadata, or
// with rows the header does not announce, is refused.
func TestParquet(t *testing.T) {
	s := sampled(t)
	s.Seqs[1].RewardFailed = true
	var b bytes.Buffer
	if err := WriteParquet(&b, s); err != nil {
		t.Fatal(err)
	}
	got, err := ReadParquet(bytes.NewReader(b.Bytes()), int64(b.Len()), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("read back differs")
	}
	var plain bytes.Buffer
	if err := parquet.Write(&plain, []parquetRow{{Prompt: 0}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadParquet(bytes.NewReader(plain.Bytes()), int64(plain.Len()), DefaultLimits()); !errors.Is(err, ErrFormat) {
		t.Errorf("no header: %v", err)
	}
	short := *s
	short.Header.Prompts++
	h, _ := json.Marshal(short.Header)
	var extra bytes.Buffer
	if err := parquet.Write(&extra, []parquetRow{{Prompt: 0}}, parquet.KeyValueMetadata(ParquetKey, string(h))); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadParquet(bytes.NewReader(extra.Bytes()), int64(extra.Len()), DefaultLimits()); !errors.Is(err, ErrFormat) {
		t.Errorf("rows the header does not announce: %v", err)
	}
	if _, err := ReadParquet(bytes.NewReader([]byte("PAR1 not really")), 15, DefaultLimits()); !errors.Is(err, ErrFormat) {
		t.Errorf("garbage: %v", err)
	}
}

func FuzzReadParquet(f *testing.F) {
	s := sampled(f)
	var b bytes.Buffer
	if err := WriteParquet(&b, s); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	lim := Limits{MaxLine: 1 << 16, MaxSequences: 64, MaxTokens: 256}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ReadParquet(bytes.NewReader(data), int64(len(data)), lim)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error without ErrFormat: %v", err)
			}
			return
		}
		var out bytes.Buffer
		if err := WriteParquet(&out, s); err != nil {
			t.Fatalf("a set ReadParquet accepted does not write: %v", err)
		}
		again, err := ReadParquet(bytes.NewReader(out.Bytes()), int64(out.Len()), lim)
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// TestParquetPyarrow: pyarrow reads a Parquet trace file: the rows, the
// lists and the header in the metadata.
func TestParquetPyarrow(t *testing.T) {
	py := pyenv.Require(t, "pyarrow")
	s := sampled(t)
	path := filepath.Join(t.TempDir(), "traces.parquet")
	var b bytes.Buffer
	if err := WriteParquet(&b, s); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, "-c", `import json, sys, pyarrow.parquet as pq
t = pq.read_table(sys.argv[1])
h = json.loads(t.schema.metadata[b"zoo-gym-traces"])
print(json.dumps({"rows": t.num_rows, "group_size": h["group_size"], "ids": t.column("completion_ids")[0].as_py(),
  "lp": t.column("logprobs")[0].as_py(), "reward": t.column("reward")[0].as_py()}))`, path).CombinedOutput()
	if err != nil {
		t.Fatalf("pyarrow: %v\n%s", err, out)
	}
	var got struct {
		Rows, GroupSize int
		IDs             []int
		LP              []float32
		Reward          float64
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(out, &raw); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	json.Unmarshal(raw["rows"], &got.Rows)
	json.Unmarshal(raw["group_size"], &got.GroupSize)
	json.Unmarshal(raw["ids"], &got.IDs)
	json.Unmarshal(raw["lp"], &got.LP)
	json.Unmarshal(raw["reward"], &got.Reward)
	q := s.Seqs[0]
	if got.Rows != len(s.Seqs) || got.GroupSize != s.Header.GroupSize || !reflect.DeepEqual(got.IDs, q.CompletionIDs) ||
		!reflect.DeepEqual(got.LP, q.LogProbs) || got.Reward != q.Reward {
		t.Errorf("pyarrow read %s", out)
	}
}
