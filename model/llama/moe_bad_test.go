package llama

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zooai/gym/model/prng"
)

// moeConfig is a small Qwen2-MoE config.json as a map.
func moeConfig() map[string]any {
	return map[string]any{
		"architectures": []string{"Qwen2MoeForCausalLM"}, "model_type": "qwen2_moe",
		"vocab_size": 64, "hidden_size": 32, "intermediate_size": 40, "num_hidden_layers": 3,
		"num_attention_heads": 4, "num_key_value_heads": 2, "num_experts": 4, "num_experts_per_tok": 2,
		"moe_intermediate_size": 16, "shared_expert_intermediate_size": 24, "mlp_only_layers": []int{1},
		"decoder_sparse_step": 1, "norm_topk_prob": false, "router_aux_loss_coef": 0.001,
		"output_router_logits": false, "use_sliding_window": false, "sliding_window": 0, "max_window_layers": 28,
	}
}

// TestParseMoEConfigs: the published configs of Qwen3-30B-A3B,
// Qwen1.5-MoE-A2.7B and Mixtral-8x7B parse with the values transformers
// reads from them.
func TestParseMoEConfigs(t *testing.T) {
	for _, tc := range []struct {
		file string
		want MoEConfig
		kv   int
		hd   int
	}{
		{"qwen3moe.json", MoEConfig{Experts: 128, TopK: 8, Intermediate: 768, NormTopK: true, SparseStep: 1, RouterAuxLossCoef: 0.001}, 4, 128},
		{"qwen2moe.json", MoEConfig{Experts: 60, TopK: 4, Intermediate: 1408, Shared: 5632, SparseStep: 1, RouterAuxLossCoef: 0.001}, 16, 128},
		{"mixtral.json", MoEConfig{Experts: 8, TopK: 2, Intermediate: 14336, NormTopK: true, SparseStep: 1, RouterAuxLossCoef: 0.02}, 8, 128},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", "configs", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		c, err := ParseConfig(b)
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if !equalMoE(c.MoE, tc.want) || c.KVHeads != tc.kv || c.HeadDim != tc.hd || !c.Sparse(0) {
			t.Errorf("%s: %+v", tc.file, c)
		}
		if c.Arch == Qwen3MoE && (!c.QKNorm || c.QKVBias) || c.Arch == Qwen2MoE && (!c.QKVBias || c.OBias) {
			t.Errorf("%s: biases and norms %+v", tc.file, c)
		}
	}
	// Qwen3MoeConfig saves the expert count as num_local_experts.
	m := moeConfig()
	m["architectures"], m["model_type"] = []string{"Qwen3MoeForCausalLM"}, "qwen3_moe"
	delete(m, "shared_expert_intermediate_size")
	delete(m, "num_experts")
	delete(m, "max_window_layers")
	m["num_local_experts"] = 4
	m["sliding_window"] = nil
	c, err := ParseConfig(marshal(t, m))
	if err != nil || c.MoE.Experts != 4 || c.Sparse(1) || !c.Sparse(2) || c.HeadDim != 8 {
		t.Fatalf("%+v %v", c, err)
	}
	// decoder_sparse_step 2: layers 1, 3, … are sparse.
	m = moeConfig()
	m["decoder_sparse_step"], m["mlp_only_layers"] = 2, []int{}
	if c, err := ParseConfig(marshal(t, m)); err != nil || c.Sparse(0) || !c.Sparse(1) || c.Sparse(2) {
		t.Fatalf("step 2: %+v %v", c, err)
	}
}

// TestParseMoEConfigRefuses: a MoE field the engine does not implement,
// or an inconsistent one, is refused with the field's name.
func TestParseMoEConfigRefuses(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(m map[string]any)
	}{
		{"num_experts_per_tok", func(m map[string]any) { m["num_experts_per_tok"] = 5 }},
		{"num_experts", func(m map[string]any) { m["num_experts"] = 0 }},
		{"num_local_experts", func(m map[string]any) { m["num_local_experts"] = 3 }},
		{"mlp_only_layers", func(m map[string]any) { m["mlp_only_layers"] = []int{3} }},
		{"mlp_only_layers", func(m map[string]any) { m["mlp_only_layers"] = "all" }},
		{"decoder_sparse_step", func(m map[string]any) { m["decoder_sparse_step"] = 0 }},
		{"router_aux_loss_coef", func(m map[string]any) { m["router_aux_loss_coef"] = -1 }},
		{"output_router_logits", func(m map[string]any) { m["output_router_logits"] = "yes" }},
		{"shared_expert_intermediate_size", func(m map[string]any) { m["shared_expert_intermediate_size"] = 0 }},
		{"attention_bias", func(m map[string]any) { m["attention_bias"] = true }},
		{"use_sliding_window", func(m map[string]any) {
			m["use_sliding_window"], m["sliding_window"], m["max_window_layers"] = true, 8, 0
		}},
		{"router_jitter_noise", func(m map[string]any) { m["router_jitter_noise"] = 0.0 }}, // not a Qwen2-MoE key
		{"moe_layer_freq", func(m map[string]any) { m["moe_layer_freq"] = 1 }},
		{"n_shared_experts", func(m map[string]any) { m["n_shared_experts"] = 1 }},
		{"topk_method", func(m map[string]any) { m["topk_method"] = "noaux_tc" }},
		{"model_type", func(m map[string]any) { m["model_type"] = "qwen3_moe" }},
		{"architectures", func(m map[string]any) { m["architectures"] = []string{"DeepseekV3ForCausalLM"} }},
	} {
		m := moeConfig()
		tc.edit(m)
		if _, err := ParseConfig(marshal(t, m)); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %v, want ErrConfig naming it", tc.field, err)
		}
	}
	mx := map[string]any{"architectures": []string{"MixtralForCausalLM"}, "vocab_size": 64, "hidden_size": 32,
		"intermediate_size": 40, "num_hidden_layers": 2, "num_attention_heads": 4, "num_local_experts": 4,
		"router_jitter_noise": 0.1}
	if _, err := ParseConfig(marshal(t, mx)); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "router_jitter_noise") {
		t.Errorf("Mixtral router_jitter_noise 0.1: %v", err)
	}
	for _, k := range []string{"norm_topk_prob", "moe_intermediate_size", "decoder_sparse_step"} {
		mx2 := map[string]any{}
		for kk, v := range mx {
			mx2[kk] = v
		}
		mx2["router_jitter_noise"] = 0
		mx2[k] = 1
		if _, err := ParseConfig(marshal(t, mx2)); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), k) {
			t.Errorf("Mixtral %s: %v, want it refused by name (not a Mixtral key)", k, err)
		}
	}
}

// TestAdapterTargetForms: every form PEFT writes target_modules in is
// accepted and means what it means to PEFT: short names, the full module
// paths all-linear saves (model.layers.1.mlp.up_proj: that layer only),
// suffixes, target_parameters for the experts and router, and the
// rank_pattern/alpha_pattern of a fused gate_up_proj.
func TestAdapterTargetForms(t *testing.T) {
	dense := testConfig(Qwen3)
	dense.Layers = 3
	ac, err := ParseAdapterConfig([]byte(`{"peft_type":"LORA","r":2,"lora_alpha":4,"target_modules":
		["model.layers.1.mlp.up_proj","model.layers.0.self_attn.q_proj","layers.2.self_attn.v_proj","mlp.down_proj"]}`))
	if err != nil {
		t.Fatal(err)
	}
	mask, _, _, err := ac.Mask(dense)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]Module{{QProj, DownProj}, {UpProj, DownProj}, {VProj, DownProj}}
	for l := range dense.Layers {
		var got []Module
		for m := range NumModules {
			if mask[l][m] {
				got = append(got, m)
			}
		}
		if !slices.Equal(got, want[l]) {
			t.Errorf("layer %d: %v, want %v", l, got, want[l])
		}
	}
	a, err := ac.NewAdapter(dense)
	if err != nil || a.A[1][QProj] != nil || a.A[0][QProj] == nil || len(a.Views()) != 12 {
		t.Fatalf("%v %v", a, err)
	}
	// A path to a layer the model does not have matches nothing.
	ac, _ = ParseAdapterConfig([]byte(`{"peft_type":"LORA","r":2,"lora_alpha":4,"target_modules":["model.layers.7.mlp.up_proj"]}`))
	if _, _, _, err := ac.Mask(dense); !errors.Is(err, ErrAdapter) || !strings.Contains(err.Error(), "model.layers.7.mlp.up_proj") {
		t.Errorf("absent layer: %v", err)
	}
	// On Qwen2-MoE (layer 1 dense): down_proj reaches the dense MLP and the
	// shared expert; target_parameters the experts and router, with the
	// fused gate_up_proj's rank and alpha doubled by the patterns.
	c, err := ParseConfig(marshal(t, moeConfig()))
	if err != nil {
		t.Fatal(err)
	}
	ac, err = ParseAdapterConfig([]byte(`{"peft_type":"LORA","r":2,"lora_alpha":4,"target_modules":["down_proj","shared_expert_gate"],
		"target_parameters":["gate_up_proj","mlp.experts.down_proj","gate.weight"],
		"rank_pattern":{".*\\.gate_up_proj":4},"alpha_pattern":{".*\\.gate_up_proj":8}}`))
	if err != nil {
		t.Fatal(err)
	}
	a, err = ac.NewAdapter(c)
	if err != nil {
		t.Fatal(err)
	}
	if a.A[1][DownProj] == nil || a.A[0][DownProj] != nil || a.A[0][SharedDownProj] == nil || a.A[1][SharedDownProj] != nil ||
		a.A[0][Router] == nil || a.RankAt(0, ExpertsGateUp) != 4 || a.RankAt(0, ExpertsDown) != 2 || a.ScaleAt(0, ExpertsGateUp) != a.Scale() {
		t.Fatalf("Qwen2-MoE adapter: %+v", a)
	}
	names := map[string][]int{}
	for _, v := range a.Tensors(c) {
		names[v.Name] = v.Shape
	}
	for name, shape := range map[string][]int{
		"base_model.model.model.layers.0.mlp.experts.base_layer.lora_A.weight": {16, 32}, // 4 experts × r 4, hidden
		"base_model.model.model.layers.0.mlp.experts.base_layer.lora_B.weight": {32, 16}, // 2·moe_intermediate
		"base_model.model.model.layers.0.mlp.experts.lora_A.weight":            {8, 16},
		"base_model.model.model.layers.2.mlp.gate.lora_B.weight":               {4, 2},
		"base_model.model.model.layers.2.mlp.shared_expert_gate.lora_B.weight": {1, 2},
		"base_model.model.model.layers.1.mlp.down_proj.lora_A.weight":          {2, 40},
	} {
		if !slices.Equal(names[name], shape) {
			t.Errorf("%s: shape %v, want %v", name, names[name], shape)
		}
	}
	if n, err := ac.Params(c); err != nil || int(n) != a.NumParams() {
		t.Errorf("Params %d, adapter %d (%v)", n, a.NumParams(), err)
	}
	// Stacked experts named through target_modules, the router through
	// target_modules, and a regular-expression pattern are refused by name.
	for _, tc := range []struct{ field, js string }{
		{"target_modules", `"target_modules":["experts"]`},
		{"target_modules", `"target_modules":["gate"]`},
		{"target_parameters", `"target_modules":["q_proj"],"target_parameters":["mlp.experts.w1"]`},
		{"rank_pattern", `"target_modules":["q_proj"],"rank_pattern":{"^model.*":4}`},
	} {
		_, err := ParseAdapterConfig([]byte(`{"peft_type":"LORA","r":2,"lora_alpha":4,` + tc.js + `}`))
		if !errors.Is(err, ErrAdapter) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v", tc.js, err)
		}
	}
	// An expert module on a dense model matches nothing there.
	ac, _ = ParseAdapterConfig([]byte(`{"peft_type":"LORA","r":2,"lora_alpha":4,"target_modules":["q_proj"],"target_parameters":["gate_up_proj"]}`))
	if _, err := ac.NewAdapter(dense); !errors.Is(err, ErrAdapter) || !strings.Contains(err.Error(), "gate_up_proj") {
		t.Errorf("experts on a dense model: %v", err)
	}
}

// TestMoESaveLoad: a MoE model saved by Save (per-expert layout) loads
// back with the same logits, and a BackwardFull on it is refused.
func TestMoESaveLoad(t *testing.T) {
	for _, arch := range []Arch{Qwen3MoE, Qwen2MoE, Mixtral} {
		m := moeConfig()
		if arch != Qwen2MoE {
			delete(m, "shared_expert_intermediate_size")
			delete(m, "max_window_layers")
			m["sliding_window"] = nil
		}
		if arch == Mixtral {
			for _, k := range []string{"moe_intermediate_size", "mlp_only_layers", "decoder_sparse_step", "norm_topk_prob", "use_sliding_window"} {
				delete(m, k)
			}
		}
		m["architectures"], m["model_type"] = []string{string(arch)}, modelTypes[arch]
		c, err := ParseConfig(marshal(t, m))
		if err != nil {
			t.Fatal(arch, err)
		}
		w := randomWeights(t, c, 3)
		dir := t.TempDir()
		if err := Save(dir, w); err != nil {
			t.Fatal(err)
		}
		w2, err := Load(dir)
		if err != nil {
			t.Fatal(arch, err)
		}
		ids := []int{1, 5, 9, 2, 63, 7}
		m1, _ := New(w, nil, 1)
		m2, _ := New(w2, nil, 2)
		l1, _ := m1.Logits(ids, 2, 3)
		l2, _ := m2.Logits(ids, 2, 3)
		if !slices.Equal(l1, l2) {
			t.Errorf("%s: logits differ after Save and Load", arch)
		}
		act, _ := m1.Forward(ids, 2, 3)
		g, _ := NewWeights(c)
		if err := m1.BackwardFull(act, make([]float32, len(act.Logits)), g); err == nil {
			t.Errorf("%s: BackwardFull accepted", arch)
		}
	}
}

// routesOf returns every sparse layer's routes of md on ids.
func routesOf(t *testing.T, md *Model, ids []int, B, T int) [][]int {
	t.Helper()
	a, err := md.Forward(ids, B, T)
	if err != nil {
		t.Fatal(err)
	}
	var rs [][]int
	for l := range md.W.Cfg.Layers {
		rs = append(rs, a.Routes(l))
	}
	return rs
}

// TestMoEBackwardFiniteDifferences (no Python): on tiny Qwen3-MoE,
// Qwen2-MoE and Mixtral models with LoRA on the attention, the stacked
// experts, the router and the shared expert, the adapter gradient agrees
// with central differences (Richardson-combined, as
// TestBackwardFiniteDifferences) on the largest and a middle coordinate of
// every LoRA matrix. A coordinate whose perturbation changes a routing
// choice (the loss is not differentiable there) is skipped and counted.
func TestMoEBackwardFiniteDifferences(t *testing.T) {
	for _, arch := range []Arch{Qwen3MoE, Qwen2MoE, Mixtral} {
		t.Run(string(arch), func(t *testing.T) {
			m := moeConfig()
			m["architectures"], m["model_type"] = []string{string(arch)}, modelTypes[arch]
			m["vocab_size"], m["num_hidden_layers"] = 40, 2
			targets := `["q_proj","o_proj"],"target_parameters":["gate.weight","experts.gate_up_proj","experts.down_proj"]`
			switch arch {
			case Qwen2MoE:
				m["mlp_only_layers"] = []int{}
				targets = `["v_proj","shared_expert.up_proj","shared_expert_gate"],"target_parameters":["gate.weight","experts.down_proj"]`
			case Qwen3MoE:
				delete(m, "shared_expert_intermediate_size")
				delete(m, "max_window_layers")
				m["sliding_window"], m["norm_topk_prob"] = nil, true
			case Mixtral:
				for _, k := range []string{"shared_expert_intermediate_size", "max_window_layers", "moe_intermediate_size",
					"mlp_only_layers", "decoder_sparse_step", "norm_topk_prob", "use_sliding_window"} {
					delete(m, k)
				}
				m["sliding_window"], m["intermediate_size"] = nil, 20
			}
			c, err := ParseConfig(marshal(t, m))
			if err != nil {
				t.Fatal(err)
			}
			ac, err := ParseAdapterConfig([]byte(`{"peft_type":"LORA","r":2,"lora_alpha":4,"target_modules":` + targets + `}`))
			if err != nil {
				t.Fatal(err)
			}
			a, err := ac.NewAdapter(c)
			if err != nil {
				t.Fatal(err)
			}
			r := prng.New(21, 0x6c6f7261)
			for _, ts := range a.Tensors(c) {
				for i := range ts.Data {
					ts.Data[i] = float32(0.3 * r.Norm())
				}
			}
			w := randomWeights(t, c, 22)
			for l := range w.Layers {
				// A decisive router, so few perturbations change a route.
				if rw := w.Layers[l].W[Router].F32; rw != nil {
					for i := range rw {
						rw[i] *= 4
					}
				}
			}
			md, err := New(w, a, 2)
			if err != nil {
				t.Fatal(err)
			}
			B, T := 2, 5
			ids := randomTokens(23, B*T, c.Vocab)
			tg := randomTokens(24, B*T, c.Vocab)
			wt := randomWeightsVec(25, B*T)
			g := weightedGrad(t, md, ids, tg, wt, B, T)
			base := routesOf(t, md, ids, B, T)
			const eps = 5e-3
			checked, skipped, worst := 0, 0, 0.0
			for ti, gt := range g.Tensors(c) {
				p := a.Tensors(c)[ti].Data
				big := 0
				for i, v := range gt.Data {
					if math.Abs(float64(v)) > math.Abs(float64(gt.Data[big])) {
						big = i
					}
				}
				if gt.Data[big] == 0 {
					t.Errorf("%s: gradient is zero", gt.Name)
				}
				for _, i := range []int{big, len(p) / 2} {
					same := true
					for _, h := range []float32{-2 * eps, 2 * eps} {
						old := p[i]
						p[i] = old + h
						for l, rt := range routesOf(t, md, ids, B, T) {
							same = same && slices.Equal(rt, base[l])
						}
						p[i] = old
					}
					if !same {
						skipped++
						continue
					}
					fd := func(h float32) float64 {
						old := p[i]
						p[i] = old + h
						up := float64(p[i])
						lp := weightedLoss(t, md, ids, tg, wt, B, T)
						p[i] = old - h
						down := float64(p[i])
						lm := weightedLoss(t, md, ids, tg, wt, B, T)
						p[i] = old
						return (lp - lm) / (up - down)
					}
					f1, f2 := fd(eps), fd(2*eps)
					est := (4*f1 - f2) / 3
					got := float64(gt.Data[i])
					d := math.Abs(est - got)
					worst = max(worst, d/max(1, math.Abs(est)))
					if d > 5e-3*max(1, math.Abs(est)) {
						t.Errorf("%s[%d]: gradient %.6g, finite differences → %.6g", gt.Name, i, got, est)
					}
					checked++
				}
			}
			if checked < 2*len(g.Tensors(c))-4 {
				t.Fatalf("only %d coordinates checked (%d skipped for a routing change)", checked, skipped)
			}
			t.Logf("%d coordinates checked, %d skipped (routing changed), worst |Δ|/max(1,|fd|) = %.2g", checked, skipped, worst)
		})
	}
}
