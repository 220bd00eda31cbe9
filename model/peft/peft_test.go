package peft

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zooai/gym/internal/tinyllama"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/prng"
	"github.com/zooai/gym/model/safetensors"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var testModel = func() llama.Config {
	c := tinyllama.Config()
	c.Hidden, c.Intermediate, c.Heads, c.KVHeads, c.HeadDim = 8, 16, 2, 1, 4
	return c
}()

// testAdapter is a deterministic adapter with every A and B non-zero.
func testAdapter(t testing.TB, targets ...llama.Module) *llama.Adapter {
	t.Helper()
	if len(targets) == 0 {
		targets = []llama.Module{llama.VProj, llama.QProj, llama.DownProj}
	}
	a, err := llama.InitAdapter(testModel, 2, 4, targets, 7)
	if err != nil {
		t.Fatal(err)
	}
	r := prng.New(9, 1)
	for l := range a.B {
		for _, b := range a.B[l] {
			for i := range b {
				b[i] = float32(r.Norm() * 0.1)
			}
		}
	}
	return a
}

func testCard() Card {
	acc := 0.8125
	return Card{BaseModel: "zooai/gym-base", BaseSHA3: strings.Repeat("ab", 32), Job: "job-1", Epoch: 3, Quality: 0.75,
		Accuracy: &acc, WeightsCID: "bafkreiexample", Extra: map[string]string{ExtraTask: "addition", "workers": "4"}}
}

func TestRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ckpt")
	a := testAdapter(t)
	card := testCard()
	if err := Write(dir, a, card); err != nil {
		t.Fatal(err)
	}
	b, cfg, err := Read(dir, testModel)
	if err != nil {
		t.Fatal(err)
	}
	if llama.Digest(a.Views()) != llama.Digest(b.Views()) {
		t.Fatal("tensors differ after the round trip")
	}
	if !b.SameShape(a) {
		t.Fatalf("adapter r=%d alpha=%v %v, want r=%d alpha=%v %v", b.Rank, b.Alpha, b.Targets, a.Rank, a.Alpha, a.Targets)
	}
	if cfg.BaseModel != card.BaseModel || cfg.BaseSHA3 != card.BaseSHA3 || cfg.Job != card.Job || cfg.Epoch != card.Epoch ||
		cfg.Extra[ExtraTask] != "addition" || cfg.Adapter.Rank != 2 || !slices.Equal(cfg.Adapter.Targets, a.Targets) {
		t.Fatalf("config %+v", cfg)
	}
	other := testModel
	other.Layers = 3
	if _, _, err := Read(dir, other); !errors.Is(err, ErrFormat) {
		t.Fatalf("read for a model of another shape: %v", err)
	}
	// The directory holds exactly the three files.
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{CardFile, ConfigFile, WeightsFile}) {
		t.Fatalf("files %v", names)
	}
	w, _ := WeightsBytes(a)
	if got, _ := os.ReadFile(filepath.Join(dir, WeightsFile)); !bytes.Equal(got, w) {
		t.Fatal("WeightsBytes differs from the written file")
	}
}

// TestGolden pins the bytes of all three files (the weights by name, shape
// and header; config and card in full): any change is deliberate.
func TestGolden(t *testing.T) {
	a := testAdapter(t)
	card := testCard()
	dir := t.TempDir()
	if err := Write(dir, a, card); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ConfigFile, CardFile, WeightsFile} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join("testdata", name)
		if *update {
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test -update once)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s:\n%s", name, golden, got)
		}
	}
	// Independent of map iteration order and of writing twice.
	for range 5 {
		c2, _ := ConfigBytes(a, card)
		r2, _ := CardBytes(card)
		c1, _ := os.ReadFile(filepath.Join(dir, ConfigFile))
		r1, _ := os.ReadFile(filepath.Join(dir, CardFile))
		if !bytes.Equal(c1, c2) || !bytes.Equal(r1, r2) {
			t.Fatal("bytes not deterministic")
		}
	}
}

func TestConfigIsPEFTs(t *testing.T) {
	c, err := ConfigBytes(testAdapter(t), testCard())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(c, []byte("}\n")) || !bytes.Contains(c, []byte("\n  \"bias\": \"none\",\n")) {
		t.Fatalf("layout:\n%s", c)
	}
	var m map[string]any
	if err := json.Unmarshal(c, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 2.0, "lora_alpha": 4.0, "lora_dropout": 0.0,
		"bias": "none", "fan_in_fan_out": false, "inference_mode": true, "base_model_name_or_path": "zooai/gym-base",
		"revision": nil, "init_lora_weights": true, "modules_to_save": nil, "use_dora": false, "use_rslora": false}
	for k, v := range want {
		got, ok := m[k]
		if !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	if tm, _ := m["target_modules"].([]any); len(tm) != 3 || tm[0] != "q_proj" || tm[1] != "v_proj" || tm[2] != "down_proj" {
		t.Errorf("target_modules %v", m["target_modules"])
	}
	// Keys in sorted order, as PEFT's json.dumps(sort_keys=True) writes them.
	var keys []string
	dec := json.NewDecoder(bytes.NewReader(c))
	dec.Token()
	for dec.More() {
		k, _ := dec.Token()
		keys = append(keys, k.(string))
		var skip json.RawMessage
		dec.Decode(&skip)
	}
	if !slices.IsSorted(keys) {
		t.Errorf("keys not sorted: %v", keys)
	}
	card, _ := CardBytes(testCard())
	for _, s := range []string{"---\nbase_model: \"zooai/gym-base\"\nlibrary_name: peft\ntags:\n- zoo-gym\n- gspo\n- lora\n---\n",
		"job-1", "81.25%", "bafkreiexample", strings.Repeat("ab", 32), "PeftModel.from_pretrained", "AutoModelForCausalLM.from_pretrained", "gym eval [--model DIR] --checkpoint"} {
		if !bytes.Contains(card, []byte(s)) {
			t.Errorf("card lacks %q:\n%s", s, card)
		}
	}
}

func TestWriteExisting(t *testing.T) {
	dir := t.TempDir()
	a := testAdapter(t)
	if err := Write(dir, a, testCard()); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, a, testCard()); err != nil {
		t.Fatalf("rewriting the same checkpoint: %v", err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, WeightsFile))
	b := a.Clone()
	b.B[0][llama.QProj][0] += 1
	if err := Write(dir, b, testCard()); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("overwrote a different checkpoint: %v", err)
	}
	card := testCard()
	card.Epoch++
	if err := Write(dir, a, card); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("overwrote a different card: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, WeightsFile)); !bytes.Equal(before, after) {
		t.Fatal("weights changed")
	}
	// A half-written directory (weights only) is completed.
	dir2 := t.TempDir()
	w, _ := WeightsBytes(a)
	os.WriteFile(filepath.Join(dir2, WeightsFile), w, 0o644)
	if err := Write(dir2, a, testCard()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Read(dir2, testModel); err != nil {
		t.Fatal(err)
	}
}

func TestWriteRefuses(t *testing.T) {
	a := testAdapter(t)
	nan := a.Clone()
	nan.A[1][llama.VProj][3] = float32(math.NaN())
	rs := a.Clone()
	rs.RSLoRA = true
	bad := 1.5
	for name, tc := range map[string]struct {
		a    *llama.Adapter
		card Card
	}{
		"rslora":           {rs, testCard()},
		"nil adapter":      {nil, testCard()},
		"nan":              {nan, testCard()},
		"newline in job":   {a, Card{Job: "a\nb"}},
		"pipe in extra":    {a, Card{Extra: map[string]string{"k": "a|b"}}},
		"accuracy > 1":     {a, Card{Accuracy: &bad}},
		"quality infinite": {a, Card{Quality: math.Inf(1)}},
	} {
		dir := t.TempDir()
		if err := Write(dir, tc.a, tc.card); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("%s: wrote %d files", name, len(ents))
		}
	}
}

type stTensor = safetensors.Tensor

// checkpointParts returns the config and the weights' tensors of a good
// checkpoint, for tests to break.
func checkpointParts(t *testing.T) (map[string]any, []stTensor) {
	t.Helper()
	a := testAdapter(t)
	c, _ := ConfigBytes(a, testCard())
	var m map[string]any
	json.Unmarshal(c, &m)
	w, _ := WeightsBytes(a)
	f, err := safetensors.Parse(bytes.NewReader(w), int64(len(w)), safetensors.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	var ts []stTensor
	for _, info := range f.Tensors {
		data, _ := f.ReadTensor(bytes.NewReader(w), info)
		ts = append(ts, stTensor{Name: info.Name, DType: info.DType, Shape: info.Shape, Data: data})
	}
	return m, ts
}

func writeParts(t *testing.T, dir string, cfg map[string]any, ts []stTensor) {
	t.Helper()
	if cfg != nil {
		c, _ := json.Marshal(cfg)
		os.WriteFile(filepath.Join(dir, ConfigFile), c, 0o644)
	}
	if ts != nil {
		var b bytes.Buffer
		if err := safetensors.Write(&b, ts, nil); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, WeightsFile), b.Bytes(), 0o644)
	}
}

func TestReadRefuses(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(cfg map[string]any, ts []stTensor) (map[string]any, []stTensor)
		want   string
	}{
		{"no config", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) { return nil, ts }, "no adapter_config.json"},
		{"no weights", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) { return c, nil }, "no adapter_model.safetensors"},
		{"missing tensor", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) { return c, ts[1:] }, "holds 11 tensors, want 12"},
		{"missing tensor, same count", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) {
			ts[0].Name = "base_model.model.model.layers.9.self_attn.q_proj.lora_A.weight"
			return c, ts
		}, "missing"},
		{"old gym names", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) {
			ts[0].Name = "base_model.model.blocks.0.attn.q.lora_A.weight"
			return c, ts
		}, "missing"},
		{"extra tensor", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) {
			return c, append(ts, stTensor{Name: "x", DType: "F32", Shape: []uint64{1}, Data: make([]byte, 4)})
		}, "holds 13 tensors, want 12"},
		{"transposed", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) {
			ts[0].Shape = []uint64{ts[0].Shape[1], ts[0].Shape[0]}
			return c, ts
		}, "shape"},
		{"I32", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) {
			ts[0].DType = "I32"
			return c, ts
		}, "I32"},
		{"NaN", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) {
			copy(ts[2].Data[8:], []byte{0, 0, 0xc0, 0x7f})
			return c, ts
		}, "NaN"},
		{"Inf", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) {
			copy(ts[3].Data[4:], []byte{0, 0, 0x80, 0xff})
			return c, ts
		}, "-Inf"},
		{"rank differs", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) { c["r"] = 3; return c, ts }, "shape"},
		{"huge rank", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) { c["r"] = 60000; return c, ts }, "values, adapter_model.safetensors has"},
		{"target differs", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) {
			c["target_modules"] = []string{"v_proj", "k_proj", "down_proj"}
			return c, ts
		}, "missing"},
		{"old gym target", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) {
			c["target_modules"] = []string{"q", "v", "fc2"}
			return c, ts
		}, "target_modules"},
		{"not LORA", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) {
			c["peft_type"] = "IA3"
			return c, ts
		}, "peft_type"},
		{"bias", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) { c["bias"] = "all"; return c, ts }, "bias"},
		{"fan_in_fan_out", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) {
			c["fan_in_fan_out"] = true
			return c, ts
		}, "fan_in_fan_out"},
		{"dora", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) {
			c["use_dora"] = true
			return c, ts
		}, "use_dora"},
		{"rank pattern", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) {
			c["rank_pattern"] = map[string]any{"q_pro.": 4} // a regular expression
			return c, ts
		}, "rank_pattern"},
		{"rank pattern the tensors do not have", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) {
			c["rank_pattern"] = map[string]any{"q_proj": 4}
			return c, ts
		}, "q_proj.lora_A.weight\" has shape"},
		{"layers", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) {
			c["layers_to_transform"] = []int{0}
			return c, ts
		}, "layers_to_transform"},
		{"no zoo_gym", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) { delete(c, "zoo_gym"); return c, ts }, "zoo_gym"},
		{"unknown key", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) { c["lora_magic"] = 1; return c, ts }, "lora_magic"},
		{"alpha 0", func(c map[string]any, ts []stTensor) (map[string]any, []stTensor) { c["lora_alpha"] = 0; return c, ts }, "lora_alpha"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c, ts := checkpointParts(t)
			c, ts = tc.break_(c, ts)
			writeParts(t, dir, c, ts)
			_, _, err := Read(dir, testModel)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
	// The unbroken parts load: the cases above fail for their own reason.
	dir := t.TempDir()
	c, ts := checkpointParts(t)
	writeParts(t, dir, c, ts)
	if _, _, err := Read(dir, testModel); err != nil {
		t.Fatal(err)
	}
	// Trailing garbage in the config.
	os.WriteFile(filepath.Join(dir, ConfigFile), []byte(`{"peft_type": "LORA"} x`), 0o644)
	if _, _, err := Read(dir, testModel); !errors.Is(err, ErrFormat) {
		t.Fatalf("trailing garbage: %v", err)
	}
	// An oversized config is refused before it is read.
	os.WriteFile(filepath.Join(dir, ConfigFile), bytes.Repeat([]byte(" "), maxConfigBytes+1), 0o644)
	if _, _, err := Read(dir, testModel); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("oversized config: %v", err)
	}
}

// FuzzParseConfig feeds adapter_config.json variants to ParseConfig: it
// must not panic, and whatever it accepts describes a valid adapter.
func FuzzParseConfig(f *testing.F) {
	golden, err := os.ReadFile(filepath.Join("testdata", ConfigFile))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"peft_type":"LORA","bias":"none","r":1,"lora_alpha":1,"target_modules":["q_proj"],"zoo_gym":{"job":"j"}}`))
	f.Add([]byte(`{"peft_type":"LORA","bias":"none","r":-1,"lora_alpha":1e400,"target_modules":null,"zoo_gym":null}`))
	f.Add([]byte(`[1,2,3]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		if c.Adapter.Rank < 1 || !(c.Adapter.Alpha > 0) || len(c.Adapter.Targets) == 0 || c.Extra == nil {
			t.Fatalf("accepted an invalid config %+v", c)
		}
	})
}
