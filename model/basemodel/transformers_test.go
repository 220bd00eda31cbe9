package basemodel

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/zooai/gym/internal/pyenv"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/prng"
	"github.com/zooai/gym/model/safetensors"
	"github.com/zooai/gym/model/task"
)

// TestTransformersLoadsExport: the directory Export writes loads in
// transformers (AutoModelForCausalLM as LlamaForCausalLM, AutoTokenizer)
// and in the tokenizers library; their token ids equal ours on task text
// and on text with characters outside the vocabulary, and the model's
// logits on batches of task prompts with answers equal the Go engine's
// within 1e-4.
func TestTransformersLoadsExport(t *testing.T) {
	py := pyenv.Require(t, "torch", "transformers", "tokenizers", "safetensors")
	b, err := builtin()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "base")
	if err := Export(dir); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	r := prng.New(5, 6)
	texts := []string{"^12+34=", "^99+99=891", "^31425:12345", "", "^", "hello ^1+2= wörld 日本 😀", "  ^0 0\n:=+", EOS + "^1" + EOS}
	type batch struct {
		Text []string `json:"text"`
	}
	var batches []batch
	for _, name := range []string{"addition", "sort"} {
		tk, _ := task.Lookup(name)
		var bt batch
		for i := range 6 {
			p := tk.Generate(r)
			ans := p.Answer
			if i%2 == 1 {
				ans = tk.Buggy(p)
			}
			s := p.Prompt + ans
			bt.Text = append(bt.Text, s)
			texts = append(texts, s)
		}
		batches = append(batches, bt)
	}
	in, _ := json.Marshal(map[string]any{"texts": texts, "batches": batches})
	script, _ := filepath.Abs(filepath.Join("testdata", "check_builtin.py"))
	cmd := exec.Command(py, script, dir, out)
	cmd.Dir = out
	cmd.Stdin = strings.NewReader(string(in))
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, o)
	}
	raw, err := os.ReadFile(filepath.Join(out, "out.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Tokenizers, Auto [][]int
		Class            string `json:"class"`
		ModelClass       string `json:"model_class"`
		EOS              int    `json:"eos"`
		Logits           []string
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	t.Logf("AutoTokenizer: %s, AutoModelForCausalLM: %s", res.Class, res.ModelClass)
	if res.ModelClass != "LlamaForCausalLM" || res.EOS != EOSID {
		t.Fatalf("transformers loaded a %s with eos %d", res.ModelClass, res.EOS)
	}
	for i, s := range texts {
		got, err := b.Tokenizer.Encode(s, false)
		if err != nil {
			t.Fatal(err)
		}
		if got == nil {
			got = []int{}
		}
		if !reflect.DeepEqual(got, res.Tokenizers[i]) || !reflect.DeepEqual(got, res.Auto[i]) {
			t.Errorf("%q: ours %v, tokenizers %v, AutoTokenizer %v", s, got, res.Tokenizers[i], res.Auto[i])
		}
	}
	md, err := llama.New(b.Weights, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, bt := range batches {
		var ids []int
		for _, s := range bt.Text {
			x, _ := b.Tokenizer.Encode(s, false)
			ids = append(ids, x...)
		}
		T := len(ids) / len(bt.Text)
		got, err := md.Logits(ids, len(bt.Text), T)
		if err != nil {
			t.Fatal(err)
		}
		want := readLogits(t, res.Logits[i])
		if len(want) != len(got) {
			t.Fatalf("batch %d: %d logits, transformers %d", i, len(got), len(want))
		}
		var d, scale float64
		for j := range got {
			d = max(d, math.Abs(float64(got[j])-float64(want[j])))
			scale = max(scale, math.Abs(float64(want[j])))
		}
		t.Logf("batch %d (%d×%d): max |Δlogit| %.3g, max |logit| %.3g", i, len(bt.Text), T, d, scale)
		if d > 1e-4 {
			t.Errorf("batch %d: max |Δlogit| %g > 1e-4", i, d)
		}
	}
}

func readLogits(t *testing.T, path string) []float32 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	sf, err := safetensors.Parse(f, st.Size(), safetensors.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	info, ok := sf.Lookup("logits")
	if !ok || info.DType != "F32" {
		t.Fatalf("%s: no F32 logits", path)
	}
	raw, err := sf.ReadTensor(f, info)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}
