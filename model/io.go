package model

import (
	"bytes"
	"crypto/sha3"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/zooai/gym/safetensors"
)

// ErrFormat reports a weights or adapter file that does not match what it
// claims to hold.
var ErrFormat = errors.New("model: bad tensor file")

const (
	metaConfig = "gym.model_config"
	metaLoRA   = "gym.lora_config"
)

// Float32Bytes returns the little-endian bytes of x.
func Float32Bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func toSafetensors(ts []Tensor) []safetensors.Tensor {
	out := make([]safetensors.Tensor, len(ts))
	for i, t := range ts {
		shape := make([]uint64, len(t.Shape))
		for j, d := range t.Shape {
			shape[j] = uint64(d)
		}
		out[i] = safetensors.Tensor{Name: t.Name, DType: "F32", Shape: shape, Data: Float32Bytes(t.Data)}
	}
	return out
}

// WriteWeights writes w as a safetensors file; the model config travels in
// the metadata so ReadWeights needs nothing else. extra metadata is added.
func WriteWeights(out io.Writer, w *Weights, extra map[string]string) error {
	cfg, _ := json.Marshal(w.Cfg)
	meta := map[string]string{metaConfig: string(cfg)}
	for k, v := range extra {
		meta[k] = v
	}
	return safetensors.Write(out, toSafetensors(w.Tensors()), meta)
}

// WriteAdapter writes a as a safetensors file with the model and LoRA
// configs in the metadata.
func WriteAdapter(out io.Writer, a *Adapter, extra map[string]string) error {
	cfg, _ := json.Marshal(a.Model)
	lcfg, _ := json.Marshal(a.Cfg)
	meta := map[string]string{metaConfig: string(cfg), metaLoRA: string(lcfg)}
	for k, v := range extra {
		meta[k] = v
	}
	return safetensors.Write(out, toSafetensors(a.Tensors()), meta)
}

// ReadWeights parses a file written by WriteWeights. It returns the weights
// and the file's metadata.
func ReadWeights(b []byte) (*Weights, map[string]string, error) {
	f, err := safetensors.Parse(bytes.NewReader(b), int64(len(b)), safetensors.DefaultLimits())
	if err != nil {
		return nil, nil, err
	}
	var c Config
	if err := json.Unmarshal([]byte(f.Metadata[metaConfig]), &c); err != nil {
		return nil, nil, fmt.Errorf("%w: metadata %s: %v", ErrFormat, metaConfig, err)
	}
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	if err := checkSize(f, weightParams(c)); err != nil {
		return nil, nil, err
	}
	w, err := NewWeights(c)
	if err != nil {
		return nil, nil, err
	}
	if err := Fill(w.Tensors(), FileSource(f, bytes.NewReader(b), nil)); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	return w, f.Metadata, nil
}

// ReadAdapter parses a file written by WriteAdapter.
func ReadAdapter(b []byte) (*Adapter, map[string]string, error) {
	f, err := safetensors.Parse(bytes.NewReader(b), int64(len(b)), safetensors.DefaultLimits())
	if err != nil {
		return nil, nil, err
	}
	var c Config
	var lc LoRAConfig
	if err := json.Unmarshal([]byte(f.Metadata[metaConfig]), &c); err != nil {
		return nil, nil, fmt.Errorf("%w: metadata %s: %v", ErrFormat, metaConfig, err)
	}
	if err := json.Unmarshal([]byte(f.Metadata[metaLoRA]), &lc); err != nil {
		return nil, nil, fmt.Errorf("%w: metadata %s: %v", ErrFormat, metaLoRA, err)
	}
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	if err := lc.Validate(); err != nil {
		return nil, nil, err
	}
	if err := checkSize(f, adapterParams(c, lc)); err != nil {
		return nil, nil, err
	}
	a, err := NewAdapter(c, lc)
	if err != nil {
		return nil, nil, err
	}
	if err := Fill(a.Tensors(), FileSource(f, bytes.NewReader(b), nil)); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	return a, f.Metadata, nil
}

// weightParams is the number of scalars a model of shape c has, computed in
// float64 so absurd configs cannot overflow.
func weightParams(c Config) float64 {
	D, H, V := float64(c.Dim), float64(c.Hidden), float64(c.Vocab)
	perLayer := 2*D + 4*D*D + 2*D*H
	return 2*V*D + float64(c.Ctx)*D + float64(c.Layers)*perLayer + D
}

func adapterParams(c Config, lc LoRAConfig) float64 {
	var n float64
	for _, t := range lc.Targets {
		m, _ := ParseModule(t)
		in, out := c.dims(m)
		n += float64(lc.Rank) * float64(in+out)
	}
	return n * float64(c.Layers)
}

// checkSize refuses a file whose declared config implies more (or fewer)
// parameters than its tensors hold, before anything is allocated from the
// config.
func checkSize(f *safetensors.File, params float64) error {
	var have float64
	for _, t := range f.Tensors {
		have += float64(t.Size())
	}
	if params*4 != have {
		return fmt.Errorf("%w: config implies %.0f parameters, the file holds %.0f bytes of tensors", ErrFormat, params, have)
	}
	return nil
}

// Digest is the SHA3-256 of tensors in order, each encoded as: name length
// (u32 LE) · name · rank (u8) · dims (u64 LE each) · data (float32 LE). It
// depends on nothing but the tensors (no key, no clock, no file layout).
func Digest(ts []Tensor) [32]byte {
	h := sha3.New256()
	var b [8]byte
	for _, t := range ts {
		binary.LittleEndian.PutUint32(b[:4], uint32(len(t.Name)))
		h.Write(b[:4])
		h.Write([]byte(t.Name))
		h.Write([]byte{byte(len(t.Shape))})
		for _, d := range t.Shape {
			binary.LittleEndian.PutUint64(b[:], uint64(d))
			h.Write(b[:])
		}
		h.Write(Float32Bytes(t.Data))
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}
