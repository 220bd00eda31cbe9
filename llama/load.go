package llama

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"slices"
	"sort"

	"github.com/zooai/gym/safetensors"
)

// ErrCheckpoint reports a model directory whose files are missing,
// malformed or disagree with its config.json. The message names the file
// and, where there is one, the tensor.
var ErrCheckpoint = errors.New("llama: bad checkpoint")

// Files of a base model directory.
const (
	ConfigFile  = "config.json"
	WeightsFile = "model.safetensors"
	IndexFile   = "model.safetensors.index.json"
)

const (
	readChunk     = 1 << 20
	maxIndexBytes = 64 << 20
	maxShards     = 1 << 12
)

// Checkpoint is a model directory whose config and tensor headers have
// been read and checked against each other; no tensor data has been read.
type Checkpoint struct {
	Dir    string
	Cfg    Config
	fsys   fs.FS
	files  []*shard
	tensor map[string]stored
}

type shard struct {
	name string
	f    fs.File
	ra   io.ReaderAt // f
	sf   *safetensors.File
}

type stored struct {
	shard *shard
	info  safetensors.TensorInfo
}

// Bytes is the memory the float32 weights take once read.
func (ck *Checkpoint) Bytes() int64 { return 4 * ck.Cfg.NumParams() }

// Close closes the checkpoint's files.
func (ck *Checkpoint) Close() error {
	var err error
	for _, s := range ck.files {
		err = errors.Join(err, s.f.Close())
	}
	return err
}

func ckErr(file, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrCheckpoint, file, fmt.Sprintf(format, args...))
}

// Load reads a model directory: Open, then Read.
func Load(dir string) (*Weights, error) {
	ck, err := Open(dir)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	return ck.Read()
}

// Open reads dir's config.json and the headers of its safetensors files
// (model.safetensors, or the shards model.safetensors.index.json lists)
// and checks that they hold exactly the tensors the config implies, each
// with its shape and a dtype of BF16, F16 or F32. Errors name the file and
// the tensor.
func Open(dir string) (*Checkpoint, error) {
	if dir == "" {
		dir = "."
	}
	ck, err := OpenFS(os.DirFS(dir))
	if ck != nil {
		ck.Dir = dir
	}
	return ck, err
}

// LoadFS is Load on a model directory held in fsys (at its root), such as
// an embed.FS; its safetensors files must implement io.ReaderAt.
func LoadFS(fsys fs.FS) (*Weights, error) {
	ck, err := OpenFS(fsys)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	return ck.Read()
}

// OpenFS is Open on a model directory held in fsys (at its root).
func OpenFS(fsys fs.FS) (*Checkpoint, error) {
	cb, err := readSmallFS(fsys, ConfigFile, maxConfigBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCheckpoint, err)
	}
	cfg, err := ParseConfig(cb)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ConfigFile, err)
	}
	ck := &Checkpoint{Cfg: cfg, fsys: fsys, tensor: map[string]stored{}}
	ok := false
	defer func() {
		if !ok {
			ck.Close()
		}
	}()
	// transformers prefers the single file when both exist.
	var where map[string]string // tensor → shard name, from the index
	if _, err := fs.Stat(fsys, WeightsFile); err == nil {
		if err := ck.openShard(WeightsFile); err != nil {
			return nil, err
		}
	} else {
		ib, err := readSmallFS(fsys, IndexFile, maxIndexBytes)
		if err != nil {
			return nil, fmt.Errorf("%w: neither %s nor %s: %v", ErrCheckpoint, WeightsFile, IndexFile, err)
		}
		if where, err = parseIndex(ib); err != nil {
			return nil, err
		}
		var names []string
		for _, s := range where {
			if !slices.Contains(names, s) {
				names = append(names, s)
			}
		}
		sort.Strings(names)
		if len(names) > maxShards {
			return nil, ckErr(IndexFile, "%d shards, more than %d", len(names), maxShards)
		}
		for _, n := range names {
			if err := ck.openShard(n); err != nil {
				return nil, err
			}
		}
	}
	// Every tensor in the files once, where the index says.
	for _, s := range ck.files {
		for _, t := range s.sf.Tensors {
			if prev, dup := ck.tensor[t.Name]; dup {
				return nil, ckErr(s.name, "tensor %q is also in %s", t.Name, prev.shard.name)
			}
			if where != nil && where[t.Name] != s.name {
				if where[t.Name] == "" {
					return nil, ckErr(s.name, "tensor %q is not in %s", t.Name, IndexFile)
				}
				return nil, ckErr(s.name, "tensor %q is listed in %s under %s", t.Name, IndexFile, where[t.Name])
			}
			ck.tensor[t.Name] = stored{s, t}
		}
	}
	for name, file := range where {
		if _, ok := ck.tensor[name]; !ok {
			return nil, ckErr(file, "tensor %q listed in %s is missing", name, IndexFile)
		}
	}
	// Exactly the tensors of the config, with their shapes.
	want := cfg.tensors()
	for _, t := range want {
		st, ok := ck.tensor[t.name]
		if !ok {
			return nil, ckErr(ck.fileFor(t.name, where), "tensor %q missing (required by %s)", t.name, ConfigFile)
		}
		if err := checkStored(st.info, t.shape); err != nil {
			return nil, ckErr(st.shard.name, "%v", err)
		}
	}
	if len(ck.tensor) != len(want) {
		var extra []string
		for name := range ck.tensor {
			if !slices.ContainsFunc(want, func(t tensorSpec) bool { return t.name == name }) {
				extra = append(extra, name)
			}
		}
		sort.Strings(extra)
		return nil, ckErr(ck.tensor[extra[0]].shard.name, "unexpected tensor %q for %s (tie_word_embeddings %v); unexpected: %q", extra[0], cfg.Arch, cfg.Tied, extra)
	}
	ok = true
	return ck, nil
}

// fileFor names the file a missing tensor was expected in.
func (ck *Checkpoint) fileFor(name string, where map[string]string) string {
	if where == nil {
		return WeightsFile
	}
	return IndexFile
}

func (ck *Checkpoint) openShard(name string) error {
	f, err := ck.fsys.Open(name)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCheckpoint, err)
	}
	st, err := f.Stat()
	ra, isRA := f.(io.ReaderAt)
	if err != nil || !st.Mode().IsRegular() || !isRA {
		f.Close()
		return ckErr(name, "not a regular file")
	}
	sf, err := safetensors.Parse(ra, st.Size(), safetensors.Limits{})
	if err != nil {
		f.Close()
		return ckErr(name, "%v", err)
	}
	ck.files = append(ck.files, &shard{name: name, f: f, ra: ra, sf: sf})
	return nil
}

// parseIndex reads model.safetensors.index.json: {"metadata": {...},
// "weight_map": {tensor: file}}, every file a plain name inside the
// directory.
func parseIndex(b []byte) (map[string]string, error) {
	if err := checkJSON(b); err != nil {
		return nil, ckErr(IndexFile, "%v", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil || top == nil {
		return nil, ckErr(IndexFile, "not a JSON object")
	}
	for k := range top {
		if k != "metadata" && k != "weight_map" {
			return nil, ckErr(IndexFile, "unknown key %q", k)
		}
	}
	var wm map[string]string
	if err := json.Unmarshal(top["weight_map"], &wm); err != nil || len(wm) == 0 {
		return nil, ckErr(IndexFile, "weight_map is not a non-empty object of tensor → file name")
	}
	for t, f := range wm {
		if !validFileName(f) {
			return nil, ckErr(IndexFile, "tensor %q: file %q is not a .safetensors file name inside the directory", t, f)
		}
	}
	return wm, nil
}

// checkStored checks a stored tensor's dtype and shape.
func checkStored(info safetensors.TensorInfo, shape []int) error {
	if info.DType != "BF16" && info.DType != "F16" && info.DType != "F32" {
		return fmt.Errorf("tensor %q is %s; only BF16, F16 and F32 are supported", info.Name, info.DType)
	}
	ok := len(info.Shape) == len(shape)
	for i := 0; ok && i < len(shape); i++ {
		ok = info.Shape[i] == uint64(shape[i])
	}
	if !ok {
		return fmt.Errorf("tensor %q has shape %v, want %v", info.Name, info.Shape, shape)
	}
	return nil
}

// Read reads every tensor into float32 weights.
func (ck *Checkpoint) Read() (*Weights, error) {
	w, err := NewWeights(ck.Cfg)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, readChunk)
	for _, t := range ck.Cfg.specs(w) {
		st := ck.tensor[t.name]
		if err := readInto(*t.dst, st.shard.ra, st.shard.sf, st.info, buf); err != nil {
			return nil, ckErr(st.shard.name, "%v", err)
		}
	}
	return w, nil
}

// readInto converts a stored BF16, F16 or F32 tensor into dst (of the
// tensor's element count), reading through buf. Non-finite values are
// refused.
func readInto(dst []float32, r io.ReaderAt, sf *safetensors.File, info safetensors.TensorInfo, buf []byte) error {
	esize, _ := safetensors.DTypeSize(info.DType)
	if info.Size() != int64(esize*len(dst)) {
		return fmt.Errorf("tensor %q has %d bytes, want %d", info.Name, info.Size(), esize*len(dst))
	}
	off := sf.DataOffset + info.Begin
	per := len(buf) / esize
	for i := 0; i < len(dst); i += per {
		n := min(per, len(dst)-i)
		b := buf[:n*esize]
		if k, err := r.ReadAt(b, off+int64(i*esize)); k != len(b) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("tensor %q: %w", info.Name, err)
		}
		d := dst[i : i+n]
		switch info.DType {
		case "F32":
			for j := range d {
				d[j] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:]))
			}
		case "BF16":
			for j := range d {
				d[j] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*j:])) << 16)
			}
		case "F16":
			for j := range d {
				d[j] = halfToFloat(binary.LittleEndian.Uint16(b[2*j:]))
			}
		}
		for j, v := range d {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("tensor %q[%d] is %v", info.Name, i+j, v)
			}
		}
	}
	return nil
}

// halfToFloat converts an IEEE 754 binary16 value to float32 exactly.
func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf, NaN
		return math.Float32frombits(sign | 0xff<<23 | man<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: man·2⁻²⁴, exact in float32.
	v := float32(man) * (1.0 / (1 << 24))
	if sign != 0 {
		v = -v
	}
	return v
}
