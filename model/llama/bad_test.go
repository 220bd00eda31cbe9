package llama

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zooai/gym/model/safetensors"
)

// baseConfig is a valid config.json as a map, to be broken by the tests.
func baseConfig() map[string]any {
	return map[string]any{
		"architectures": []string{"LlamaForCausalLM"}, "model_type": "llama",
		"vocab_size": 50, "hidden_size": 48, "intermediate_size": 80, "num_hidden_layers": 2,
		"num_attention_heads": 6, "num_key_value_heads": 2, "max_position_embeddings": 40,
		"rms_norm_eps": 1e-5, "rope_theta": 10000.0, "rope_scaling": nil, "hidden_act": "silu",
		"tie_word_embeddings": false, "torch_dtype": "bfloat16", "bos_token_id": 1,
		"eos_token_id": []int{2, 3}, "transformers_version": "4.45.0", "use_cache": true,
	}
}

func marshal(t testing.TB, m map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseConfigAccepts(t *testing.T) {
	c, err := ParseConfig(marshal(t, baseConfig()))
	if err != nil {
		t.Fatal(err)
	}
	if c.HeadDim != 8 || c.KVHeads != 2 || c.BOS != 1 || len(c.EOS) != 2 || c.DType != "bfloat16" || c.RopeScaling != nil {
		t.Fatalf("%+v", c)
	}
	// Real configs of the Hub, as published (trimmed to small sizes where
	// the sizes do not matter).
	for _, f := range []string{"smollm2.json", "llama3.2.json", "qwen2.5.json", "qwen3.json", "mistral.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "configs", f))
		if err != nil {
			t.Fatal(err)
		}
		c, err := ParseConfig(b)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		switch f {
		case "llama3.2.json":
			if c.RopeScaling == nil || c.RopeScaling.Factor != 32 || c.RopeScaling.OriginalMaxPositions != 8192 || !c.Tied || c.HeadDim != 64 {
				t.Errorf("%s: %+v", f, c)
			}
		case "qwen3.json":
			if !c.QKNorm || c.HeadDim != 128 || c.QKVBias {
				t.Errorf("%s: %+v", f, c)
			}
		case "qwen2.5.json":
			if !c.QKVBias || c.OBias || c.KVHeads != 2 || c.RopeTheta != 1e6 {
				t.Errorf("%s: %+v", f, c)
			}
		}
	}
}

func TestParseConfigRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(m map[string]any)
		field string // the error must name it
	}{
		{"vocab 10^12", func(m map[string]any) { m["vocab_size"] = 1_000_000_000_000 }, "vocab_size"},
		{"10^6 layers", func(m map[string]any) { m["num_hidden_layers"] = 1_000_000 }, "num_hidden_layers"},
		{"hidden not divisible", func(m map[string]any) { m["hidden_size"] = 50 }, "hidden_size"},
		{"kv heads not dividing", func(m map[string]any) { m["num_key_value_heads"] = 4 }, "num_key_value_heads"},
		{"negative size", func(m map[string]any) { m["intermediate_size"] = -1 }, "intermediate_size"},
		{"fractional size", func(m map[string]any) { m["hidden_size"] = 48.5 }, "hidden_size"},
		{"size as string", func(m map[string]any) { m["hidden_size"] = "48" }, "hidden_size"},
		{"missing size", func(m map[string]any) { delete(m, "vocab_size") }, "vocab_size"},
		{"unknown rope type", func(m map[string]any) { m["rope_scaling"] = map[string]any{"rope_type": "yarn", "factor": 4.0} }, "rope_scaling.rope_type"},
		{"old-style rope type", func(m map[string]any) { m["rope_scaling"] = map[string]any{"type": "linear", "factor": 2.0} }, "rope_scaling.rope_type"},
		{"llama3 missing factor", func(m map[string]any) {
			m["rope_scaling"] = map[string]any{"rope_type": "llama3", "low_freq_factor": 1.0, "high_freq_factor": 4.0}
		}, "rope_scaling.factor"},
		{"llama3 extra key", func(m map[string]any) {
			m["rope_scaling"] = map[string]any{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "beta_fast": 32}
		}, "rope_scaling.beta_fast"},
		{"llama3 low >= high", func(m map[string]any) {
			m["rope_scaling"] = map[string]any{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 4.0}
		}, "rope_scaling.high_freq_factor"},
		{"partial rotary", func(m map[string]any) { m["partial_rotary_factor"] = 0.5 }, "partial_rotary_factor"},
		{"moe", func(m map[string]any) { m["num_experts"] = 8 }, "num_experts"},
		{"moe parameters", func(m map[string]any) { m["num_local_experts"] = 8; m["num_experts_per_tok"] = 2 }, "num_experts_per_tok"},
		{"quantized", func(m map[string]any) { m["quantization_config"] = map[string]any{"quant_method": "gptq"} }, "quantization_config"},
		{"gelu", func(m map[string]any) { m["hidden_act"] = "gelu" }, "hidden_act"},
		{"mlp bias on qwen2", func(m map[string]any) {
			m["architectures"], m["model_type"], m["mlp_bias"] = []string{"Qwen2ForCausalLM"}, "qwen2", true
		}, "mlp_bias"},
		{"sliding window on llama", func(m map[string]any) { m["sliding_window"] = 16 }, "sliding_window"},
		{"mistral sliding window", func(m map[string]any) {
			m["architectures"], m["model_type"], m["sliding_window"] = []string{"MistralForCausalLM"}, "mistral", 16
		}, "sliding_window"},
		{"mistral default window", func(m map[string]any) {
			m["architectures"], m["model_type"], m["max_position_embeddings"] = []string{"MistralForCausalLM"}, "mistral", 32768
		}, "sliding_window"},
		{"qwen sliding window on", func(m map[string]any) {
			m["architectures"], m["model_type"] = []string{"Qwen2ForCausalLM"}, "qwen2"
			m["use_sliding_window"], m["sliding_window"], m["max_window_layers"] = true, 16, 1
		}, "use_sliding_window"},
		{"sliding layer types", func(m map[string]any) { m["layer_types"] = []string{"full_attention", "sliding_attention"} }, "layer_types"},
		{"unknown architecture", func(m map[string]any) { m["architectures"] = []string{"GPT2LMHeadModel"} }, "architectures"},
		{"two architectures", func(m map[string]any) { m["architectures"] = []string{"LlamaForCausalLM", "Qwen2ForCausalLM"} }, "architectures"},
		{"model type mismatch", func(m map[string]any) { m["model_type"] = "qwen2" }, "model_type"},
		{"dtype", func(m map[string]any) { m["torch_dtype"] = "float8_e4m3fn" }, "torch_dtype"},
		{"eos outside vocab", func(m map[string]any) { m["eos_token_id"] = 50 }, "eos_token_id"},
		{"dropout", func(m map[string]any) { m["attention_dropout"] = 0.1 }, "attention_dropout"},
		{"interleaved rope", func(m map[string]any) { m["rope_interleaved"] = true }, "rope_interleaved"},
		{"remote code", func(m map[string]any) { m["auto_map"] = map[string]any{"AutoModel": "x.Y"} }, "auto_map"},
		{"zero eps", func(m map[string]any) { m["rms_norm_eps"] = 0 }, "rms_norm_eps"},
		{"both rope fields", func(m map[string]any) {
			m["rope_scaling"] = map[string]any{"rope_type": "default"}
			m["rope_parameters"] = map[string]any{"rope_type": "default"}
		}, "rope_scaling"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := baseConfig()
			tc.edit(m)
			_, err := ParseConfig(marshal(t, m))
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `"`+tc.field+`"`) {
				t.Fatalf("error %v, want ErrConfig naming %q", err, tc.field)
			}
		})
	}
	for _, raw := range []string{
		``, `[]`, `null`, `{"vocab_size": 50, "vocab_size": 51}`, `{} {}`,
		`{"architectures": ["LlamaForCausalLM"]` + strings.Repeat(" ", maxConfigBytes) + `}`,
		`{"a":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
	} {
		if _, err := ParseConfig([]byte(raw)); !errors.Is(err, ErrConfig) {
			t.Errorf("%.40q: error %v", raw, err)
		}
	}
}

// FuzzParseConfig: arbitrary bytes never panic, and whatever parses is
// valid and survives ConfigJSON → ParseConfig unchanged.
func FuzzParseConfig(f *testing.F) {
	f.Add(marshal(f, baseConfig()))
	ents, _ := os.ReadDir(filepath.Join("testdata", "configs"))
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("testdata", "configs", e.Name()))
		if err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v does not wrap ErrConfig", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("parsed config does not validate: %v", err)
		}
		out, err := c.ConfigJSON()
		if err != nil {
			t.Fatal(err)
		}
		c2, err := ParseConfig(out)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		c.DType, c2.DType = "", ""
		if !equalConfig(c, c2) {
			t.Fatalf("round trip: %+v → %+v", c, c2)
		}
	})
}

// FuzzParseAdapterConfig: arbitrary bytes never panic; errors wrap ErrAdapter.
func FuzzParseAdapterConfig(f *testing.F) {
	b, _ := os.ReadFile(filepath.Join("testdata", "adapter_config.json"))
	f.Add(b)
	f.Add([]byte(`{"peft_type":"LORA","r":4,"lora_alpha":8,"target_modules":"all-linear"}`))
	f.Add([]byte(`{"peft_type":"LORA","r":2,"lora_alpha":4,"target_modules":["model.layers.1.mlp.up_proj","down_proj"],` +
		`"target_parameters":["gate_up_proj","mlp.experts.down_proj","gate.weight"],"rank_pattern":{".*\\.gate_up_proj":4},"alpha_pattern":{"gate_up_proj":8}}`))
	moe, err := ParseConfig(marshal(f, moeConfig()))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ac, err := ParseAdapterConfig(b)
		if err != nil {
			if !errors.Is(err, ErrAdapter) {
				t.Fatalf("error %v does not wrap ErrAdapter", err)
			}
			return
		}
		if ac.Rank < 1 || !(ac.Alpha > 0) || len(ac.Targets) == 0 {
			t.Fatalf("accepted %+v", ac)
		}
		// Resolving against a MoE model either fails with ErrAdapter or
		// gives an adapter of the size Params says.
		if ac.Rank > 64 {
			return
		}
		a, err := ac.NewAdapter(moe)
		if err != nil {
			if !errors.Is(err, ErrAdapter) {
				t.Fatalf("error %v does not wrap ErrAdapter", err)
			}
			return
		}
		if n, err := ac.Params(moe); err != nil || int(n) != a.NumParams() || a.check(moe) != nil {
			t.Fatalf("Params %d (%v), adapter %d", n, err, a.NumParams())
		}
	})
}

func TestParseAdapterConfig(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "adapter_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	ac, err := ParseAdapterConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	if ac.Rank != 4 || ac.Alpha != 8 || len(ac.Targets) != 7 || ac.RSLoRA {
		t.Fatalf("%+v", ac)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key   string
		value any
	}{
		{"use_dora", true}, {"bias", "all"}, {"rank_pattern", map[string]any{"q_pro.*": 8}},
		{"alpha_pattern", map[string]any{"(q|k)_proj": 8}}, {"rank_pattern", map[string]any{"q_proj": 2.5}},
		{"modules_to_save", []string{"lm_head"}},
		{"target_parameters", []string{"mlp.down_proj.weight"}}, {"target_modules", []string{"gate"}},
		{"target_modules", []string{"experts.gate_up_proj"}},
		{"target_modules", []string{"q_proj", "lm_head"}}, {"target_modules", ".*q_proj"},
		{"peft_type", "IA3"}, {"r", 0}, {"lora_alpha", -1}, {"fan_in_fan_out", true},
		{"layers_to_transform", []int{0}}, {"new_variant_config", map[string]any{}},
	} {
		mm := map[string]any{}
		for k, v := range m {
			mm[k] = v
		}
		mm[tc.key] = tc.value
		if _, err := ParseAdapterConfig(marshal(t, mm)); !errors.Is(err, ErrAdapter) || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s=%v: error %v, want ErrAdapter naming it", tc.key, tc.value, err)
		}
	}
}

// writeFile writes a safetensors file of F32 tensors.
func writeSafetensors(t *testing.T, path string, ts map[string][]uint64) {
	t.Helper()
	var list []safetensors.Tensor
	for name, shape := range ts {
		n := uint64(1)
		for _, d := range shape {
			n *= d
		}
		list = append(list, safetensors.Tensor{Name: name, DType: "F32", Shape: shape, Data: make([]byte, 4*n)})
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, list, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// savedModel writes a random model of arch to a new directory.
func savedModel(t *testing.T, arch Arch) (string, *Weights) {
	t.Helper()
	w := randomWeights(t, testConfig(arch), 5)
	dir := t.TempDir()
	if err := Save(dir, w); err != nil {
		t.Fatal(err)
	}
	return dir, w
}

// rewrite replaces dir's model.safetensors with w's tensors edited by edit
// (name → shape; a nil shape removes the tensor).
func rewrite(t *testing.T, dir string, w *Weights, edit map[string][]uint64) {
	t.Helper()
	ts := map[string][]uint64{}
	for _, s := range w.Cfg.tensors() {
		ts[s.name] = dims(s.shape)
	}
	for k, v := range edit {
		if v == nil {
			delete(ts, k)
		} else {
			ts[k] = v
		}
	}
	writeSafetensors(t, filepath.Join(dir, WeightsFile), ts)
}

func dims(shape []int) []uint64 {
	out := make([]uint64, len(shape))
	for i, d := range shape {
		out[i] = uint64(d)
	}
	return out
}

func TestLoadRefuses(t *testing.T) {
	wantErr := func(t *testing.T, dir string, parts ...string) {
		t.Helper()
		_, err := Load(dir)
		if err == nil {
			t.Fatal("loaded")
		}
		for _, p := range parts {
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("error %q does not name %q", err, p)
			}
		}
	}
	t.Run("missing weights", func(t *testing.T) {
		dir, _ := savedModel(t, Llama)
		os.Remove(filepath.Join(dir, WeightsFile))
		wantErr(t, dir, WeightsFile, IndexFile)
	})
	t.Run("missing config", func(t *testing.T) {
		dir, _ := savedModel(t, Llama)
		os.Remove(filepath.Join(dir, ConfigFile))
		wantErr(t, dir, ConfigFile)
	})
	t.Run("shape mismatch", func(t *testing.T) {
		dir, w := savedModel(t, Qwen2)
		rewrite(t, dir, w, map[string][]uint64{"model.layers.1.self_attn.k_proj.weight": {16, 49}})
		wantErr(t, dir, WeightsFile, "model.layers.1.self_attn.k_proj.weight", "[16 49]")
	})
	t.Run("missing tensor", func(t *testing.T) {
		dir, w := savedModel(t, Qwen3)
		rewrite(t, dir, w, map[string][]uint64{"model.layers.0.self_attn.k_norm.weight": nil})
		wantErr(t, dir, WeightsFile, "model.layers.0.self_attn.k_norm.weight", "missing")
	})
	t.Run("missing bias", func(t *testing.T) {
		dir, w := savedModel(t, Qwen2)
		rewrite(t, dir, w, map[string][]uint64{"model.layers.0.self_attn.v_proj.bias": nil})
		wantErr(t, dir, "model.layers.0.self_attn.v_proj.bias")
	})
	t.Run("extra tensor", func(t *testing.T) {
		dir, w := savedModel(t, Qwen2) // tied: lm_head must be absent
		rewrite(t, dir, w, map[string][]uint64{"lm_head.weight": {50, 48}})
		wantErr(t, dir, WeightsFile, "lm_head.weight", "unexpected")
	})
	t.Run("absurd config", func(t *testing.T) {
		dir, _ := savedModel(t, Llama)
		m := baseConfig()
		m["vocab_size"] = 1_000_000_000_000
		os.WriteFile(filepath.Join(dir, ConfigFile), marshal(t, m), 0o644)
		wantErr(t, dir, ConfigFile, "vocab_size")
	})
	t.Run("unsupported dtype", func(t *testing.T) {
		dir, w := savedModel(t, Mistral)
		var list []safetensors.Tensor
		for _, s := range w.Cfg.tensors() {
			esize, dt := 4, "F32"
			if s.name == "model.norm.weight" {
				esize, dt = 8, "F64"
			}
			list = append(list, safetensors.Tensor{Name: s.name, DType: dt, Shape: dims(s.shape), Data: make([]byte, esize*s.numel())})
		}
		var buf bytes.Buffer
		safetensors.Write(&buf, list, nil)
		os.WriteFile(filepath.Join(dir, WeightsFile), buf.Bytes(), 0o644)
		wantErr(t, dir, WeightsFile, "model.norm.weight", "F64")
	})
	t.Run("non-finite", func(t *testing.T) {
		dir, w := savedModel(t, Llama)
		w.Norm[3] = float32(math.Inf(1))
		Save(dir, w)
		wantErr(t, dir, WeightsFile, `"model.norm.weight"[3]`, "Inf")
	})
	t.Run("truncated", func(t *testing.T) {
		dir, _ := savedModel(t, Llama)
		p := filepath.Join(dir, WeightsFile)
		b, _ := os.ReadFile(p)
		os.WriteFile(p, b[:len(b)-5], 0o644)
		wantErr(t, dir, WeightsFile)
	})
}

// TestShardedIndex: a sharded directory loads; a broken index is refused.
func TestShardedIndex(t *testing.T) {
	w := randomWeights(t, testConfig(Llama), 11)
	shardDir := func(t *testing.T, edit func(wm map[string]string)) string {
		dir := t.TempDir()
		if err := Save(dir, w); err != nil {
			t.Fatal(err)
		}
		// Split model.safetensors into two shards by re-reading it.
		ck, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		wm := map[string]string{}
		parts := [2][]safetensors.Tensor{}
		for i, s := range w.Cfg.specs(w) {
			st := ck.tensor[s.name]
			raw, err := st.shard.sf.ReadTensor(st.shard.ra, st.info)
			if err != nil {
				t.Fatal(err)
			}
			k := i % 2
			parts[k] = append(parts[k], safetensors.Tensor{Name: s.name, DType: "F32", Shape: dims(s.shape), Data: raw})
			wm[s.name] = []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}[k]
		}
		ck.Close()
		os.Remove(filepath.Join(dir, WeightsFile))
		for k, p := range parts {
			var buf bytes.Buffer
			safetensors.Write(&buf, p, map[string]string{"format": "pt"})
			os.WriteFile(filepath.Join(dir, []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}[k]), buf.Bytes(), 0o644)
		}
		edit(wm)
		idx := marshal(t, map[string]any{"metadata": map[string]any{"total_size": 1}, "weight_map": wm})
		os.WriteFile(filepath.Join(dir, IndexFile), idx, 0o644)
		return dir
	}
	got, err := Load(shardDir(t, func(map[string]string) {}))
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range w.Cfg.specs(got) {
		if !sameBits(s.f32(), w.Cfg.specs(w)[i].f32()) {
			t.Fatalf("tensor %s differs", s.name)
		}
	}
	for _, tc := range []struct {
		name  string
		edit  func(wm map[string]string)
		parts []string
	}{
		{"escape", func(wm map[string]string) { wm["model.norm.weight"] = "../model-00001-of-00002.safetensors" }, []string{IndexFile, "model.norm.weight", ".."}},
		{"absolute", func(wm map[string]string) { wm["model.norm.weight"] = "/etc/passwd.safetensors" }, []string{IndexFile, "model.norm.weight"}},
		{"listed, absent", func(wm map[string]string) {
			wm["model.layers.9.mlp.up_proj.weight"] = "model-00001-of-00002.safetensors"
		}, []string{"model.layers.9.mlp.up_proj.weight", "missing"}},
		{"wrong shard", func(wm map[string]string) { wm["model.norm.weight"] = "model-00001-of-00002.safetensors" }, []string{"model.norm.weight", "listed"}},
		{"unlisted", func(wm map[string]string) { delete(wm, "model.norm.weight") }, []string{"model.norm.weight", "not in"}},
		{"missing shard", func(wm map[string]string) { wm["model.norm.weight"] = "model-00003-of-00003.safetensors" }, []string{"model-00003-of-00003.safetensors"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(shardDir(t, tc.edit))
			if err == nil {
				t.Fatal("loaded")
			}
			for _, p := range tc.parts {
				if !strings.Contains(err.Error(), p) {
					t.Fatalf("error %q does not name %q", err, p)
				}
			}
		})
	}
	dir := shardDir(t, func(map[string]string) {})
	os.WriteFile(filepath.Join(dir, IndexFile), []byte(`{"weight_map": {"a": "x.safetensors", "a": "y.safetensors"}}`), 0o644)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("duplicate index key: %v", err)
	}
}

// TestReadAdapterRefuses: a PEFT directory whose tensors disagree with its
// config or the base model is refused, naming the tensor.
func TestReadAdapterRefuses(t *testing.T) {
	c := testConfig(Llama)
	cfgJSON, _ := os.ReadFile(filepath.Join("testdata", "adapter_config.json"))
	write := func(t *testing.T, edit func(ts map[string][]uint64)) string {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, AdapterConfigFile), cfgJSON, 0o644)
		a, _ := NewAdapter(c, 4, 8, []Module{QProj, KProj, VProj, OProj, GateProj, UpProj, DownProj})
		ts := map[string][]uint64{}
		for _, x := range a.Tensors(c) {
			ts[x.Name] = dims(x.Shape)
		}
		edit(ts)
		writeSafetensors(t, filepath.Join(dir, AdapterWeightsFile), ts)
		return dir
	}
	if _, _, err := ReadAdapter(write(t, func(map[string][]uint64) {}), c); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(ts map[string][]uint64)
		part string
	}{
		{"shape", func(ts map[string][]uint64) {
			ts["base_model.model.model.layers.1.mlp.up_proj.lora_B.weight"] = []uint64{80, 5}
		}, "model.layers.1.mlp.up_proj.lora_B.weight"},
		{"missing", func(ts map[string][]uint64) {
			delete(ts, "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight")
		}, "adapter_model.safetensors"},
		{"renamed", func(ts map[string][]uint64) {
			delete(ts, "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight")
			ts["base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight"] = []uint64{4, 48}
		}, "q_proj.lora_A.weight"},
		{"extra", func(ts map[string][]uint64) { ts["base_model.model.lm_head.lora_A.weight"] = []uint64{4, 48} }, "lm_head"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ReadAdapter(write(t, tc.edit), c)
			if !errors.Is(err, ErrAdapter) || !strings.Contains(err.Error(), tc.part) {
				t.Fatalf("error %v, want ErrAdapter naming %q", err, tc.part)
			}
		})
	}
}
