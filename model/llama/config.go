package llama

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
)

// ErrConfig reports a config.json this engine refuses: malformed, absurd,
// or asking for a computation it does not implement. The message names the
// field.
var ErrConfig = errors.New("llama: unsupported config")

// Arch is a supported transformers architecture.
type Arch string

// The supported architectures (config.json "architectures").
const (
	Llama   Arch = "LlamaForCausalLM"
	Qwen2   Arch = "Qwen2ForCausalLM"
	Qwen3   Arch = "Qwen3ForCausalLM"
	Mistral Arch = "MistralForCausalLM"
	// Mixture-of-Experts architectures (docs/moe.md).
	Qwen3MoE Arch = "Qwen3MoeForCausalLM"
	Qwen2MoE Arch = "Qwen2MoeForCausalLM"
	Mixtral  Arch = "MixtralForCausalLM"
)

var modelTypes = map[Arch]string{Llama: "llama", Qwen2: "qwen2", Qwen3: "qwen3", Mistral: "mistral",
	Qwen3MoE: "qwen3_moe", Qwen2MoE: "qwen2_moe", Mixtral: "mixtral"}

// archList names the supported architectures, for error messages.
const archList = "LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM, Qwen3MoeForCausalLM, Qwen2MoeForCausalLM, MixtralForCausalLM"

// MoE reports whether a is a Mixture-of-Experts architecture.
func (a Arch) MoE() bool { return a == Qwen3MoE || a == Qwen2MoE || a == Mixtral }

// Limits on sizes, checked before anything is allocated. They are far above
// any model this engine can run on a CPU and far below what overflows.
const (
	maxConfigBytes   = 1 << 20
	maxVocab         = 1 << 22
	maxHidden        = 1 << 16
	maxIntermediate  = 1 << 18
	maxLayers        = 1 << 10
	maxHeads         = 1 << 10
	maxHeadDim       = 1 << 10
	maxAttnWidth     = 1 << 17 // heads·head_dim
	maxPositions     = 1 << 24
	maxJSONDepth     = 16
	maxExperts       = 1 << 10
	defaultRopeTheta = 10000.0
)

// Llama3Scaling is the Llama 3.1 rotary frequency scaling (rope_type
// "llama3"), as transformers' _compute_llama3_parameters applies it.
type Llama3Scaling struct {
	Factor, LowFreqFactor, HighFreqFactor float64
	OriginalMaxPositions                  int
}

// Config is what a config.json says about the computation, after defaults
// are filled in as transformers fills them for the architecture.
type Config struct {
	Arch         Arch
	Vocab        int // vocab_size
	Hidden       int // hidden_size
	Intermediate int // intermediate_size
	Layers       int // num_hidden_layers
	Heads        int // num_attention_heads
	KVHeads      int // num_key_value_heads (grouped-query attention)
	HeadDim      int // head_dim
	MaxPositions int // max_position_embeddings: positions 0 … MaxPositions-1
	NormEps      float64
	RopeTheta    float64
	RopeScaling  *Llama3Scaling // nil: plain RoPE
	Tied         bool           // tie_word_embeddings: lm_head is embed_tokens
	QKVBias      bool           // q_proj, k_proj, v_proj have biases
	OBias        bool           // o_proj has a bias
	MLPBias      bool           // gate_proj, up_proj, down_proj have biases
	QKNorm       bool           // Qwen3: RMSNorm over each head of q and k
	DType        string         // torch_dtype / dtype ("bfloat16", …); "" when absent
	BOS, PAD     int            // -1 when absent
	EOS          []int
	MoE          MoEConfig // the experts of a MoE architecture; zero otherwise
}

// MoEConfig is what a Mixture-of-Experts config says about its sparse
// layers (transformers' Qwen3MoeConfig, Qwen2MoeConfig, MixtralConfig).
type MoEConfig struct {
	Experts      int   // num_experts / num_local_experts
	TopK         int   // num_experts_per_tok
	Intermediate int   // each expert's width: moe_intermediate_size (Mixtral: intermediate_size)
	Shared       int   // Qwen2-MoE shared_expert_intermediate_size; 0: no shared expert
	NormTopK     bool  // norm_topk_prob: renormalise the top-k probabilities (Mixtral always)
	SparseStep   int   // decoder_sparse_step: layer l is sparse when (l+1) % SparseStep == 0
	MLPOnly      []int // mlp_only_layers: dense layers whatever SparseStep says
	// Training-loss settings transformers applies only when asked for
	// router logits with labels; the forward pass does not depend on them.
	RouterAuxLossCoef  float64 // router_aux_loss_coef
	OutputRouterLogits bool    // output_router_logits
	// FusedExperts is the checkpoint's expert layout, read from its tensor
	// names by Open (not a config.json key): experts stacked in
	// mlp.experts.gate_up_proj [E, 2I, H] and mlp.experts.down_proj
	// [E, H, I] (transformers 5's in-memory layout), or, when false, one
	// module per expert as save_pretrained writes them.
	FusedExperts bool
}

// Sparse reports whether layer l is a Mixture-of-Experts block (router and
// experts) rather than a dense SwiGLU MLP.
func (c Config) Sparse(l int) bool {
	if !c.Arch.MoE() || c.MoE.Experts < 1 || slices.Contains(c.MoE.MLPOnly, l) {
		return false
	}
	return c.MoE.SparseStep > 0 && (l+1)%c.MoE.SparseStep == 0
}

// rawConfig is config.json as a key → raw value map.
type rawConfig struct {
	m    map[string]json.RawMessage
	used map[string]bool
}

func cfgErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: field %q: %s", ErrConfig, field, fmt.Sprintf(format, args...))
}

func (r *rawConfig) has(k string) bool {
	v, ok := r.m[k]
	return ok && !bytes.Equal(v, []byte("null"))
}

// take marks k as understood and returns its raw value (nil when absent or null).
func (r *rawConfig) take(k string) json.RawMessage {
	r.used[k] = true
	v, ok := r.m[k]
	if !ok || bytes.Equal(v, []byte("null")) {
		return nil
	}
	return v
}

var intRE = regexp.MustCompile(`^-?(0|[1-9][0-9]{0,17})$`)

func parseInt(field string, v json.RawMessage) (int, error) {
	if !intRE.Match(v) {
		return 0, cfgErr(field, "%.40s is not an integer", v)
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, cfgErr(field, "%v", err)
	}
	return int(n), nil
}

func parseFloat(field string, v json.RawMessage) (float64, error) {
	var f float64
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) || json.Unmarshal(v, &f) != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, cfgErr(field, "%.40s is not a finite number", v)
	}
	return f, nil
}

func parseBool(field string, v json.RawMessage) (bool, error) {
	switch string(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, cfgErr(field, "%.40s is not true or false", v)
}

func parseString(field string, v json.RawMessage) (string, error) {
	var s string
	if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
		return "", cfgErr(field, "%.40s is not a string", v)
	}
	return s, nil
}

// intField returns the integer at k, def when absent or null, and an error
// when required and absent or when outside [lo, hi].
func (r *rawConfig) intField(k string, required bool, def, lo, hi int) (int, error) {
	v := r.take(k)
	if v == nil {
		if required {
			return 0, cfgErr(k, "missing")
		}
		return def, nil
	}
	n, err := parseInt(k, v)
	if err != nil {
		return 0, err
	}
	if n < lo || n > hi {
		return 0, cfgErr(k, "%d is outside [%d, %d]", n, lo, hi)
	}
	return n, nil
}

func (r *rawConfig) boolField(k string, def bool) (bool, error) {
	v := r.take(k)
	if v == nil {
		return def, nil
	}
	return parseBool(k, v)
}

// mustBe accepts k only when absent, null or one of the given JSON values
// (compared after compaction): keys whose other values would change the
// computation.
func (r *rawConfig) mustBe(k string, ok ...string) error {
	v := r.take(k)
	if v == nil {
		return nil
	}
	var c bytes.Buffer
	if json.Compact(&c, v) == nil && slices.Contains(ok, c.String()) {
		return nil
	}
	return cfgErr(k, "%.60s is not supported (only %v or absent)", v, ok)
}

// metadataKeys are config.json keys that do not change the forward pass or
// its gradients: bookkeeping, generation defaults, label maps.
var metadataKeys = []string{
	"_name_or_path", "transformers_version", "use_cache", "initializer_range", "is_llama_config",
	"id2label", "label2id", "num_labels", "problem_type", "output_attentions", "output_hidden_states",
	"return_dict", "use_return_dict", "chunk_size_feed_forward", "tokenizer_class", "torchscript",
	"use_bfloat16", "finetuning_task", "prefix", "task_specific_params", "sep_token_id",
	"decoder_start_token_id", "tf_legacy_loss", "_attn_implementation_autoset", "_attn_implementation", "attn_implementation",
	"unsloth_version", "unsloth_fixed",
	"max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
	"diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
	"length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
	"num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
	"forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
	"suppress_tokens", "begin_suppress_tokens", "tie_encoder_decoder", "cross_attention_hidden_size",
}

// ParseConfig reads config.json strictly: it must be one JSON object with
// no duplicate keys, name exactly one supported architecture, and hold
// only keys this engine understands (computation keys with supported
// values, and the metadata keys of an explicit allow-list). Anything else,
// such as MoE keys, an active sliding window or an unknown rope_scaling, is
// refused with an error naming the field. Sizes are bounded before the
// caller allocates anything.
func ParseConfig(b []byte) (Config, error) {
	if len(b) > maxConfigBytes {
		return Config{}, fmt.Errorf("%w: %d bytes, more than %d", ErrConfig, len(b), maxConfigBytes)
	}
	if err := checkJSON(b); err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	r := &rawConfig{used: map[string]bool{}}
	if err := json.Unmarshal(b, &r.m); err != nil || r.m == nil {
		return Config{}, fmt.Errorf("%w: not a JSON object", ErrConfig)
	}
	c, err := r.parse()
	if err != nil {
		return Config{}, err
	}
	return c, c.Validate()
}

func (r *rawConfig) parse() (Config, error) {
	var c Config
	// Architecture first: defaults depend on it.
	v := r.take("architectures")
	var archs []string
	if v == nil || json.Unmarshal(v, &archs) != nil || len(archs) != 1 {
		return c, cfgErr("architectures", "want a list of exactly one of %s", archList)
	}
	c.Arch = Arch(archs[0])
	mt, ok := modelTypes[c.Arch]
	if !ok {
		return c, cfgErr("architectures", "%q is not supported (%s are)", archs[0], archList)
	}
	if v := r.take("model_type"); v != nil {
		s, err := parseString("model_type", v)
		if err != nil {
			return c, err
		}
		if s != mt {
			return c, cfgErr("model_type", "%q does not match architecture %s (want %q)", s, c.Arch, mt)
		}
	}
	var err error
	fields := []struct {
		k        string
		dst      *int
		required bool
		def      int
		lo, hi   int
	}{
		{"vocab_size", &c.Vocab, true, 0, 2, maxVocab},
		{"hidden_size", &c.Hidden, true, 0, 1, maxHidden},
		{"intermediate_size", &c.Intermediate, true, 0, 1, maxIntermediate},
		{"num_hidden_layers", &c.Layers, true, 0, 1, maxLayers},
		{"num_attention_heads", &c.Heads, true, 0, 1, maxHeads},
	}
	for _, f := range fields {
		if *f.dst, err = r.intField(f.k, f.required, f.def, f.lo, f.hi); err != nil {
			return c, err
		}
	}
	// num_key_value_heads: absent means the class default (Qwen2 and Qwen3
	// 32, Mistral 8, Llama the number of heads).
	kvDef := map[Arch]int{Llama: c.Heads, Qwen2: 32, Qwen3: 32, Mistral: 8, Qwen3MoE: 4, Qwen2MoE: 16, Mixtral: 8}[c.Arch]
	if c.KVHeads, err = r.intField("num_key_value_heads", false, kvDef, 1, maxHeads); err != nil {
		return c, err
	}
	// head_dim: Qwen3's default is 128; the others (Qwen3-MoE included)
	// derive it. Mixtral writes "head_dim": null for the derived value.
	hdDef := 128
	if c.Arch != Qwen3 {
		if c.Hidden%c.Heads != 0 && !r.has("head_dim") {
			return c, cfgErr("hidden_size", "%d is not divisible by num_attention_heads %d", c.Hidden, c.Heads)
		}
		hdDef = c.Hidden / c.Heads
	}
	if c.HeadDim, err = r.intField("head_dim", false, hdDef, 1, maxHeadDim); err != nil {
		return c, err
	}
	maxPosDef := map[Arch]int{Llama: 2048, Qwen2: 32768, Qwen3: 32768, Mistral: 4096 * 32, Qwen3MoE: 32768, Qwen2MoE: 32768, Mixtral: 4096 * 32}[c.Arch]
	if c.MaxPositions, err = r.intField("max_position_embeddings", false, maxPosDef, 1, maxPositions); err != nil {
		return c, err
	}
	c.NormEps = 1e-6
	if v := r.take("rms_norm_eps"); v != nil {
		if c.NormEps, err = parseFloat("rms_norm_eps", v); err != nil {
			return c, err
		}
	}
	if v := r.take("hidden_act"); v != nil {
		s, err := parseString("hidden_act", v)
		if err != nil {
			return c, err
		}
		if s != "silu" {
			return c, cfgErr("hidden_act", "%q is not supported (only silu)", s)
		}
	}
	if c.Tied, err = r.boolField("tie_word_embeddings", false); err != nil {
		return c, err
	}
	// Biases. Qwen2 always has q/k/v biases and none on o; Llama and Qwen3
	// follow attention_bias; Llama has mlp_bias.
	attnBias, err := r.boolField("attention_bias", false)
	if err != nil {
		return c, err
	}
	mlpBias, err := r.boolField("mlp_bias", false)
	if err != nil {
		return c, err
	}
	switch c.Arch {
	case Qwen2:
		c.QKVBias = true
	case Llama, Qwen3, Qwen3MoE:
		c.QKVBias, c.OBias = attnBias, attnBias
	case Qwen2MoE:
		// Qwen2-MoE: q/k/v biases follow qkv_bias (default true), none on o.
		if c.QKVBias, err = r.boolField("qkv_bias", true); err != nil {
			return c, err
		}
	}
	if attnBias && (c.Arch == Qwen2 || c.Arch == Mistral || c.Arch == Mixtral || c.Arch == Qwen2MoE) {
		return c, cfgErr("attention_bias", "true is not used by %s (its biases are fixed by the architecture)", c.Arch)
	}
	if mlpBias && c.Arch != Llama {
		return c, cfgErr("mlp_bias", "true is not used by %s", c.Arch)
	}
	c.MLPBias = mlpBias
	c.QKNorm = c.Arch == Qwen3 || c.Arch == Qwen3MoE
	if c.Arch.MoE() {
		if err := r.parseMoE(&c); err != nil {
			return c, err
		}
	}
	if err := r.parseRope(&c); err != nil {
		return c, err
	}
	if err := r.parseWindow(c); err != nil {
		return c, err
	}
	if err := r.parseDType(&c); err != nil {
		return c, err
	}
	if err := r.parseTokens(&c); err != nil {
		return c, err
	}
	if v := r.take("attention_dropout"); v != nil {
		f, err := parseFloat("attention_dropout", v)
		if err != nil {
			return c, err
		}
		if f != 0 {
			return c, cfgErr("attention_dropout", "%v is not supported (only 0)", f)
		}
	}
	if v := r.take("pretraining_tp"); v != nil {
		// transformers computes the same function for any value.
		if _, err := parseInt("pretraining_tp", v); err != nil {
			return c, err
		}
	}
	for k, ok := range map[string][]string{
		"rope_interleaved":    {"false"},
		"use_mrope":           {"false"},
		"is_encoder_decoder":  {"false"},
		"is_decoder":          {"false", "true"},
		"add_cross_attention": {"false"},
		"pruned_heads":        {"{}"},
	} {
		if err := r.mustBe(k, ok...); err != nil {
			return c, err
		}
	}
	for _, k := range metadataKeys {
		r.used[k] = true
	}
	var unknown []string
	for k := range r.m {
		if !r.used[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return c, cfgErr(unknown[0], "unknown key (it may change the computation; unknown keys: %q)", unknown)
	}
	return c, nil
}

// parseRope reads rope_theta, rope_scaling and rope_parameters the way
// transformers 5 merges them: rope_scaling, when set, replaces
// rope_parameters, and a top-level rope_theta fills in a missing one.
func (r *rawConfig) parseRope(c *Config) error {
	c.RopeTheta = defaultRopeTheta
	if c.Arch == Mixtral {
		c.RopeTheta = 1e6 // MixtralConfig.default_theta
	}
	topTheta := r.take("rope_theta")
	if topTheta != nil {
		t, err := parseFloat("rope_theta", topTheta)
		if err != nil {
			return err
		}
		c.RopeTheta = t
	}
	if v := r.take("partial_rotary_factor"); v != nil {
		if f, err := parseFloat("partial_rotary_factor", v); err != nil || f != 1 {
			return cfgErr("partial_rotary_factor", "%.40s is not supported (only 1)", v)
		}
	}
	scaling, params := r.take("rope_scaling"), r.take("rope_parameters")
	name, raw := "rope_scaling", scaling
	if scaling != nil && params != nil {
		return cfgErr("rope_scaling", "set together with rope_parameters; give one")
	}
	if scaling == nil {
		name, raw = "rope_parameters", params
	}
	if raw == nil {
		return nil
	}
	var m map[string]json.RawMessage
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return cfgErr(name, "%.60s is not an object", raw)
	}
	sub := &rawConfig{m: m, used: map[string]bool{}}
	typ := "default"
	for _, k := range []string{"type", "rope_type"} {
		if v := sub.take(k); v != nil {
			s, err := parseString(name+"."+k, v)
			if err != nil {
				return err
			}
			if k == "rope_type" && sub.has("type") && s != typ {
				return cfgErr(name+".rope_type", "%q disagrees with type %q", s, typ)
			}
			typ = s
		}
	}
	if v := sub.take("rope_theta"); v != nil {
		t, err := parseFloat(name+".rope_theta", v)
		if err != nil {
			return err
		}
		c.RopeTheta = t
	}
	if v := sub.take("partial_rotary_factor"); v != nil {
		if f, err := parseFloat(name+".partial_rotary_factor", v); err != nil || f != 1 {
			return cfgErr(name+".partial_rotary_factor", "%.40s is not supported (only 1)", v)
		}
	}
	switch typ {
	case "default":
	case "llama3":
		s := &Llama3Scaling{}
		for _, f := range []struct {
			k   string
			dst *float64
		}{{"factor", &s.Factor}, {"low_freq_factor", &s.LowFreqFactor}, {"high_freq_factor", &s.HighFreqFactor}} {
			v := sub.take(f.k)
			if v == nil {
				return cfgErr(name+"."+f.k, "missing (required by rope_type llama3)")
			}
			x, err := parseFloat(name+"."+f.k, v)
			if err != nil {
				return err
			}
			if !(x > 0) || x > 1e6 {
				return cfgErr(name+"."+f.k, "%v is outside (0, 1e6]", x)
			}
			*f.dst = x
		}
		if s.Factor < 1 {
			return cfgErr(name+".factor", "%v < 1", s.Factor)
		}
		if !(s.HighFreqFactor > s.LowFreqFactor) {
			return cfgErr(name+".high_freq_factor", "%v must exceed low_freq_factor %v", s.HighFreqFactor, s.LowFreqFactor)
		}
		s.OriginalMaxPositions = c.MaxPositions
		if v := sub.take("original_max_position_embeddings"); v != nil {
			k := name + ".original_max_position_embeddings"
			n, err := parseInt(k, v)
			if err != nil {
				return err
			}
			if n < 1 || n > maxPositions {
				return cfgErr(k, "%d is outside [1, %d]", n, maxPositions)
			}
			s.OriginalMaxPositions = n
		}
		c.RopeScaling = s
	default:
		return cfgErr(name+".rope_type", "%q is not supported (only default and llama3)", typ)
	}
	for k := range sub.m {
		if !sub.used[k] {
			return cfgErr(name+"."+k, "unknown key for rope_type %s", typ)
		}
	}
	if !(c.RopeTheta > 0) {
		return cfgErr("rope_theta", "%v is not positive", c.RopeTheta)
	}
	return nil
}

// parseWindow accepts sliding-window keys only when no layer's window is
// shorter than the context, so attention is full everywhere.
func (r *rawConfig) parseWindow(c Config) error {
	_, present := r.m["sliding_window"]
	window := -1 // none
	if !present && c.Arch != Llama && c.Arch != Mixtral {
		window = 4096 // the class default when the key is absent
	}
	if v := r.take("sliding_window"); v != nil {
		w, err := parseInt("sliding_window", v)
		if err != nil {
			return err
		}
		window = w
	}
	short := window >= 0 && window < c.MaxPositions
	switch c.Arch {
	case Llama:
		if window >= 0 {
			return cfgErr("sliding_window", "not a key of %s", c.Arch)
		}
	case Mistral, Mixtral:
		if short {
			return cfgErr("sliding_window", "%d is shorter than max_position_embeddings %d; sliding-window attention is not supported", window, c.MaxPositions)
		}
	case Qwen3MoE:
		// Every layer slides when use_sliding_window is set;
		// max_window_layers (in published Qwen3-MoE configs) is not read
		// by transformers' Qwen3-MoE.
		use, err := r.boolField("use_sliding_window", false)
		if err != nil {
			return err
		}
		if _, err := r.intField("max_window_layers", false, 0, 0, math.MaxInt32); err != nil {
			return err
		}
		if use && short {
			return cfgErr("use_sliding_window", "true with sliding_window %d < max_position_embeddings %d is not supported", window, c.MaxPositions)
		}
	case Qwen2, Qwen3, Qwen2MoE:
		use, err := r.boolField("use_sliding_window", false)
		if err != nil {
			return err
		}
		maxWindowLayers, err := r.intField("max_window_layers", false, 28, 0, math.MaxInt32)
		if err != nil {
			return err
		}
		if use && short && maxWindowLayers < c.Layers {
			return cfgErr("use_sliding_window", "true with sliding_window %d < max_position_embeddings %d is not supported", window, c.MaxPositions)
		}
	}
	for _, k := range []string{"use_sliding_window", "max_window_layers"} {
		if !r.used[k] && r.has(k) {
			return cfgErr(k, "not a key of %s", c.Arch)
		}
	}
	if v := r.take("layer_types"); v != nil {
		var lt []string
		if json.Unmarshal(v, &lt) != nil || len(lt) != c.Layers {
			return cfgErr("layer_types", "want a list of %d strings", c.Layers)
		}
		for i, t := range lt {
			if t != "full_attention" {
				return cfgErr("layer_types", "layer %d is %q; only full_attention is supported", i, t)
			}
		}
	}
	return nil
}

func (r *rawConfig) parseDType(c *Config) error {
	for _, k := range []string{"torch_dtype", "dtype"} {
		v := r.take(k)
		if v == nil {
			continue
		}
		s, err := parseString(k, v)
		if err != nil {
			return err
		}
		if s != "float32" && s != "bfloat16" && s != "float16" {
			return cfgErr(k, "%q is not supported (float32, bfloat16, float16)", s)
		}
		if c.DType != "" && c.DType != s {
			return cfgErr(k, "%q disagrees with torch_dtype %q", s, c.DType)
		}
		c.DType = s
	}
	return nil
}

func (r *rawConfig) parseTokens(c *Config) error {
	var err error
	bosDef := -1 // an explicit null is none; an absent key is the class default
	if _, present := r.m["bos_token_id"]; !present && (c.Arch == Llama || c.Arch == Mistral || c.Arch == Mixtral) {
		bosDef = 1
	}
	if c.BOS, err = r.intField("bos_token_id", false, bosDef, 0, c.Vocab-1); err != nil {
		return err
	}
	if c.PAD, err = r.intField("pad_token_id", false, -1, 0, c.Vocab-1); err != nil {
		return err
	}
	v := r.take("eos_token_id")
	if v == nil {
		if _, present := r.m["eos_token_id"]; !present && (c.Arch == Llama || c.Arch == Mistral || c.Arch == Mixtral) {
			c.EOS = []int{2}
		}
		return nil
	}
	if v[0] != '[' {
		v = json.RawMessage("[" + string(v) + "]")
	}
	var ids []json.RawMessage
	if json.Unmarshal(v, &ids) != nil || len(ids) > 64 {
		return cfgErr("eos_token_id", "want an integer or a list of at most 64")
	}
	for _, id := range ids {
		n, err := parseInt("eos_token_id", id)
		if err != nil {
			return err
		}
		if n < 0 || n >= c.Vocab {
			return cfgErr("eos_token_id", "%d is outside the vocabulary of %d", n, c.Vocab)
		}
		c.EOS = append(c.EOS, n)
	}
	return nil
}

// Validate checks the relations between sizes; ParseConfig calls it.
func (c Config) Validate() error {
	switch {
	case modelTypes[c.Arch] == "":
		return cfgErr("architectures", "%q is not supported", c.Arch)
	case c.Vocab < 2 || c.Vocab > maxVocab:
		return cfgErr("vocab_size", "%d is outside [2, %d]", c.Vocab, maxVocab)
	case c.Hidden < 1 || c.Hidden > maxHidden:
		return cfgErr("hidden_size", "%d is outside [1, %d]", c.Hidden, maxHidden)
	case c.Intermediate < 1 || c.Intermediate > maxIntermediate:
		return cfgErr("intermediate_size", "%d is outside [1, %d]", c.Intermediate, maxIntermediate)
	case c.Layers < 1 || c.Layers > maxLayers:
		return cfgErr("num_hidden_layers", "%d is outside [1, %d]", c.Layers, maxLayers)
	case c.Heads < 1 || c.Heads > maxHeads:
		return cfgErr("num_attention_heads", "%d is outside [1, %d]", c.Heads, maxHeads)
	case c.KVHeads < 1 || c.KVHeads > c.Heads || c.Heads%c.KVHeads != 0:
		return cfgErr("num_key_value_heads", "%d does not divide num_attention_heads %d", c.KVHeads, c.Heads)
	case c.HeadDim < 2 || c.HeadDim > maxHeadDim || c.HeadDim%2 != 0:
		return cfgErr("head_dim", "%d is not an even number in [2, %d]", c.HeadDim, maxHeadDim)
	case c.Heads*c.HeadDim > maxAttnWidth:
		return cfgErr("head_dim", "num_attention_heads·head_dim = %d exceeds %d", c.Heads*c.HeadDim, maxAttnWidth)
	case c.MaxPositions < 1 || c.MaxPositions > maxPositions:
		return cfgErr("max_position_embeddings", "%d is outside [1, %d]", c.MaxPositions, maxPositions)
	case !(c.NormEps > 0 && c.NormEps < 1):
		return cfgErr("rms_norm_eps", "%v is outside (0, 1)", c.NormEps)
	case !(c.RopeTheta > 0) || math.IsInf(c.RopeTheta, 0):
		return cfgErr("rope_theta", "%v is not positive and finite", c.RopeTheta)
	}
	if c.Arch.MoE() {
		return c.MoE.validate(c)
	}
	if c.MoE.Experts != 0 || c.MoE.TopK != 0 {
		return cfgErr("num_experts", "set for the dense architecture %s", c.Arch)
	}
	return nil
}

// validate checks a MoE config's sizes against c.
func (m MoEConfig) validate(c Config) error {
	switch {
	case m.Experts < 1 || m.Experts > maxExperts:
		return cfgErr("num_experts", "%d is outside [1, %d]", m.Experts, maxExperts)
	case m.TopK < 1 || m.TopK > m.Experts:
		return cfgErr("num_experts_per_tok", "%d is outside [1, num_experts %d]", m.TopK, m.Experts)
	case m.Intermediate < 1 || m.Intermediate > maxIntermediate:
		return cfgErr("moe_intermediate_size", "%d is outside [1, %d]", m.Intermediate, maxIntermediate)
	case m.Shared < 0 || m.Shared > maxIntermediate || (m.Shared > 0) != (c.Arch == Qwen2MoE):
		return cfgErr("shared_expert_intermediate_size", "%d is not valid for %s", m.Shared, c.Arch)
	case m.SparseStep < 1 || m.SparseStep > maxLayers:
		return cfgErr("decoder_sparse_step", "%d is outside [1, %d]", m.SparseStep, maxLayers)
	case !(m.RouterAuxLossCoef >= 0) || math.IsInf(m.RouterAuxLossCoef, 0):
		return cfgErr("router_aux_loss_coef", "%v is not a finite number ≥ 0", m.RouterAuxLossCoef)
	}
	for _, l := range m.MLPOnly {
		if l < 0 || l >= c.Layers {
			return cfgErr("mlp_only_layers", "layer %d is outside [0, %d)", l, c.Layers)
		}
	}
	return nil
}

// parseMoE reads the Mixture-of-Experts keys of Qwen3-MoE, Qwen2-MoE and
// Mixtral, with their config classes' defaults.
func (r *rawConfig) parseMoE(c *Config) error {
	m := &c.MoE
	// The expert count: Qwen configs call it num_experts, Mixtral
	// num_local_experts; both classes map one name onto the other
	// (Qwen3MoeConfig saves num_local_experts), so both are read.
	def := map[Arch]int{Qwen3MoE: 128, Qwen2MoE: 60, Mixtral: 8}[c.Arch]
	var ne, nl int
	var err error
	if ne, err = r.intField("num_experts", false, -1, 0, math.MaxInt32); err != nil {
		return err
	}
	if nl, err = r.intField("num_local_experts", false, -1, 0, math.MaxInt32); err != nil {
		return err
	}
	switch {
	case ne >= 0 && nl >= 0 && ne != nl:
		return cfgErr("num_local_experts", "%d disagrees with num_experts %d", nl, ne)
	case ne >= 0:
		m.Experts = ne
	case nl >= 0:
		m.Experts = nl
	default:
		m.Experts = def
	}
	topDef := map[Arch]int{Qwen3MoE: 8, Qwen2MoE: 4, Mixtral: 2}[c.Arch]
	if m.TopK, err = r.intField("num_experts_per_tok", false, topDef, 1, maxExperts); err != nil {
		return err
	}
	if c.Arch == Mixtral {
		m.Intermediate, m.NormTopK, m.SparseStep = c.Intermediate, true, 1
		if v := r.take("router_jitter_noise"); v != nil {
			f, err := parseFloat("router_jitter_noise", v)
			if err != nil {
				return err
			}
			if f != 0 {
				return cfgErr("router_jitter_noise", "%v is not supported (only 0: noise on the router's input in training)", f)
			}
		}
	} else {
		imDef := map[Arch]int{Qwen3MoE: 768, Qwen2MoE: 1408}[c.Arch]
		if m.Intermediate, err = r.intField("moe_intermediate_size", false, imDef, 1, maxIntermediate); err != nil {
			return err
		}
		if c.Arch == Qwen2MoE {
			if m.Shared, err = r.intField("shared_expert_intermediate_size", false, 5632, 1, maxIntermediate); err != nil {
				return err
			}
		}
		if m.NormTopK, err = r.boolField("norm_topk_prob", false); err != nil {
			return err
		}
		if m.SparseStep, err = r.intField("decoder_sparse_step", false, 1, 1, maxLayers); err != nil {
			return err
		}
		if v := r.take("mlp_only_layers"); v != nil {
			var ls []json.RawMessage
			if json.Unmarshal(v, &ls) != nil || len(ls) > maxLayers {
				return cfgErr("mlp_only_layers", "%.60s is not a list of layer indices", v)
			}
			for _, x := range ls {
				l, err := parseInt("mlp_only_layers", x)
				if err != nil {
					return err
				}
				if l < 0 || l >= c.Layers {
					return cfgErr("mlp_only_layers", "layer %d is outside [0, %d)", l, c.Layers)
				}
				m.MLPOnly = append(m.MLPOnly, l)
			}
		}
	}
	m.RouterAuxLossCoef = 0.001
	if v := r.take("router_aux_loss_coef"); v != nil {
		if m.RouterAuxLossCoef, err = parseFloat("router_aux_loss_coef", v); err != nil {
			return err
		}
	}
	if m.OutputRouterLogits, err = r.boolField("output_router_logits", false); err != nil {
		return err
	}
	return nil
}

// NumParams is the number of base parameters the config describes.
func (c Config) NumParams() int64 {
	var n int64
	for _, t := range c.tensors() {
		n += int64(t.numel())
	}
	return n
}

// checkJSON reports syntax errors, duplicate object keys and nesting
// deeper than maxJSONDepth anywhere in b, which must hold one value.
func checkJSON(b []byte) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := checkValue(d, 0); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

func checkValue(d *json.Decoder, depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("nested deeper than %d", maxJSONDepth)
	}
	t, err := d.Token()
	if err != nil {
		return err
	}
	switch t {
	case json.Delim('{'):
		seen := map[string]bool{}
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return err
			}
			ks, _ := k.(string)
			if seen[ks] {
				return fmt.Errorf("duplicate key %q", ks)
			}
			seen[ks] = true
			if err := checkValue(d, depth+1); err != nil {
				return err
			}
		}
		_, err = d.Token()
		return err
	case json.Delim('['):
		for d.More() {
			if err := checkValue(d, depth+1); err != nil {
				return err
			}
		}
		_, err = d.Token()
		return err
	}
	return nil
}
