package llama

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/zooai/gym/internal/atomicfile"
	"github.com/zooai/gym/safetensors"
)

// ConfigJSON returns c as a config.json transformers loads (the keys
// save_pretrained writes that matter, sorted, 2-space indent).
func (c Config) ConfigJSON() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	m := map[string]any{
		"architectures":           []string{string(c.Arch)},
		"model_type":              modelTypes[c.Arch],
		"vocab_size":              c.Vocab,
		"hidden_size":             c.Hidden,
		"intermediate_size":       c.Intermediate,
		"num_hidden_layers":       c.Layers,
		"num_attention_heads":     c.Heads,
		"num_key_value_heads":     c.KVHeads,
		"head_dim":                c.HeadDim,
		"max_position_embeddings": c.MaxPositions,
		"rms_norm_eps":            c.NormEps,
		"hidden_act":              "silu",
		"tie_word_embeddings":     c.Tied,
		"attention_dropout":       0.0,
		"dtype":                   "float32",
	}
	rope := map[string]any{"rope_type": "default", "rope_theta": c.RopeTheta}
	if s := c.RopeScaling; s != nil {
		rope["rope_type"] = "llama3"
		rope["factor"] = s.Factor
		rope["low_freq_factor"] = s.LowFreqFactor
		rope["high_freq_factor"] = s.HighFreqFactor
		rope["original_max_position_embeddings"] = s.OriginalMaxPositions
	}
	m["rope_parameters"] = rope
	switch c.Arch {
	case Llama:
		m["attention_bias"], m["mlp_bias"] = c.QKVBias, c.MLPBias
	case Qwen3:
		m["attention_bias"] = c.QKVBias
		fallthrough
	case Qwen2:
		m["use_sliding_window"], m["sliding_window"] = false, nil
	case Mistral:
		m["sliding_window"] = nil
	}
	ids := map[string]int{"bos_token_id": c.BOS, "pad_token_id": c.PAD}
	for k, v := range ids {
		if v >= 0 {
			m[k] = v
		} else {
			m[k] = nil
		}
	}
	switch len(c.EOS) {
	case 0:
		m["eos_token_id"] = nil
	case 1:
		m["eos_token_id"] = c.EOS[0]
	default:
		m["eos_token_id"] = c.EOS
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Save writes w to dir as config.json and model.safetensors (F32, with the
// {"format": "pt"} metadata transformers writes), a directory Load and
// transformers' from_pretrained both read.
func Save(dir string, w *Weights) error {
	cj, err := w.Cfg.ConfigJSON()
	if err != nil {
		return err
	}
	st, err := EncodeSafetensors(w, nil)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, WeightsFile), 0o644, true, st); err != nil {
		return err
	}
	return atomicfile.WriteBytes(filepath.Join(dir, ConfigFile), 0o644, true, cj)
}

// EncodeSafetensors returns w as the model.safetensors Save writes: every
// tensor in F32 under its transformers name, in a fixed order, with the
// metadata {"format": "pt"} plus meta (which may not set "format").
func EncodeSafetensors(w *Weights, meta map[string]string) ([]byte, error) {
	md := map[string]string{"format": "pt"}
	for k, v := range meta {
		if k == "format" {
			return nil, fmt.Errorf("llama: metadata key %q is reserved", k)
		}
		md[k] = v
	}
	var ts []safetensors.Tensor
	for _, t := range w.Cfg.specs(w) {
		shape := make([]uint64, len(t.shape))
		for i, d := range t.shape {
			shape[i] = uint64(d)
		}
		data := *t.dst
		if len(data) != t.numel() {
			return nil, fmt.Errorf("llama: tensor %q has %d values, want %d", t.name, len(data), t.numel())
		}
		b := make([]byte, 4*len(data))
		for i, v := range data {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		ts = append(ts, safetensors.Tensor{Name: t.name, DType: "F32", Shape: shape, Data: b})
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, ts, md); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Tensor is a named view of one base parameter.
type Tensor struct {
	Name  string // transformers' name: model.layers.0.self_attn.q_proj.weight, …
	Shape []int
	Data  []float32
}

// Tensors returns w's parameters in the fixed order of its checkpoint
// (model.safetensors), each once: with tied embeddings there is no
// lm_head.weight, the head being model.embed_tokens.weight.
func (w *Weights) Tensors() []Tensor {
	var ts []Tensor
	for _, t := range w.Cfg.specs(w) {
		ts = append(ts, Tensor{t.name, t.shape, *t.dst})
	}
	return ts
}

// Metadata returns the "__metadata__" of a checkpoint's model.safetensors
// (nil for a sharded checkpoint).
func (ck *Checkpoint) Metadata() map[string]string {
	if len(ck.files) != 1 {
		return nil
	}
	return ck.files[0].sf.Metadata
}
