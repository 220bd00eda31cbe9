package model

import (
	"errors"
	"fmt"
	"math"

	"github.com/zooai/gym/prng"
)

// Config is the shape of the network.
type Config struct {
	Vocab  int `json:"vocab"`  // number of token ids
	Ctx    int `json:"ctx"`    // maximum sequence length (positions)
	Dim    int `json:"dim"`    // model width
	Layers int `json:"layers"` // transformer blocks
	Heads  int `json:"heads"`  // attention heads; Dim must be a multiple
	Hidden int `json:"hidden"` // MLP width
}

// ErrConfig reports an invalid model or adapter configuration.
var ErrConfig = errors.New("model: invalid config")

// Validate reports whether c describes a network that can be built.
func (c Config) Validate() error {
	switch {
	case c.Vocab < 2, c.Ctx < 1, c.Dim < 1, c.Layers < 1, c.Heads < 1, c.Hidden < 1:
		return fmt.Errorf("%w: every size must be positive (vocab >= 2): %+v", ErrConfig, c)
	case c.Dim%c.Heads != 0:
		return fmt.Errorf("%w: dim %d is not a multiple of heads %d", ErrConfig, c.Dim, c.Heads)
	}
	return nil
}

// Module names a linear projection inside a block.
type Module int

// The projections of a block, in the order they are stored.
const (
	Q Module = iota
	K
	V
	O
	FC1
	FC2
	numModules
)

var moduleNames = [numModules]string{"q", "k", "v", "o", "fc1", "fc2"}

func (m Module) String() string { return moduleNames[m] }

// ParseModule returns the module with the given short name (q, k, v, o, fc1, fc2).
func ParseModule(s string) (Module, error) {
	for i, n := range moduleNames {
		if n == s {
			return Module(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown module %q (want q, k, v, o, fc1 or fc2)", ErrConfig, s)
}

// path is the module's tensor-name prefix in layer l.
func (m Module) path(l int) string {
	if m >= FC1 {
		return fmt.Sprintf("blocks.%d.mlp.%s", l, moduleNames[m])
	}
	return fmt.Sprintf("blocks.%d.attn.%s", l, moduleNames[m])
}

// dims returns the module's (in, out) sizes.
func (c Config) dims(m Module) (in, out int) {
	switch m {
	case FC1:
		return c.Dim, c.Hidden
	case FC2:
		return c.Hidden, c.Dim
	}
	return c.Dim, c.Dim
}

// Layer holds one block's parameters. Lin[m] is module m's weight, row-major
// [out, in] as in PyTorch.
type Layer struct {
	Norm1, Norm2 []float32
	Lin          [numModules][]float32
}

// Weights are the base parameters of the network.
type Weights struct {
	Cfg    Config
	Tok    []float32 // [Vocab, Dim]
	Pos    []float32 // [Ctx, Dim]
	Layers []Layer
	NormF  []float32 // [Dim]
	Head   []float32 // [Vocab, Dim]
}

// Tensor is a named view of a parameter (or gradient) slice.
type Tensor struct {
	Name  string
	Shape []int
	Data  []float32
}

// NewWeights returns zero-filled weights of shape c.
func NewWeights(c Config) (*Weights, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	w := &Weights{Cfg: c, Tok: make([]float32, c.Vocab*c.Dim), Pos: make([]float32, c.Ctx*c.Dim),
		NormF: make([]float32, c.Dim), Head: make([]float32, c.Vocab*c.Dim), Layers: make([]Layer, c.Layers)}
	for l := range w.Layers {
		L := &w.Layers[l]
		L.Norm1, L.Norm2 = make([]float32, c.Dim), make([]float32, c.Dim)
		for m := range numModules {
			in, out := c.dims(m)
			L.Lin[m] = make([]float32, in*out)
		}
	}
	return w, nil
}

// Init returns freshly initialised weights: normal(0, 0.02) embeddings and
// head, normal(0, 1/sqrt(in)) projections with the residual outputs (o, fc2)
// scaled down by 1/sqrt(2·Layers), unit norm gains.
func Init(c Config, seed uint64) (*Weights, error) {
	w, err := NewWeights(c)
	if err != nil {
		return nil, err
	}
	r := prng.New(seed, 0x6d6f64656c) // "model"
	fill := func(x []float32, std float64) {
		for i := range x {
			x[i] = float32(r.Norm() * std)
		}
	}
	fill(w.Tok, 0.02)
	fill(w.Pos, 0.02)
	for l := range w.Layers {
		L := &w.Layers[l]
		for m := range numModules {
			in, _ := c.dims(m)
			std := 1 / math.Sqrt(float64(in))
			if m == O || m == FC2 {
				std /= math.Sqrt(2 * float64(c.Layers))
			}
			fill(L.Lin[m], std)
		}
		ones(L.Norm1)
		ones(L.Norm2)
	}
	ones(w.NormF)
	fill(w.Head, 0.02)
	return w, nil
}

func ones(x []float32) {
	for i := range x {
		x[i] = 1
	}
}

// Tensors returns views of every parameter in a fixed order with
// Hugging Face style names (tok_emb.weight, blocks.0.attn.q.weight, ...).
func (w *Weights) Tensors() []Tensor {
	c := w.Cfg
	ts := []Tensor{
		{"tok_emb.weight", []int{c.Vocab, c.Dim}, w.Tok},
		{"pos_emb.weight", []int{c.Ctx, c.Dim}, w.Pos},
	}
	for l := range w.Layers {
		L := &w.Layers[l]
		ts = append(ts, Tensor{fmt.Sprintf("blocks.%d.norm1.weight", l), []int{c.Dim}, L.Norm1})
		for m := range numModules {
			if m == FC1 {
				ts = append(ts, Tensor{fmt.Sprintf("blocks.%d.norm2.weight", l), []int{c.Dim}, L.Norm2})
			}
			in, out := c.dims(m)
			ts = append(ts, Tensor{m.path(l) + ".weight", []int{out, in}, L.Lin[m]})
		}
	}
	return append(ts,
		Tensor{"norm_f.weight", []int{c.Dim}, w.NormF},
		Tensor{"head.weight", []int{c.Vocab, c.Dim}, w.Head})
}

// Clone returns a deep copy of w.
func (w *Weights) Clone() *Weights {
	c, _ := NewWeights(w.Cfg)
	dst := c.Tensors()
	for i, t := range w.Tensors() {
		copy(dst[i].Data, t.Data)
	}
	return c
}

// NumParams is the number of scalars in w.
func (w *Weights) NumParams() int { return numel(w.Tensors()) }

func numel(ts []Tensor) int {
	n := 0
	for _, t := range ts {
		n += len(t.Data)
	}
	return n
}
