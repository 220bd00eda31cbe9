package torch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/zooai/gym/internal/atomicfile"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/safetensors"
)

// ErrGarbage reports a file or answer from the backend process that is
// not what it should be: it is never used.
var ErrGarbage = errors.New("torch: the backend process answered garbage")

// Traces are the sampled completions of a step as they cross the seam
// (the traces file of docs/backends.md): sequence i = p·G + g is
// completion g of prompt p.
type Traces struct {
	G           int
	Prompts     [][]int
	Completions [][]int
	OldLogP     [][]float32
	Rewards     []float64 // nil in a file the backend wrote
}

// Bounds on what a traces file may hold.
const (
	maxSequences = 1 << 20
	maxTokens    = 1 << 16
	maxFileBytes = 1 << 34
)

func le32(xs []int32) []byte {
	b := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

func padded(rows [][]int) ([]byte, uint64) {
	w := 0
	for _, r := range rows {
		w = max(w, len(r))
	}
	xs := make([]int32, len(rows)*w)
	for i, r := range rows {
		for j, v := range r {
			xs[i*w+j] = int32(v)
		}
	}
	return le32(xs), uint64(w)
}

func lens(rows [][]int) []byte {
	xs := make([]int32, len(rows))
	for i, r := range rows {
		xs[i] = int32(len(r))
	}
	return le32(xs)
}

// WriteTraces writes t to path (atomically, mode 0600).
func WriteTraces(path string, t *Traces) error {
	N := len(t.Completions)
	if t.G < 1 || len(t.Prompts)*t.G != N || len(t.OldLogP) != N || (t.Rewards != nil && len(t.Rewards) != N) {
		return fmt.Errorf("torch: traces of %d prompts, %d completions, group size %d", len(t.Prompts), N, t.G)
	}
	pid, pw := padded(t.Prompts)
	cid, cw := padded(t.Completions)
	old := make([]byte, 4*N*int(cw))
	for i, row := range t.OldLogP {
		if len(row) != len(t.Completions[i]) {
			return fmt.Errorf("torch: traces: sequence %d has %d tokens and %d log-probabilities", i, len(t.Completions[i]), len(row))
		}
		for j, v := range row {
			binary.LittleEndian.PutUint32(old[4*(i*int(cw)+j):], math.Float32bits(v))
		}
	}
	P, n := uint64(len(t.Prompts)), uint64(N)
	ts := []safetensors.Tensor{
		{Name: "prompt_ids", DType: "I32", Shape: []uint64{P, pw}, Data: pid},
		{Name: "prompt_lens", DType: "I32", Shape: []uint64{P}, Data: lens(t.Prompts)},
		{Name: "completion_ids", DType: "I32", Shape: []uint64{n, cw}, Data: cid},
		{Name: "completion_lens", DType: "I32", Shape: []uint64{n}, Data: lens(t.Completions)},
		{Name: "old_logp", DType: "F32", Shape: []uint64{n, cw}, Data: old},
	}
	if t.Rewards != nil {
		r := make([]byte, 8*N)
		for i, v := range t.Rewards {
			binary.LittleEndian.PutUint64(r[8*i:], math.Float64bits(v))
		}
		ts = append(ts, safetensors.Tensor{Name: "rewards", DType: "F64", Shape: []uint64{n}, Data: r})
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, ts, map[string]string{"group_size": strconv.Itoa(t.G)}); err != nil {
		return err
	}
	return atomicfile.WriteBytes(path, 0o600, true, buf.Bytes())
}

// openSmall reads a whole file of the exchange directory, refusing one
// larger than limit.
func openSmall(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil { // the directory is ours: a file the process said it wrote is missing
		return nil, fmt.Errorf("%w: %v", ErrGarbage, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > limit {
		return nil, fmt.Errorf("%w: %s is not a regular file of at most %d bytes", ErrGarbage, filepath.Base(path), limit)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && st.Size() > 0 {
		return nil, err
	}
	return b, nil
}

// tensorFile is a parsed safetensors file held in memory.
type tensorFile struct {
	f   *safetensors.File
	raw []byte
}

func parseTensors(path string, limit int64) (*tensorFile, error) {
	b, err := openSmall(path, limit)
	if err != nil {
		return nil, err
	}
	f, err := safetensors.Parse(bytes.NewReader(b), int64(len(b)), safetensors.Limits{})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrGarbage, filepath.Base(path), err)
	}
	return &tensorFile{f: f, raw: b}, nil
}

// get returns tensor name's bytes after checking its dtype and rank.
func (tf *tensorFile) get(name, dtype string, rank int) ([]byte, []uint64, error) {
	info, ok := tf.f.Lookup(name)
	if !ok {
		return nil, nil, fmt.Errorf("%w: no tensor %s", ErrGarbage, name)
	}
	if info.DType != dtype || len(info.Shape) != rank {
		return nil, nil, fmt.Errorf("%w: tensor %s is %s%v, want %s of rank %d", ErrGarbage, name, info.DType, info.Shape, dtype, rank)
	}
	b, err := tf.f.ReadTensor(bytes.NewReader(tf.raw), info)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: tensor %s: %v", ErrGarbage, name, err)
	}
	return b, info.Shape, nil
}

// ReadTraces reads and checks a traces file written by the backend for a
// model of vocab tokens: every tensor with its dtype and shape, lengths in
// range, token ids in the vocabulary, log-probabilities finite and <= 0.
func ReadTraces(path string, vocab int) (*Traces, error) {
	tf, err := parseTensors(path, maxFileBytes)
	if err != nil {
		return nil, err
	}
	G, err := strconv.Atoi(tf.f.Metadata["group_size"])
	if err != nil || G < 1 {
		return nil, fmt.Errorf("%w: traces metadata group_size %q", ErrGarbage, tf.f.Metadata["group_size"])
	}
	for _, t := range tf.f.Tensors {
		switch t.Name {
		case "prompt_ids", "prompt_lens", "completion_ids", "completion_lens", "old_logp", "rewards":
		default:
			return nil, fmt.Errorf("%w: unexpected tensor %q in a traces file", ErrGarbage, t.Name)
		}
	}
	pid, ps, err := tf.get("prompt_ids", "I32", 2)
	if err != nil {
		return nil, err
	}
	plen, pls, err := tf.get("prompt_lens", "I32", 1)
	if err != nil {
		return nil, err
	}
	cid, cs, err := tf.get("completion_ids", "I32", 2)
	if err != nil {
		return nil, err
	}
	clen, cls, err := tf.get("completion_lens", "I32", 1)
	if err != nil {
		return nil, err
	}
	old, os_, err := tf.get("old_logp", "F32", 2)
	if err != nil {
		return nil, err
	}
	P, N := pls[0], cls[0]
	if P < 1 || N > maxSequences || N != P*uint64(G) || ps[0] != P || cs[0] != N || os_[0] != N || os_[1] != cs[1] ||
		ps[1] > maxTokens || cs[1] > maxTokens {
		return nil, fmt.Errorf("%w: traces of shapes %v %v %v %v %v with group size %d", ErrGarbage, ps, pls, cs, cls, os_, G)
	}
	i32 := func(b []byte, i uint64) int { return int(int32(binary.LittleEndian.Uint32(b[4*i:]))) }
	row := func(ids, ls []byte, width, r uint64) ([]int, error) {
		n := i32(ls, r)
		if n < 1 || uint64(n) > width {
			return nil, fmt.Errorf("%w: traces: row %d has length %d of %d", ErrGarbage, r, n, width)
		}
		out := make([]int, n)
		for j := range out {
			v := i32(ids, r*width+uint64(j))
			if v < 0 || v >= vocab {
				return nil, fmt.Errorf("%w: traces: token %d outside the vocabulary of %d", ErrGarbage, v, vocab)
			}
			out[j] = v
		}
		return out, nil
	}
	t := &Traces{G: G, Prompts: make([][]int, P), Completions: make([][]int, N), OldLogP: make([][]float32, N)}
	for p := range P {
		if t.Prompts[p], err = row(pid, plen, ps[1], p); err != nil {
			return nil, err
		}
	}
	for i := range N {
		if t.Completions[i], err = row(cid, clen, cs[1], i); err != nil {
			return nil, err
		}
		lp := make([]float32, len(t.Completions[i]))
		for j := range lp {
			v := math.Float32frombits(binary.LittleEndian.Uint32(old[4*(i*cs[1]+uint64(j)):]))
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || v > 0 {
				return nil, fmt.Errorf("%w: traces: log-probability %v of sequence %d", ErrGarbage, v, i)
			}
			lp[j] = v
		}
		t.OldLogP[i] = lp
	}
	return t, nil
}

// ReadAdapter reads an adapter file of the backend into an adapter shaped
// like like (same rank, alpha and targets): exactly its tensors by PEFT
// name, float32, each of the right shape and every value finite
// (llama.Fill). Nothing the backend returns is used without this check.
func ReadAdapter(path string, like *llama.Adapter) (*llama.Adapter, error) {
	limit := int64(4*like.NumParams()) + 1<<20
	tf, err := parseTensors(path, limit)
	if err != nil {
		return nil, err
	}
	src := make([]llama.Stored, len(tf.f.Tensors))
	for i, info := range tf.f.Tensors {
		info := info
		src[i] = llama.Stored{Name: info.Name, DType: info.DType, Shape: info.Shape, Read: func() ([]byte, error) {
			return tf.f.ReadTensor(bytes.NewReader(tf.raw), info)
		}}
	}
	a := like.Zeroed()
	if err := llama.Fill(a.Views(), src, false); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrGarbage, filepath.Base(path), err)
	}
	return a, nil
}

// WriteAdapter writes a in PEFT names, float32, to path (mode 0600).
func WriteAdapter(path string, a *llama.Adapter) error {
	var ts []safetensors.Tensor
	for _, v := range a.Views() {
		shape := make([]uint64, len(v.Shape))
		for i, d := range v.Shape {
			shape[i] = uint64(d)
		}
		ts = append(ts, safetensors.Tensor{Name: v.Name, DType: "F32", Shape: shape, Data: llama.Float32Bytes(v.Data)})
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, ts, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	return atomicfile.WriteBytes(path, 0o600, true, buf.Bytes())
}
