package dataset

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/zooai/gym/model/task"
)

type qa struct {
	Question string `parquet:"question"`
	Answer   string `parquet:"answer"`
}

func writeParquet[T any](t testing.TB, path string, rows []T) {
	t.Helper()
	var b bytes.Buffer
	if err := parquet.Write(&b, rows); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeJSONL(t testing.TB, path string, rows []qa) {
	t.Helper()
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "{\"question\": %q, \"answer\": %q, \"extra\": [1, 2]}\n", r.Question, r.Answer)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func rows(n, off int) []qa {
	out := make([]qa, n)
	for i := range out {
		x, y := (i+off)%100, (3*i+off)%100
		out[i] = qa{fmt.Sprintf("%02d+%02d", x, y), fmt.Sprintf("add the tens, then the ones. #### %d", x+y)}
	}
	return out
}

var cfg = Config{Template: "^{question}=", Answer: "answer", Extract: "numeric", HeldOut: "test"}

// JSONL and Parquet of the same rows, in the datasets layout, give the
// same problems.
func TestLoadJSONLAndParquet(t *testing.T) {
	jd, pd := t.TempDir(), t.TempDir()
	writeJSONL(t, filepath.Join(jd, "train.jsonl"), rows(50, 0))
	writeJSONL(t, filepath.Join(jd, "test.jsonl"), rows(10, 7))
	if err := os.Mkdir(filepath.Join(pd, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeParquet(t, filepath.Join(pd, "data", "train-00000-of-00002.parquet"), rows(50, 0)[:20])
	writeParquet(t, filepath.Join(pd, "data", "train-00001-of-00002.parquet"), rows(50, 0)[20:])
	writeParquet(t, filepath.Join(pd, "data", "test-00000-of-00001.parquet"), rows(10, 7))
	j, err := Load(jd, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Load(pd, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Train) != 50 || len(j.Eval) != 10 {
		t.Fatalf("%d train, %d eval", len(j.Train), len(j.Eval))
	}
	if fmt.Sprint(j) != fmt.Sprint(p) {
		t.Fatalf("JSONL and Parquet differ:\n%v\n%v", j, p)
	}
	if want := (task.Problem{Prompt: "^01+03=", Answer: "4"}); j.Train[1] != want {
		t.Fatalf("row 1 = %+v, want %+v", j.Train[1], want)
	}
}

// A single file is the training split; a seeded share is held out, the
// same rows every time, and none is both.
func TestHoldOut(t *testing.T) {
	p := filepath.Join(t.TempDir(), "all.jsonl")
	writeJSONL(t, p, rows(1000, 0))
	c := Config{Prompt: "question", Answer: "answer", HoldOutBP: 1000}
	a, err := Load(p, c)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Load(p, c)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("hold-out not deterministic")
	}
	if len(a.Eval) < 70 || len(a.Eval) > 130 || len(a.Train)+len(a.Eval) != 1000 {
		t.Fatalf("held out %d of 1000 at 10%%", len(a.Eval))
	}
	c.HeldOut, c.HoldOutBP = "test", 0
	if _, err := Load(p, c); !errors.Is(err, ErrLayout) {
		t.Fatalf("a held-out split of one file: %v", err)
	}
}

// Bad input is an error naming the file, the line or row and the field.
func TestBadInput(t *testing.T) {
	type num struct {
		Question string  `parquet:"question"`
		Answer   float64 `parquet:"answer"`
	}
	type opt struct {
		Question string  `parquet:"question"`
		Answer   *string `parquet:"answer,optional"`
	}
	for _, tc := range []struct {
		name, file string
		write      func(string)
		err        error
		want       []string
	}{
		{"malformed line", "train.jsonl", func(p string) {
			os.WriteFile(p, []byte("{\"question\":\"1+2\",\"answer\":\"3\"}\n{\"question\": oops}\n"), 0o644)
		}, ErrFormat, []string{"train.jsonl:2", "not a JSON object"}},
		{"missing field", "train.jsonl", func(p string) {
			os.WriteFile(p, []byte("{\"question\":\"1+2\",\"answer\":\"3\"}\n\n{\"question\":\"1+3\",\"solution\":\"4\"}\n"), 0o644)
		}, ErrField, []string{"train.jsonl:3", `no field "answer"`, `"solution"`}},
		{"wrong type", "train.jsonl", func(p string) {
			os.WriteFile(p, []byte("{\"question\":[1],\"answer\":\"3\"}\n"), 0o644)
		}, ErrFormat, []string{"train.jsonl:1", `field "question"`, "a list"}},
		{"not utf-8", "train.jsonl", func(p string) {
			os.WriteFile(p, []byte("{\"question\":\"\xff\",\"answer\":\"3\"}\n"), 0o644)
		}, ErrFormat, []string{"train.jsonl:1", "UTF-8"}},
		{"long line", "train.jsonl", func(p string) {
			os.WriteFile(p, bytes.Repeat([]byte("x"), MaxLineBytes+10), 0o644)
		}, ErrLimit, []string{"train.jsonl:1"}},
		{"parquet missing column", "train.parquet", func(p string) {
			writeParquet(t, p, []struct {
				Q string `parquet:"q"`
			}{{"1"}})
		}, ErrField, []string{"train.parquet", `no column "question"`, `"q"`}},
		{"parquet wrong type", "train.parquet", func(p string) {
			writeParquet(t, p, []num{{"1+2", 3}})
		}, ErrFormat, []string{"train.parquet", `column "answer"`, "DOUBLE"}},
		{"parquet null", "train.parquet", func(p string) {
			s := "3"
			writeParquet(t, p, []opt{{"1+2", &s}, {"1+3", nil}})
		}, ErrFormat, []string{"train.parquet", "row 1", `column "answer"`, "null"}},
		{"not parquet", "train.parquet", func(p string) {
			os.WriteFile(p, []byte("PAR1 but not really"), 0o644)
		}, ErrFormat, []string{"train.parquet", "not a Parquet file"}},
		{"no number", "train.jsonl", func(p string) {
			os.WriteFile(p, []byte("{\"question\":\"1+2\",\"answer\":\"three\"}\n"), 0o644)
		}, ErrFormat, []string{"row 0", `field "answer"`, "no number"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.write(filepath.Join(dir, tc.file))
			writeJSONL(t, filepath.Join(dir, "test.jsonl"), rows(3, 0))
			_, err := Load(dir, Config{Template: "^{question}=", Answer: "answer", Extract: "numeric", HeldOut: "test"})
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
		})
	}
}

func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{Answer: "a", HoldOutBP: 10}, "prompt field or a template"},
		{Config{Prompt: "q", HoldOutBP: 10}, "no answer field"},
		{Config{Template: "^{q", Answer: "a", HoldOutBP: 10}, "not closed"},
		{Config{Template: "^q}", Answer: "a", HoldOutBP: 10}, "lone }"},
		{Config{Template: "^{}", Answer: "a", HoldOutBP: 10}, "not a field name"},
		{Config{Template: "plain", Answer: "a", HoldOutBP: 10}, "names no field"},
		{Config{Prompt: "q", Answer: "a"}, "hold out 1 to 5000"},
		{Config{Prompt: "q", Answer: "a", HeldOut: "train"}, "is the training split"},
		{Config{Prompt: "q", Answer: "a", HeldOut: "test", HoldOutBP: 5}, "not both"},
		{Config{Prompt: "q", Answer: "a", HoldOutBP: 5, Extract: "boxed"}, "extract"},
		{Config{Prompt: "q", Answer: "a", HoldOutBP: 5, Split: "../x"}, "split"},
	} {
		if err := tc.c.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
	tp, err := ParseTemplate("{{x}} {a}-{b}:{a}")
	if err != nil {
		t.Fatal(err)
	}
	if got := tp.Apply(Row{"a": "1", "b": "2"}); got != "{x} 1-2:1" {
		t.Fatalf("Apply = %q", got)
	}
	if f := tp.Fields(); fmt.Sprint(f) != "[a b]" {
		t.Fatalf("Fields = %v", f)
	}
}

// A split the configuration names and the directory lacks is named with
// the splits it has.
func TestLayout(t *testing.T) {
	dir := t.TempDir()
	writeJSONL(t, filepath.Join(dir, "train.jsonl"), rows(3, 0))
	_, err := Load(dir, Config{Prompt: "question", Answer: "answer", HeldOut: "validation"})
	if !errors.Is(err, ErrLayout) || !strings.Contains(err.Error(), "splits train") {
		t.Fatalf("missing split: %v", err)
	}
	os.Mkdir(filepath.Join(dir, "main"), 0o755)
	writeJSONL(t, filepath.Join(dir, "main", "train.jsonl"), rows(3, 0))
	if _, err := Load(dir, Config{Prompt: "question", Answer: "answer", HoldOutBP: 100}); !errors.Is(err, ErrLayout) {
		t.Fatalf("a split in two directories: %v", err)
	}
}

func FuzzReadJSONL(f *testing.F) {
	f.Add([]byte("{\"question\":\"1+2\",\"answer\":\"3\"}\n{\"question\":\"4\",\"answer\":5}\n"))
	f.Add([]byte("{\"question\":null}\n"))
	f.Add([]byte("\n\n{}\r\n[1]"))
	f.Add([]byte("{\"question\":[{\"role\":\"user\",\"content\":\"hi\"}],\"answer\":\"3\"}\n{\"question\":[{}],\"answer\":1}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := ReadJSONL("f.jsonl", bytes.NewReader(data), []string{"question", "answer"}, 100)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrField) && !errors.Is(err, ErrLimit) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		for _, r := range rows {
			if len(r) != 2 {
				t.Fatalf("row %v", r)
			}
		}
	})
}

func FuzzReadParquet(f *testing.F) {
	var b bytes.Buffer
	if err := parquet.Write(&b, rows(5, 0)); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	if seed, err := os.ReadFile(filepath.Join("testdata", "seed.parquet")); err == nil {
		f.Add(seed)
	}
	f.Add([]byte("PAR1PAR1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := ReadParquet("f.parquet", bytes.NewReader(data), int64(len(data)), []string{"question", "answer"}, 100)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrField) && !errors.Is(err, ErrLimit) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		for _, r := range rows {
			if len(r) != 2 {
				t.Fatalf("row %v", r)
			}
		}
	})
}

// Stage makes a single file the train split of a directory named after
// it, and takes a directory as it is.
func TestStage(t *testing.T) {
	src := filepath.Join(t.TempDir(), "math.jsonl")
	writeJSONL(t, src, rows(20, 0))
	dir, err := Stage(src, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(dir) != "math" {
		t.Errorf("staged as %s", dir)
	}
	a, err := Load(src, Config{Prompt: "question", Answer: "answer", HoldOutBP: 2000})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load(dir, Config{Prompt: "question", Answer: "answer", HoldOutBP: 2000})
	if err != nil || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("the staged directory reads differently: %v", err)
	}
	if got, err := Stage(dir, t.TempDir()); err != nil || got != dir {
		t.Fatalf("a directory staged as %s, %v", got, err)
	}
	if _, err := Stage(t.TempDir(), t.TempDir()); !errors.Is(err, ErrLayout) {
		t.Fatalf("an empty directory: %v", err)
	}
}

// TestConversations reads a field holding a conversation (a JSON list of
// messages) as the prompt: kept as written in Problem.Messages, to be
// rendered by the model's chat template; everywhere else it is refused.
func TestConversations(t *testing.T) {
	dir := t.TempDir()
	lines := `{"messages": [{"role": "system", "content": "Add."}, {"role": "user", "content": "2+3?", "extra": null}], "answer": "5"}
{"messages": [{"role": "user", "content": "1+1?"}], "answer": "2"}
{"messages": "a plain text prompt", "answer": "7"}
`
	if err := os.WriteFile(filepath.Join(dir, "train.jsonl"), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := Load(filepath.Join(dir, "train.jsonl"), Config{Prompt: "messages", Answer: "answer", HoldOutBP: 5000})
	if err != nil {
		t.Fatal(err)
	}
	all := append(d.Train, d.Eval...)
	if len(all) != 3 || !d.Chat() {
		t.Fatalf("%d rows, chat %v", len(all), d.Chat())
	}
	want := `[{"role": "system", "content": "Add."}, {"role": "user", "content": "2+3?", "extra": null}]`
	var found bool
	for _, p := range all {
		switch p.Answer {
		case "5":
			found = true
			if p.Messages != want || p.Prompt != "" {
				t.Errorf("messages %q prompt %q, want %q and no prompt until rendered", p.Messages, p.Prompt, want)
			}
		case "7":
			if p.Messages != "" || p.Prompt != "a plain text prompt" {
				t.Errorf("a text prompt: %+v", p)
			}
		}
	}
	if !found {
		t.Fatal("row 0 missing")
	}
	for _, p := range all {
		if p.Messages == "" {
			continue
		}
		if _, _, err := task.Tokenize(nil, p); err == nil {
			t.Error("an unrendered conversation tokenized")
		}
	}
	if err := d.RenderChat(func(m string) (string, error) { return "<" + m[:2] + ">", nil }); err != nil {
		t.Fatal(err)
	}
	for _, p := range append(d.Train, d.Eval...) {
		if p.Messages != "" && p.Prompt != "<[{>" {
			t.Errorf("rendered prompt %q", p.Prompt)
		}
	}

	for name, c := range map[string]struct {
		line string
		cfg  Config
		want string
	}{
		"in a template":   {`{"m": [{"role": "user", "content": "x"}], "a": "1"}`, Config{Template: "Q: {m}", Answer: "a", HoldOutBP: 5000}, "holds a conversation"},
		"as the answer":   {`{"m": "x", "a": [{"role": "user", "content": "x"}]}`, Config{Prompt: "m", Answer: "a", HoldOutBP: 5000}, "holds a conversation"},
		"ends answered":   {`{"m": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}], "a": "1"}`, Config{Prompt: "m", Answer: "a", HoldOutBP: 5000}, "assistant's turn"},
		"no role":         {`{"m": [{"content": "x"}], "a": "1"}`, Config{Prompt: "m", Answer: "a", HoldOutBP: 5000}, "no role"},
		"empty":           {`{"m": [], "a": "1"}`, Config{Prompt: "m", Answer: "a", HoldOutBP: 5000}, "empty conversation"},
		"not messages":    {`{"m": [1, 2], "a": "1"}`, Config{Prompt: "m", Answer: "a", HoldOutBP: 5000}, "not a conversation"},
		"a NUL-led value": {`{"m": "\u0000conversation\u0000[{\"role\":\"user\"}]", "a": "1"}`, Config{Prompt: "m", Answer: "a", HoldOutBP: 5000}, "NUL"},
	} {
		p := filepath.Join(t.TempDir(), "train.jsonl")
		if err := os.WriteFile(p, []byte(strings.Repeat(c.line+"\n", 8)), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(p, c.cfg)
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrFormat saying %q", name, err, c.want)
		}
	}
}
