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
	"unsafe"

	"github.com/zooai/gym/model/safetensors"
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
	size int64
	sf   *safetensors.File
}

type stored struct {
	shard *shard
	info  safetensors.TensorInfo
}

// Bytes is the memory the weights take once read by Read: 2 bytes per
// element of a matrix stored in BF16 or F16, 4 for every other element
// (F32 matrices, norm gains and biases, which are read as float32). Tied
// embeddings count once.
func (ck *Checkpoint) Bytes() int64 {
	var n int64
	for _, t := range ck.Cfg.tensors() {
		size := int64(4)
		if dt := ck.tensor[t.name].info.DType; len(t.shape) >= 2 && (dt == "BF16" || dt == "F16") {
			size = 2
		}
		n += size * int64(t.numel())
	}
	return n
}

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
	// A MoE checkpoint's expert layout is read from its tensor names: the
	// stacked experts of transformers 5's modules, or one module per expert.
	if cfg.Arch.MoE() {
		for l := range cfg.Layers {
			if cfg.Sparse(l) {
				_, cfg.MoE.FusedExperts = ck.tensor[fmt.Sprintf("model.layers.%d.mlp.experts.gate_up_proj", l)]
				break
			}
		}
		ck.Cfg = cfg
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
	ck.files = append(ck.files, &shard{name: name, f: f, ra: ra, size: st.Size(), sf: sf})
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

// Read reads the weights, keeping the checkpoint's dtype: a matrix stored
// in BF16 or F16 (the embeddings, every projection, the output head) stays
// 16-bit (Mat), memory-mapped from its file when the file is an operating
// system file (Open, not an fs.FS such as an embed.FS), the tensor's data
// starts at an even offset and the machine is little-endian, and read into
// the Go heap otherwise; F32 matrices, norm gains and biases are read as
// float32. The engine's results are bitwise those of ReadFloat32's
// weights. A mapped file must not be modified in place while the weights
// are in use (replacing it, as basecache and atomic writers do, is safe).
func (ck *Checkpoint) Read() (*Weights, error) { return ck.read(true, true) }

// ReadFloat32 reads every tensor into float32 weights (every Mat F32), as
// Read did before weights kept their dtype: twice the memory of a 16-bit
// checkpoint, for callers that modify the weights.
func (ck *Checkpoint) ReadFloat32() (*Weights, error) { return ck.read(false, false) }

// read reads the weights, keeping 16-bit matrices as they are when keep is
// set, mapped from the files where possible when mapFiles is set.
func (ck *Checkpoint) read(keep, mapFiles bool) (*Weights, error) {
	if err := ck.Cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Weights{Cfg: ck.Cfg, Layers: make([]Layer, ck.Cfg.Layers)}
	buf := make([]byte, readChunk)
	maps := map[*shard]*mapping{}
	for _, t := range ck.Cfg.specs(w) {
		st := ck.tensor[t.name]
		if t.mat != nil && keep && st.info.DType != "F32" {
			m, err := ck.readHalf(st, t.numel(), buf, mapFiles, maps)
			if err != nil {
				return nil, ckErr(st.shard.name, "%v", err)
			}
			*t.mat = m
			continue
		}
		d := make([]float32, t.numel())
		if err := readInto(d, st.shard.ra, st.shard.sf, st.info, buf); err != nil {
			return nil, ckErr(st.shard.name, "%v", err)
		}
		if t.mat != nil {
			*t.mat = Mat{F32: d}
		} else {
			*t.dst = d
		}
	}
	if ck.Cfg.Tied {
		w.Head = w.Embed
	}
	w.linkExperts()
	return w, nil
}

// littleEndian reports whether this machine stores a uint16 as the file
// does.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// readHalf reads a BF16 or F16 tensor of n elements as a 16-bit Mat: a
// view of the shard's memory map when possible (mapping the shard once, in
// maps), else a copy in the Go heap. Non-finite values are refused.
func (ck *Checkpoint) readHalf(st stored, n int, buf []byte, mapFiles bool, maps map[*shard]*mapping) (Mat, error) {
	info := st.info
	dt := BF16
	if info.DType == "F16" {
		dt = F16
	}
	if info.Size() != int64(2*n) || n == 0 {
		return Mat{}, fmt.Errorf("tensor %q has %d bytes, want %d", info.Name, info.Size(), 2*n)
	}
	off := st.shard.sf.DataOffset + info.Begin
	m := Mat{dtype: dt}
	if mapFiles && littleEndian && off%2 == 0 {
		mp, seen := maps[st.shard]
		if !seen {
			mp = mapShard(st.shard)
			maps[st.shard] = mp
		}
		if mp != nil && off+int64(2*n) <= int64(len(mp.data)) {
			m.half = unsafe.Slice((*uint16)(unsafe.Pointer(&mp.data[off])), n)
			m.keep = mp
		}
	}
	if m.half == nil {
		m.half = make([]uint16, n)
		per := len(buf) / 2
		for i := 0; i < n; i += per {
			k := min(per, n-i)
			b := buf[:2*k]
			if got, err := st.shard.ra.ReadAt(b, off+int64(2*i)); got != len(b) {
				if err == nil || err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return Mat{}, fmt.Errorf("tensor %q: %w", info.Name, err)
			}
			for j := range k {
				m.half[i+j] = binary.LittleEndian.Uint16(b[2*j:])
			}
		}
	}
	for i, h := range m.half {
		if !halfFinite(dt, h) {
			v := make([]float32, 1)
			widenGo(dt, v, m.half[i:i+1])
			return Mat{}, fmt.Errorf("tensor %q[%d] is %v", info.Name, i, v[0])
		}
	}
	return m, nil
}

// mapShard maps a shard's file, or returns nil where it cannot (not an
// operating system file, no memory maps on this platform, the file changed
// size since its header was read): the caller then reads instead.
func mapShard(s *shard) *mapping {
	f, ok := s.f.(*os.File)
	if !ok {
		return nil
	}
	m, err := mapFile(f, s.size)
	if err != nil {
		return nil
	}
	if st, err := f.Stat(); err != nil || st.Size() != s.size {
		return nil // the cleanup unmaps it
	}
	return m
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
