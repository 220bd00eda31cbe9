package llama

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/zooai/gym/internal/atomicfile"
	"github.com/zooai/gym/model/safetensors"
)

// ConfigJSON returns c as a config.json transformers loads (the keys
// save_pretrained writes that matter, sorted, 2-space indent).
func (c Config) ConfigJSON() ([]byte, error) { return c.configJSON("float32") }

// configJSON is ConfigJSON with the given torch dtype name.
func (c Config) configJSON(dtype string) ([]byte, error) {
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
		"dtype":                   dtype,
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
	case Mistral, Mixtral:
		m["sliding_window"] = nil
	case Qwen3MoE:
		m["attention_bias"] = c.QKVBias
		m["use_sliding_window"], m["sliding_window"] = false, nil
	case Qwen2MoE:
		m["qkv_bias"] = c.QKVBias
		m["use_sliding_window"], m["sliding_window"] = false, nil
	}
	if c.Arch.MoE() {
		e := c.MoE
		m["num_experts_per_tok"] = e.TopK
		m["router_aux_loss_coef"] = floatJSON(e.RouterAuxLossCoef)
		m["output_router_logits"] = e.OutputRouterLogits
		if c.Arch == Mixtral {
			m["num_local_experts"] = e.Experts
		} else {
			m["num_experts"] = e.Experts
			m["moe_intermediate_size"] = e.Intermediate
			m["norm_topk_prob"] = e.NormTopK
			m["decoder_sparse_step"] = e.SparseStep
			m["mlp_only_layers"] = append([]int{}, e.MLPOnly...)
			if c.Arch == Qwen2MoE {
				m["shared_expert_intermediate_size"] = e.Shared
			}
		}
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
		data := t.values()
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
	Data  []float32 // the weights' own values; nil for a BF16 or F16 matrix (Mat.Float32 copies it)
}

// Tensors returns w's parameters in the fixed order of its checkpoint
// (model.safetensors), each once: with tied embeddings there is no
// lm_head.weight, the head being model.embed_tokens.weight.
func (w *Weights) Tensors() []Tensor {
	var ts []Tensor
	for _, t := range w.Cfg.specs(w) {
		ts = append(ts, Tensor{t.name, t.shape, t.f32()})
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

// torchDTypes are the config.json names of the dtypes.
var torchDTypes = [...]string{F32: "float32", BF16: "bfloat16", F16: "float16"}

// SaveAs is Save with every tensor stored in dtype dt, as transformers'
// save_pretrained writes a model of that torch_dtype (config.json says
// it): F32 gives Save's files, BF16 and F16 round each float32 value to the
// nearest 16-bit value (ties to even), and a 16-bit matrix already of dtype
// dt is written bit for bit. A value that does not fit dt (beyond 65504 in
// F16) is refused, naming the tensor. The safetensors file is written as
// it is encoded, a tensor at a time, without a copy of the whole file in
// memory.
func SaveAs(dir string, w *Weights, dt DType) error {
	if dt > F16 {
		return fmt.Errorf("llama: cannot save in %v", dt)
	}
	cj, err := w.Cfg.configJSON(torchDTypes[dt])
	if err != nil {
		return err
	}
	specs := w.Cfg.specs(w)
	esize := 2
	if dt == F32 {
		esize = 4
	}
	var hdr []safetensors.Tensor
	for _, t := range specs {
		if t.len() != t.numel() {
			return fmt.Errorf("llama: tensor %q has %d values, want %d", t.name, t.len(), t.numel())
		}
		shape := make([]uint64, len(t.shape))
		for i, d := range t.shape {
			shape[i] = uint64(d)
		}
		hdr = append(hdr, safetensors.Tensor{Name: t.name, DType: dt.String(), Shape: shape})
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	err = atomicfile.Write(filepath.Join(dir, WeightsFile), 0o644, true, func(out io.Writer) error {
		bw := bufio.NewWriterSize(out, 1<<20)
		if err := safetensors.WriteHeader(bw, hdr, map[string]string{"format": "pt"}); err != nil {
			return err
		}
		buf := make([]byte, esize*saveChunk)
		for _, t := range specs {
			if err := encodeTensor(bw, t, dt, buf); err != nil {
				return err
			}
		}
		return bw.Flush()
	})
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(filepath.Join(dir, ConfigFile), 0o644, true, cj)
}

// saveChunk is the number of elements SaveAs encodes at a time.
const saveChunk = 1 << 16

// encodeTensor writes t's values in dtype dt (little-endian) through buf.
func encodeTensor(w io.Writer, t tensorSpec, dt DType, buf []byte) error {
	var bits []uint16 // t's own 16-bit values, when already of dtype dt
	var vals []float32
	if t.mat != nil && t.mat.dtype == dt && dt != F32 {
		bits = t.mat.half
		defer runtime.KeepAlive(t.mat.keep)
	} else {
		vals = t.values()
	}
	n := t.numel()
	for i := 0; i < n; i += saveChunk {
		k := min(saveChunk, n-i)
		var b []byte
		switch {
		case bits != nil:
			b = buf[:2*k]
			for j, h := range bits[i : i+k] {
				binary.LittleEndian.PutUint16(b[2*j:], h)
			}
		case dt == F32:
			b = buf[:4*k]
			for j, v := range vals[i : i+k] {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(v))
			}
		default:
			b = buf[:2*k]
			for j, v := range vals[i : i+k] {
				h, ok := narrow(dt, v)
				if !ok {
					return fmt.Errorf("llama: tensor %q[%d] = %v does not fit %v", t.name, i+j, v, dt)
				}
				binary.LittleEndian.PutUint16(b[2*j:], h)
			}
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// narrow rounds f to the nearest value of dtype dt (BF16 or F16), ties to
// even; ok is false when f is not finite or rounds beyond dt's range.
func narrow(dt DType, f float32) (h uint16, ok bool) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return 0, false
	}
	if dt == BF16 {
		b := math.Float32bits(f)
		b += 0x7fff + (b>>16)&1
		h = uint16(b >> 16)
		return h, halfFinite(BF16, h)
	}
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127 + 15 // binary16's biased exponent
	man := b & 0x7fffff
	switch {
	case exp >= 31:
		return 0, false
	case exp < -10: // below half the smallest subnormal: zero
		return sign, true
	case exp <= 0: // subnormal (or the smallest normal, by rounding up)
		man |= 1 << 23
		shift := uint(14 - exp)
		v, rem, half := man>>shift, man&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > half || rem == half && v&1 == 1 {
			v++
		}
		return sign | uint16(v), true
	}
	v := uint32(exp)<<10 | man>>13
	if rem := man & 0x1fff; rem > 0x1000 || rem == 0x1000 && v&1 == 1 {
		v++ // a carry into the exponent is the right result
	}
	if v >= 0x7c00 {
		return 0, false
	}
	return sign | uint16(v), true
}

// floatJSON is v as a JSON number with a decimal point or an exponent, so
// that transformers' strict config fields typed float accept it (Go writes
// 0 for float64(0), which they refuse as an int).
func floatJSON(v float64) json.RawMessage {
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return json.RawMessage(s)
}
