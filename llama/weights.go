package llama

import "fmt"

// Module names a linear projection of a decoder layer.
type Module int

// The seven projections LoRA may target, in transformers' order.
const (
	QProj Module = iota
	KProj
	VProj
	OProj
	GateProj
	UpProj
	DownProj
	NumModules
)

var moduleNames = [NumModules]string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

func (m Module) String() string { return moduleNames[m] }

// ParseModule returns the module with the given transformers name (q_proj, …).
func ParseModule(s string) (Module, bool) {
	for i, n := range moduleNames {
		if n == s {
			return Module(i), true
		}
	}
	return 0, false
}

// Path is the module's path inside layer l, as transformers names it:
// model.layers.<l>.self_attn.q_proj, model.layers.<l>.mlp.gate_proj, ….
func (m Module) Path(l int) string {
	if m >= GateProj {
		return fmt.Sprintf("model.layers.%d.mlp.%s", l, moduleNames[m])
	}
	return fmt.Sprintf("model.layers.%d.self_attn.%s", l, moduleNames[m])
}

// Dims returns module m's input and output sizes.
func (c Config) Dims(m Module) (in, out int) {
	switch m {
	case QProj:
		return c.Hidden, c.Heads * c.HeadDim
	case KProj, VProj:
		return c.Hidden, c.KVHeads * c.HeadDim
	case OProj:
		return c.Heads * c.HeadDim, c.Hidden
	case GateProj, UpProj:
		return c.Hidden, c.Intermediate
	}
	return c.Intermediate, c.Hidden
}

// hasBias reports whether module m carries a bias under c.
func (c Config) hasBias(m Module) bool {
	switch m {
	case QProj, KProj, VProj:
		return c.QKVBias
	case OProj:
		return c.OBias
	}
	return c.MLPBias
}

// Layer holds one decoder layer's parameters. W[m] is module m's weight,
// row-major [out, in] as in PyTorch; Bias[m] is [out] or nil.
type Layer struct {
	InputNorm, PostNorm []float32 // input_layernorm, post_attention_layernorm [Hidden]
	QNorm, KNorm        []float32 // Qwen3 q_norm, k_norm [HeadDim]; nil otherwise
	W                   [NumModules]Mat
	Bias                [NumModules][]float32
}

// Weights are the base parameters of a model. The matrices keep the
// checkpoint's dtype (Mat); norm gains and biases are float32.
type Weights struct {
	Cfg    Config
	Embed  Mat // model.embed_tokens.weight [Vocab, Hidden]
	Layers []Layer
	Norm   []float32 // model.norm.weight [Hidden]
	Head   Mat       // lm_head.weight [Vocab, Hidden]; the same values as Embed when tied
}

// tensorSpec is one tensor a checkpoint of a config holds: a vector (dst)
// or a matrix (mat), bound to a Weights' field, or neither when listing a
// config's tensors without weights.
type tensorSpec struct {
	name  string
	shape []int
	dst   *[]float32
	mat   *Mat
}

// f32 is the bound tensor's float32 values: nil for a 16-bit matrix.
func (t tensorSpec) f32() []float32 {
	if t.mat != nil {
		return t.mat.F32
	}
	return *t.dst
}

// values is the bound tensor's values as float32: a widened copy for a
// 16-bit matrix.
func (t tensorSpec) values() []float32 {
	if t.mat != nil {
		return t.mat.Float32()
	}
	return *t.dst
}

// len is the bound tensor's element count.
func (t tensorSpec) len() int {
	if t.mat != nil {
		return t.mat.Len()
	}
	return len(*t.dst)
}

func (t tensorSpec) numel() int {
	n := 1
	for _, d := range t.shape {
		n *= d
	}
	return n
}

// tensors lists the tensors of a checkpoint of c in a fixed order.
func (c Config) tensors() []tensorSpec { return c.specs(nil) }

// specs lists c's tensors, bound to w's slices when w is not nil. A config
// with an out-of-range layer count has no tensors.
func (c Config) specs(w *Weights) []tensorSpec {
	if c.Layers < 0 || c.Layers > maxLayers {
		return nil
	}
	bind := w != nil
	if !bind {
		w = &Weights{Layers: make([]Layer, c.Layers)}
	}
	var ts []tensorSpec
	add := func(name string, dst *[]float32, shape ...int) {
		if !bind {
			dst = nil
		}
		ts = append(ts, tensorSpec{name: name, shape: shape, dst: dst})
	}
	addMat := func(name string, mat *Mat, shape ...int) {
		if !bind {
			mat = nil
		}
		ts = append(ts, tensorSpec{name: name, shape: shape, mat: mat})
	}
	addMat("model.embed_tokens.weight", &w.Embed, c.Vocab, c.Hidden)
	for l := range c.Layers {
		L := &w.Layers[l]
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_layernorm.weight", &L.InputNorm, c.Hidden)
		for m := range NumModules {
			if m == GateProj {
				add(p+"post_attention_layernorm.weight", &L.PostNorm, c.Hidden)
			}
			in, out := c.Dims(m)
			addMat(m.Path(l)+".weight", &L.W[m], out, in)
			if c.hasBias(m) {
				add(m.Path(l)+".bias", &L.Bias[m], out)
			}
			if m == VProj && c.QKNorm {
				add(p+"self_attn.q_norm.weight", &L.QNorm, c.HeadDim)
				add(p+"self_attn.k_norm.weight", &L.KNorm, c.HeadDim)
			}
		}
	}
	add("model.norm.weight", &w.Norm, c.Hidden)
	if !c.Tied {
		addMat("lm_head.weight", &w.Head, c.Vocab, c.Hidden)
	}
	return ts
}

// NewWeights returns zero weights of shape c, every matrix F32.
func NewWeights(c Config) (*Weights, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	w := &Weights{Cfg: c, Layers: make([]Layer, c.Layers)}
	for _, t := range c.specs(w) {
		if t.mat != nil {
			*t.mat = Mat{F32: make([]float32, t.numel())}
		} else {
			*t.dst = make([]float32, t.numel())
		}
	}
	if c.Tied {
		w.Head = w.Embed
	}
	return w, nil
}

// Bytes is the memory w's values take: Mat.Bytes of every matrix (the
// tied head once) and 4 bytes per norm gain and bias.
func (w *Weights) Bytes() int64 {
	var n int64
	for _, t := range w.Cfg.specs(w) {
		if t.mat != nil {
			n += t.mat.Bytes()
		} else {
			n += 4 * int64(len(*t.dst))
		}
	}
	return n
}
