package llama

import "fmt"

// Module names a linear projection of a decoder layer.
type Module int

// The projections LoRA may target: the seven of every dense layer, in
// transformers' order (GateProj, UpProj and DownProj are a MoE model's dense
// layers' MLP), then those of a Mixture-of-Experts block (docs/moe.md).
const (
	QProj Module = iota
	KProj
	VProj
	OProj
	GateProj
	UpProj
	DownProj
	// Qwen2-MoE's shared expert: mlp.shared_expert.{gate,up,down}_proj and
	// its gate mlp.shared_expert_gate (an nn.Linear to one output).
	SharedGateProj
	SharedUpProj
	SharedDownProj
	SharedExpertGate
	// Router is the router's weight mlp.gate.weight [Experts, Hidden]
	// (PEFT target_parameters "gate.weight").
	Router
	// ExpertsGateUp and ExpertsDown are every expert's gate and up
	// projections (fused, [2·I, Hidden] per expert) and down projection
	// ([Hidden, I] per expert): PEFT target_parameters
	// "mlp.experts.gate_up_proj" and "mlp.experts.down_proj".
	ExpertsGateUp
	ExpertsDown
	NumModules
)

// NumDenseModules is the number of modules of a dense layer (QProj …
// DownProj).
const NumDenseModules = SharedGateProj

var moduleNames = [NumModules]string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
	"shared_expert.gate_proj", "shared_expert.up_proj", "shared_expert.down_proj", "shared_expert_gate",
	"gate.weight", "experts.gate_up_proj", "experts.down_proj"}

func (m Module) String() string { return moduleNames[m] }

// ParseModule returns the module with the given name (q_proj, …,
// shared_expert_gate, experts.gate_up_proj; String's names).
func ParseModule(s string) (Module, bool) {
	for i, n := range moduleNames {
		if n == s {
			return Module(i), true
		}
	}
	return 0, false
}

// Expert reports whether m is one of the stacked expert projections, whose
// LoRA matrices hold one low-rank pair per expert.
func (m Module) Expert() bool { return m == ExpertsGateUp || m == ExpertsDown }

// Path is the module's path inside layer l, as transformers 5 names it in
// memory: model.layers.<l>.self_attn.q_proj, model.layers.<l>.mlp.gate_proj,
// model.layers.<l>.mlp.shared_expert.up_proj, model.layers.<l>.mlp.gate
// (the router), model.layers.<l>.mlp.experts (both expert projections).
func (m Module) Path(l int) string {
	switch {
	case m < GateProj:
		return fmt.Sprintf("model.layers.%d.self_attn.%s", l, moduleNames[m])
	case m == Router:
		return fmt.Sprintf("model.layers.%d.mlp.gate", l)
	case m.Expert():
		return fmt.Sprintf("model.layers.%d.mlp.experts", l)
	}
	return fmt.Sprintf("model.layers.%d.mlp.%s", l, moduleNames[m])
}

// Has reports whether layer l of a model of shape c has module m: the
// attention projections everywhere, the dense MLP in dense layers, the
// router and experts in sparse ones, the shared expert in Qwen2-MoE's
// sparse layers.
func (c Config) Has(l int, m Module) bool {
	switch {
	case m < GateProj:
		return true
	case m <= DownProj:
		return !c.Sparse(l)
	case m <= SharedExpertGate:
		return c.Sparse(l) && c.MoE.Shared > 0
	}
	return c.Sparse(l) && m < NumModules
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
	case DownProj:
		return c.Intermediate, c.Hidden
	case SharedGateProj, SharedUpProj:
		return c.Hidden, c.MoE.Shared
	case SharedDownProj:
		return c.MoE.Shared, c.Hidden
	case SharedExpertGate:
		return c.Hidden, 1
	case Router:
		return c.Hidden, c.MoE.Experts
	case ExpertsGateUp:
		return c.Hidden, 2 * c.MoE.Intermediate // per expert
	case ExpertsDown:
		return c.MoE.Intermediate, c.Hidden // per expert
	}
	return 0, 0
}

// hasBias reports whether module m carries a bias under c.
func (c Config) hasBias(m Module) bool {
	switch m {
	case QProj, KProj, VProj:
		return c.QKVBias
	case OProj:
		return c.OBias
	case GateProj, UpProj, DownProj:
		return c.MLPBias
	}
	return false
}

// Layer holds one decoder layer's parameters. W[m] is module m's weight,
// row-major [out, in] as in PyTorch; Bias[m] is [out] or nil. A sparse
// layer has W[Router] and Experts instead of the dense MLP (W[ExpertsGateUp]
// and W[ExpertsDown] are unused).
type Layer struct {
	InputNorm, PostNorm []float32 // input_layernorm, post_attention_layernorm [Hidden]
	QNorm, KNorm        []float32 // Qwen3 q_norm, k_norm [HeadDim]; nil otherwise
	W                   [NumModules]Mat
	Bias                [NumModules][]float32
	Experts             []Expert // a sparse layer's experts; nil in a dense layer

	// fusedGateUp [E, 2I, H] and fusedDown [E, H, I]: the stacked expert
	// tensors of a fused checkpoint, which Experts are views of.
	fusedGateUp, fusedDown Mat
}

// Expert is one expert's SwiGLU MLP, down(silu(gate(x))·up(x)): Gate and
// Up [I, Hidden], Down [Hidden, I].
type Expert struct {
	Gate, Up, Down Mat
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
		for m := range NumDenseModules {
			if m == GateProj {
				add(p+"post_attention_layernorm.weight", &L.PostNorm, c.Hidden)
				if c.Sparse(l) {
					c.moeSpecs(l, L, bind, addMat)
					break
				}
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

// moeSpecs lists a sparse layer's tensors in the checkpoint's layout: the
// router, the experts (one module each, or stacked when
// c.MoE.FusedExperts), Qwen2-MoE's shared expert and its gate. Names are
// those save_pretrained writes (Mixtral's per-expert modules keep their
// original names: block_sparse_moe.gate, block_sparse_moe.experts.<e>.w1
// (gate), w3 (up), w2 (down)); a fused checkpoint uses the in-memory names
// mlp.gate.weight, mlp.experts.gate_up_proj, mlp.experts.down_proj.
func (c Config) moeSpecs(l int, L *Layer, bind bool, addMat func(string, *Mat, ...int)) {
	E, I, D := c.MoE.Experts, c.MoE.Intermediate, c.Hidden
	mlp := fmt.Sprintf("model.layers.%d.mlp.", l)
	legacyMixtral := c.Arch == Mixtral && !c.MoE.FusedExperts
	if legacyMixtral {
		mlp = fmt.Sprintf("model.layers.%d.block_sparse_moe.", l)
	}
	addMat(mlp+"gate.weight", &L.W[Router], E, D)
	if c.MoE.FusedExperts {
		addMat(mlp+"experts.gate_up_proj", &L.fusedGateUp, E, 2*I, D)
		addMat(mlp+"experts.down_proj", &L.fusedDown, E, D, I)
	} else {
		if bind && len(L.Experts) != E {
			L.Experts = make([]Expert, E)
		}
		names := [3]string{"gate_proj", "up_proj", "down_proj"}
		if legacyMixtral {
			names = [3]string{"w1", "w3", "w2"}
		}
		for e := range E {
			var x Expert
			ex := &x
			if bind {
				ex = &L.Experts[e]
			}
			p := fmt.Sprintf("%sexperts.%d.", mlp, e)
			addMat(p+names[0]+".weight", &ex.Gate, I, D)
			addMat(p+names[1]+".weight", &ex.Up, I, D)
			addMat(p+names[2]+".weight", &ex.Down, D, I)
		}
	}
	if c.MoE.Shared > 0 {
		for _, m := range []Module{SharedGateProj, SharedUpProj, SharedDownProj, SharedExpertGate} {
			in, out := c.Dims(m)
			addMat(m.Path(l)+".weight", &L.W[m], out, in)
		}
	}
}

// linkExperts makes the Experts of every sparse layer of a fused
// checkpoint views of its stacked tensors.
func (w *Weights) linkExperts() {
	c := w.Cfg
	if !c.MoE.FusedExperts {
		return
	}
	E, I, D := c.MoE.Experts, c.MoE.Intermediate, c.Hidden
	for l := range w.Layers {
		L := &w.Layers[l]
		if !c.Sparse(l) {
			continue
		}
		L.Experts = make([]Expert, E)
		for e := range E {
			gu := e * 2 * I * D
			L.Experts[e] = Expert{
				Gate: L.fusedGateUp.slice(gu, I*D),
				Up:   L.fusedGateUp.slice(gu+I*D, I*D),
				Down: L.fusedDown.slice(e*D*I, D*I),
			}
		}
	}
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
	w.linkExperts()
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
