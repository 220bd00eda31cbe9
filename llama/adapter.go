package llama

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/zooai/gym/safetensors"
)

// ErrAdapter reports a PEFT adapter this engine refuses: malformed, not
// LoRA, using a LoRA variant it does not compute, or not matching the base.
var ErrAdapter = errors.New("llama: unsupported adapter")

// Files of a PEFT adapter directory.
const (
	AdapterConfigFile  = "adapter_config.json"
	AdapterWeightsFile = "adapter_model.safetensors"
)

// Adapter holds LoRA matrices for a model: for layer l and module m, A[l][m]
// is lora_A [Rank, in] and B[l][m] is lora_B [out, Rank]; both nil for a
// module without an adapter. Its output is Scale()·B·A·x.
type Adapter struct {
	Rank    int
	Alpha   float64
	RSLoRA  bool     // scale alpha/sqrt(rank) instead of alpha/rank
	Targets []Module // the adapted modules, in Module order
	A, B    [][NumModules][]float32
}

// Scale is the factor on B·A·x: lora_alpha/r, or lora_alpha/sqrt(r) with
// use_rslora, as PEFT computes it.
func (a *Adapter) Scale() float32 {
	if a.RSLoRA {
		return float32(a.Alpha / math.Sqrt(float64(a.Rank)))
	}
	return float32(a.Alpha / float64(a.Rank))
}

// NewAdapter returns a zero adapter of the given rank on targets, every
// layer of a model of shape c.
func NewAdapter(c Config, rank int, alpha float64, targets []Module) (*Adapter, error) {
	if rank < 1 || rank > 1<<16 || !(alpha > 0) || math.IsInf(alpha, 0) || len(targets) == 0 {
		return nil, fmt.Errorf("%w: rank %d, alpha %v, %d targets", ErrAdapter, rank, alpha, len(targets))
	}
	seen := map[Module]bool{}
	for _, m := range targets {
		if m < 0 || m >= NumModules || seen[m] {
			return nil, fmt.Errorf("%w: target module %d invalid or repeated", ErrAdapter, m)
		}
		seen[m] = true
	}
	a := &Adapter{Rank: rank, Alpha: alpha, A: make([][NumModules][]float32, c.Layers), B: make([][NumModules][]float32, c.Layers)}
	for m := range NumModules {
		if !seen[m] {
			continue
		}
		a.Targets = append(a.Targets, m)
		in, out := c.Dims(m)
		for l := range c.Layers {
			a.A[l][m] = make([]float32, rank*in)
			a.B[l][m] = make([]float32, out*rank)
		}
	}
	return a, nil
}

// AdapterTensor is a named view of one LoRA matrix.
type AdapterTensor struct {
	Name  string // PEFT's name: base_model.model.<module path>.lora_A.weight
	Shape []int
	Data  []float32
}

// Tensors returns the adapter's matrices in a fixed order (layer, module,
// A before B) under the names PEFT saves them with.
func (a *Adapter) Tensors(c Config) []AdapterTensor {
	var ts []AdapterTensor
	for l := range a.A {
		for m := range NumModules {
			if a.A[l][m] == nil {
				continue
			}
			in, out := c.Dims(m)
			p := "base_model.model." + m.Path(l)
			ts = append(ts,
				AdapterTensor{p + ".lora_A.weight", []int{a.Rank, in}, a.A[l][m]},
				AdapterTensor{p + ".lora_B.weight", []int{out, a.Rank}, a.B[l][m]})
		}
	}
	return ts
}

// check reports whether a fits a model of shape c.
func (a *Adapter) check(c Config) error {
	if len(a.A) != c.Layers || len(a.B) != c.Layers {
		return fmt.Errorf("%w: %d layers, model has %d", ErrAdapter, len(a.A), c.Layers)
	}
	for l := range a.A {
		for m := range NumModules {
			in, out := c.Dims(m)
			if (a.A[l][m] == nil) != (a.B[l][m] == nil) ||
				(a.A[l][m] != nil && (len(a.A[l][m]) != a.Rank*in || len(a.B[l][m]) != out*a.Rank)) {
				return fmt.Errorf("%w: %s has the wrong shape", ErrAdapter, m.Path(l))
			}
		}
	}
	return nil
}

// adapterMetadataKeys are adapter_config.json keys that do not change what
// a loaded LoRA adapter computes (initialisation recipes, bookkeeping).
var adapterMetadataKeys = []string{
	"auto_mapping", "base_model_name_or_path", "revision", "task_type", "inference_mode",
	"init_lora_weights", "lora_dropout", "loftq_config", "eva_config", "corda_config",
	"megatron_config", "megatron_core", "peft_version", "qalora_group_size", "layers_pattern",
	"ensure_weight_tying", "lora_ga_config",
	"zoo_gym", // gym's own provenance (package peft)
}

// adapterDefaultKeys must hold their default (or be absent): other values
// select LoRA variants this engine does not compute.
var adapterDefaultKeys = map[string][]string{
	"bias":                    {`"none"`},
	"fan_in_fan_out":          {"false"},
	"use_dora":                {"false"},
	"lora_bias":               {"false"},
	"use_qalora":              {"false"},
	"modules_to_save":         {"null", "[]"},
	"layers_to_transform":     {"null"},
	"layer_replication":       {"null"},
	"rank_pattern":            {"{}", "null"},
	"alpha_pattern":           {"{}", "null"},
	"exclude_modules":         {"null", "[]"},
	"target_parameters":       {"null", "[]"},
	"trainable_token_indices": {"null"},
	"alora_invocation_tokens": {"null"},
	"arrow_config":            {"null"},
	"use_bdlora":              {"null", "false"},
	"kasa_config":             {"null"},
	"velora_config":           {"null"},
	"monteclora_config":       {"null"},
}

// AdapterConfig is what adapter_config.json says about the computation.
type AdapterConfig struct {
	Rank    int
	Alpha   float64
	RSLoRA  bool
	Targets []Module
	Base    string // base_model_name_or_path, for people
}

// ParseAdapterConfig reads a PEFT adapter_config.json strictly: a LORA
// adapter with target_modules a list of the seven projection names (or
// "all-linear"), no DoRA, no biases, no per-module rank or alpha patterns;
// unknown keys are refused, naming them.
func ParseAdapterConfig(b []byte) (AdapterConfig, error) {
	var ac AdapterConfig
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: field %q: %s", ErrAdapter, AdapterConfigFile, field, fmt.Sprintf(format, args...))
	}
	if len(b) > maxConfigBytes {
		return ac, fmt.Errorf("%w: %s is %d bytes", ErrAdapter, AdapterConfigFile, len(b))
	}
	if err := checkJSON(b); err != nil {
		return ac, fmt.Errorf("%w: %s: %v", ErrAdapter, AdapterConfigFile, err)
	}
	r := &rawConfig{used: map[string]bool{}}
	if err := json.Unmarshal(b, &r.m); err != nil || r.m == nil {
		return ac, fmt.Errorf("%w: %s is not a JSON object", ErrAdapter, AdapterConfigFile)
	}
	if v := r.take("peft_type"); v == nil || string(v) != `"LORA"` {
		return ac, bad("peft_type", "%.40s, want \"LORA\"", v)
	}
	var err error
	if ac.Rank, err = r.intField("r", true, 0, 1, 1<<16); err != nil {
		return ac, fmt.Errorf("%w: %s: %v", ErrAdapter, AdapterConfigFile, err)
	}
	v := r.take("lora_alpha")
	if v == nil {
		return ac, bad("lora_alpha", "missing")
	}
	if ac.Alpha, err = parseFloat("lora_alpha", v); err != nil || !(ac.Alpha > 0) {
		return ac, bad("lora_alpha", "%.40s is not a positive number", v)
	}
	if ac.RSLoRA, err = r.boolField("use_rslora", false); err != nil {
		return ac, fmt.Errorf("%w: %s: %v", ErrAdapter, AdapterConfigFile, err)
	}
	tv := r.take("target_modules")
	var names []string
	var all string
	switch {
	case tv == nil:
		return ac, bad("target_modules", "missing")
	case json.Unmarshal(tv, &all) == nil:
		if all != "all-linear" {
			return ac, bad("target_modules", "%q: only a list of module names or \"all-linear\" is supported", all)
		}
		names = moduleNames[:]
	case json.Unmarshal(tv, &names) == nil && len(names) > 0:
	default:
		return ac, bad("target_modules", "%.60s is not a list of module names", tv)
	}
	seen := map[Module]bool{}
	for _, n := range names {
		m, ok := ParseModule(n)
		if !ok {
			return ac, bad("target_modules", "%q is not one of %v", n, moduleNames)
		}
		seen[m] = true
	}
	for m := range NumModules {
		if seen[m] {
			ac.Targets = append(ac.Targets, m)
		}
	}
	if v := r.take("base_model_name_or_path"); v != nil {
		ac.Base, _ = parseString("base_model_name_or_path", v)
	}
	keys := make([]string, 0, len(adapterDefaultKeys))
	for k := range adapterDefaultKeys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := r.mustBe(k, adapterDefaultKeys[k]...); err != nil {
			return ac, fmt.Errorf("%w: %s: %v", ErrAdapter, AdapterConfigFile, err)
		}
	}
	for _, k := range adapterMetadataKeys {
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
		return ac, bad(unknown[0], "unknown key (unknown keys: %q)", unknown)
	}
	return ac, nil
}

// ReadAdapter loads a PEFT LoRA adapter directory (adapter_config.json and
// adapter_model.safetensors) for a base model of shape c. The tensors must
// be exactly lora_A and lora_B of every layer for every target module,
// named as PEFT names them, with the shapes of c; BF16, F16 and F32 are
// converted to float32.
func ReadAdapter(dir string, c Config) (*Adapter, AdapterConfig, error) {
	cb, err := readSmall(filepath.Join(dir, AdapterConfigFile), maxConfigBytes)
	if err != nil {
		return nil, AdapterConfig{}, fmt.Errorf("%w: %v", ErrAdapter, err)
	}
	ac, err := ParseAdapterConfig(cb)
	if err != nil {
		return nil, ac, err
	}
	a, err := NewAdapter(c, ac.Rank, ac.Alpha, ac.Targets)
	if err != nil {
		return nil, ac, err
	}
	a.RSLoRA = ac.RSLoRA
	path := filepath.Join(dir, AdapterWeightsFile)
	f, err := os.Open(path)
	if err != nil {
		return nil, ac, fmt.Errorf("%w: %v", ErrAdapter, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, ac, fmt.Errorf("%w: %v", ErrAdapter, err)
	}
	sf, err := safetensors.Parse(f, st.Size(), safetensors.Limits{})
	if err != nil {
		return nil, ac, fmt.Errorf("%w: %s: %w", ErrAdapter, AdapterWeightsFile, err)
	}
	want := a.Tensors(c)
	if len(sf.Tensors) != len(want) {
		extra := ""
		for _, t := range sf.Tensors {
			if !slices.ContainsFunc(want, func(w AdapterTensor) bool { return w.Name == t.Name }) {
				extra = fmt.Sprintf(" (unexpected tensor %q)", t.Name)
				break
			}
		}
		return nil, ac, fmt.Errorf("%w: %s holds %d tensors, want %d for r=%d on %v%s", ErrAdapter, AdapterWeightsFile, len(sf.Tensors), len(want), ac.Rank, ac.Targets, extra)
	}
	infos := make([]safetensors.TensorInfo, len(want))
	for i, t := range want {
		info, ok := sf.Lookup(t.Name)
		if !ok {
			return nil, ac, fmt.Errorf("%w: %s: tensor %q missing", ErrAdapter, AdapterWeightsFile, t.Name)
		}
		if err := checkStored(info, t.Shape); err != nil {
			return nil, ac, fmt.Errorf("%w: %s: %v", ErrAdapter, AdapterWeightsFile, err)
		}
		infos[i] = info
	}
	buf := make([]byte, readChunk)
	for i, t := range want {
		if err := readInto(t.Data, f, sf, infos[i], buf); err != nil {
			return nil, ac, fmt.Errorf("%w: %s: %v", ErrAdapter, AdapterWeightsFile, err)
		}
	}
	return a, ac, nil
}

// readSmall reads a file of at most limit bytes.
func readSmall(path string, limit int64) ([]byte, error) {
	return readSmallFS(os.DirFS(filepath.Dir(path)), filepath.Base(path), limit)
}

// readSmallFS reads file name of fsys, of at most limit bytes.
func readSmallFS(fsys fs.FS, name string, limit int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s: %d bytes, more than %d", name, st.Size(), limit)
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(f); err != nil {
		return nil, err
	}
	if int64(b.Len()) > limit {
		return nil, fmt.Errorf("%s: more than %d bytes", name, limit)
	}
	return b.Bytes(), nil
}

// validFileName reports whether a shard name from an index is a plain file
// name inside the directory.
func validFileName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\\x00") && !strings.HasPrefix(s, ".") && strings.HasSuffix(s, ".safetensors")
}
