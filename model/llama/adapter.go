package llama

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/zooai/gym/model/safetensors"
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
//
// On a Mixture-of-Experts model a module may be absent from some layers
// (Config.Has), and the expert modules hold one pair per expert as PEFT's
// ParamWrapper stores them: lora_A [Experts·r, in] (expert e's rows
// e·r … e·r+r-1) and lora_B [out, r·Experts] (expert e's column k at
// k·Experts+e). PEFT's rank_pattern and alpha_pattern give some modules
// another rank and alpha (Ranks, Alphas).
type Adapter struct {
	Rank    int
	Alpha   float64
	RSLoRA  bool     // scale alpha/sqrt(rank) instead of alpha/rank
	Targets []Module // the adapted modules, in Module order
	A, B    [][NumModules][]float32
	Experts int // experts per sparse layer when an expert module is adapted; 0 otherwise
	// Ranks and Alphas, when not nil, override Rank and Alpha for layer l
	// and module m where non-zero.
	Ranks  [][NumModules]int
	Alphas [][NumModules]float64
}

// Scale is the factor on B·A·x: lora_alpha/r, or lora_alpha/sqrt(r) with
// use_rslora, as PEFT computes it.
func (a *Adapter) Scale() float32 {
	if a.RSLoRA {
		return float32(a.Alpha / math.Sqrt(float64(a.Rank)))
	}
	return float32(a.Alpha / float64(a.Rank))
}

// RankAt is the rank of module m of layer l.
func (a *Adapter) RankAt(l int, m Module) int {
	if a.Ranks != nil && a.Ranks[l][m] != 0 {
		return a.Ranks[l][m]
	}
	return a.Rank
}

// ScaleAt is the scale of module m of layer l (Scale with its rank and
// alpha).
func (a *Adapter) ScaleAt(l int, m Module) float32 {
	r, al := a.RankAt(l, m), a.Alpha
	if a.Alphas != nil && a.Alphas[l][m] != 0 {
		al = a.Alphas[l][m]
	}
	if a.RSLoRA {
		return float32(al / math.Sqrt(float64(r)))
	}
	return float32(al / float64(r))
}

// pairs is the number of low-rank pairs module m holds: the experts of an
// expert module, else 1.
func (c Config) pairs(m Module) int {
	if m.Expert() {
		return c.MoE.Experts
	}
	return 1
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
	mask := make([][NumModules]bool, c.Layers)
	for m := range NumModules {
		found := false
		for l := range mask {
			mask[l][m] = seen[m] && c.Has(l, m)
			found = found || mask[l][m]
		}
		if seen[m] && !found {
			return nil, fmt.Errorf("%w: target %s: no layer of this %s model has it", ErrAdapter, m, c.Arch)
		}
		if seen[m] && c.Arch.MoE() && m >= GateProj && m <= DownProj {
			// PEFT maps gate_proj, up_proj and down_proj on Qwen3-MoE and
			// Mixtral onto the stacked experts, and on Qwen2-MoE onto the
			// shared expert too: ambiguous, so the MoE modules are named.
			return nil, fmt.Errorf("%w: target %s on a %s model: name experts.gate_up_proj, experts.down_proj, shared_expert.%s (or the attention projections) instead", ErrAdapter, m, c.Arch, m)
		}
	}
	return newAdapterMask(c, rank, alpha, mask, nil, nil)
}

// newAdapterMask returns a zero adapter on the modules mask marks, with
// per-module ranks and alphas where ranks and alphas (either may be nil)
// are non-zero.
func newAdapterMask(c Config, rank int, alpha float64, mask [][NumModules]bool, ranks [][NumModules]int, alphas [][NumModules]float64) (*Adapter, error) {
	a := &Adapter{Rank: rank, Alpha: alpha, A: make([][NumModules][]float32, c.Layers), B: make([][NumModules][]float32, c.Layers),
		Ranks: ranks, Alphas: alphas}
	var union [NumModules]bool
	for l := range c.Layers {
		for m := range NumModules {
			if !mask[l][m] {
				continue
			}
			if !c.Has(l, m) {
				return nil, fmt.Errorf("%w: %s: no such module in this model", ErrAdapter, m.Path(l))
			}
			union[m] = true
			in, out := c.Dims(m)
			r, e := a.RankAt(l, m), c.pairs(m)
			if r < 1 || r > 1<<16 {
				return nil, fmt.Errorf("%w: %s: rank %d", ErrAdapter, m.Path(l), r)
			}
			a.A[l][m] = make([]float32, e*r*in)
			a.B[l][m] = make([]float32, out*r*e)
			if m.Expert() {
				a.Experts = c.MoE.Experts
			}
		}
	}
	for m := range NumModules {
		if union[m] {
			a.Targets = append(a.Targets, m)
		}
	}
	if len(a.Targets) == 0 {
		return nil, fmt.Errorf("%w: no module of this model is targeted", ErrAdapter)
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
// A before B) under the names PEFT saves them with, with the shapes of a
// model of shape c.
func (a *Adapter) Tensors(c Config) []AdapterTensor {
	var ts []AdapterTensor
	for l := range a.A {
		for m := range NumModules {
			if a.A[l][m] == nil {
				continue
			}
			in, out := c.Dims(m)
			r := a.RankAt(l, m) * c.pairs(m)
			p := "base_model.model." + a.loraPath(l, m)
			ts = append(ts,
				AdapterTensor{p + ".lora_A.weight", []int{r, in}, a.A[l][m]},
				AdapterTensor{p + ".lora_B.weight", []int{out, r}, a.B[l][m]})
		}
	}
	return ts
}

// loraPath is the path PEFT gives module m's LoRA pair in layer l: the
// module's path, except that PEFT nests one ParamWrapper per targeted
// parameter of the experts, the first (gate_up_proj) inside the second,
// so with both targeted gate_up_proj's pair is under mlp.experts.base_layer.
func (a *Adapter) loraPath(l int, m Module) string {
	if m == ExpertsGateUp && a.A[l][ExpertsDown] != nil {
		return m.Path(l) + ".base_layer"
	}
	return m.Path(l)
}

// check reports whether a fits a model of shape c.
func (a *Adapter) check(c Config) error {
	if len(a.A) != c.Layers || len(a.B) != c.Layers || (a.Ranks != nil && len(a.Ranks) != c.Layers) || (a.Alphas != nil && len(a.Alphas) != c.Layers) {
		return fmt.Errorf("%w: %d layers, model has %d", ErrAdapter, len(a.A), c.Layers)
	}
	for l := range a.A {
		for m := range NumModules {
			if a.A[l][m] == nil && a.B[l][m] == nil {
				continue
			}
			in, out := c.Dims(m)
			r := a.RankAt(l, m) * c.pairs(m)
			if !c.Has(l, m) || a.A[l][m] == nil || a.B[l][m] == nil || len(a.A[l][m]) != r*in || len(a.B[l][m]) != out*r ||
				(m.Expert() && a.Experts != c.MoE.Experts) {
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
	"exclude_modules":         {"null", "[]"},
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
	Targets []Module // the module kinds the entries name (Mask: which modules of a given model they match)
	Base    string   // base_model_name_or_path, for people

	// The entries of target_modules and target_parameters, and the
	// rank_pattern and alpha_pattern keys, each matched as PEFT matches
	// them against a model's module and parameter names (Mask).
	modules, params []string
	all             bool // target_modules "all-linear"
	rankPat         []pattern
	alphaPat        []pattern
}

// pattern is one key of rank_pattern or alpha_pattern: a literal module
// name suffix (PEFT matches the regular expression (.*\.)?(key)$; only keys
// whose regular expression is a literal, optionally after ".*\.", are
// accepted) and its value.
type pattern struct {
	key    string // as written
	suffix string // the literal it stands for
	value  float64
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
	tv, pv := r.take("target_modules"), r.take("target_parameters")
	var all string
	switch {
	case tv == nil && pv == nil:
		return ac, bad("target_modules", "missing")
	case tv == nil:
	case json.Unmarshal(tv, &all) == nil:
		if all != "all-linear" {
			return ac, bad("target_modules", "%q: only a list of module names or \"all-linear\" is supported", all)
		}
		ac.all = true
	case json.Unmarshal(tv, &ac.modules) == nil:
	default:
		return ac, bad("target_modules", "%.60s is not a list of module names", tv)
	}
	if pv != nil && json.Unmarshal(pv, &ac.params) != nil {
		return ac, bad("target_parameters", "%.60s is not a list of parameter names", pv)
	}
	if len(ac.modules)+len(ac.params) > 1<<16 {
		return ac, bad("target_modules", "more than %d entries", 1<<16)
	}
	seen := map[Module]bool{}
	if ac.all {
		// Every nn.Linear: the attention and dense projections, Qwen2-MoE's
		// shared expert and its gate (PEFT writes resolved lists for MoE
		// models, where its all-linear also reaches the experts and router).
		for m := range Router {
			seen[m] = true
		}
	}
	for _, n := range ac.modules {
		ms := entryModules(n, false)
		if len(ms) == 0 {
			return ac, bad("target_modules", "%q names no module this engine can adapt (%v, a layer's path to one of them, or its PEFT suffix)", n, moduleNames[:Router])
		}
		// Targets lists what an entry names in a dense layer when it names
		// one there ("down_proj" also reaches Qwen2-MoE's
		// shared_expert.down_proj, which Mask resolves per model).
		if ms[0] < NumDenseModules {
			ms = ms[:1]
		}
		for _, m := range ms {
			seen[m] = true
		}
	}
	for _, n := range ac.params {
		ms := entryModules(n, true)
		if len(ms) == 0 {
			return ac, bad("target_parameters", "%q names no parameter this engine can adapt (mlp.experts.gate_up_proj, mlp.experts.down_proj, mlp.gate.weight)", n)
		}
		for _, m := range ms {
			seen[m] = true
		}
	}
	for m := range NumModules {
		if seen[m] {
			ac.Targets = append(ac.Targets, m)
		}
	}
	if len(ac.Targets) == 0 {
		return ac, bad("target_modules", "empty")
	}
	for _, k := range []string{"rank_pattern", "alpha_pattern"} {
		v := r.take(k)
		if v == nil {
			continue
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(v, &m) != nil {
			return ac, bad(k, "%.60s is not an object", v)
		}
		keys := slices.Sorted(maps.Keys(m))
		for _, pk := range keys {
			suffix, ok := literalPattern(pk)
			if !ok {
				return ac, bad(k, "key %q: only a literal module name (optionally after \".*\\.\") is supported", pk)
			}
			f, err := parseFloat(k+"."+pk, m[pk])
			if err != nil {
				return ac, fmt.Errorf("%w: %s: %v", ErrAdapter, AdapterConfigFile, err)
			}
			if k == "rank_pattern" {
				if f != math.Trunc(f) || f < 1 || f > 1<<16 {
					return ac, bad(k, "key %q: rank %v is not an integer in [1, %d]", pk, f, 1<<16)
				}
				ac.rankPat = append(ac.rankPat, pattern{pk, suffix, f})
			} else {
				if !(f > 0) {
					return ac, bad(k, "key %q: alpha %v is not positive", pk, f)
				}
				ac.alphaPat = append(ac.alphaPat, pattern{pk, suffix, f})
			}
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
	a, err := ac.NewAdapter(c)
	if err != nil {
		return nil, ac, err
	}
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

// moduleKey is the name PEFT matches target_modules against (module m of
// layer l), or, for the router and the experts, target_parameters.
func moduleKey(l int, m Module) string {
	switch m {
	case Router:
		return m.Path(l) + ".weight"
	case ExpertsGateUp:
		return m.Path(l) + ".gate_up_proj"
	case ExpertsDown:
		return m.Path(l) + ".down_proj"
	}
	return m.Path(l)
}

// pefMatch is PEFT's rule for a target_modules or target_parameters entry
// that is a list element: the key is the entry, or ends with "." + entry.
func peftMatch(key, entry string) bool {
	return key == entry || strings.HasSuffix(key, "."+entry)
}

// entryModules lists the module kinds a target_modules entry (params
// false: nn.Linear modules: the attention and dense projections, the shared
// expert and its gate) or target_parameters entry (params true: the router
// weight and the stacked experts) matches in some layer. An entry naming a
// layer (model.layers.3.…) is tried against that layer's paths.
func entryModules(entry string, params bool) []Module {
	l := 0
	if i := strings.Index(entry, "layers."); i >= 0 {
		rest := entry[i+len("layers."):]
		j := strings.IndexByte(rest, '.')
		if j < 0 {
			j = len(rest)
		}
		n, err := strconv.Atoi(rest[:j])
		if err != nil || n < 0 || n >= maxLayers {
			return nil
		}
		l = n
	}
	var ms []Module
	for m := range NumModules {
		if (m >= Router) != params {
			continue
		}
		if peftMatch(moduleKey(l, m), entry) {
			ms = append(ms, m)
		}
	}
	return ms
}

// literalPattern returns the literal a rank_pattern or alpha_pattern key
// stands for, when its regular expression is a literal name (escaped dots
// allowed) optionally preceded by ".*\.".
func literalPattern(k string) (string, bool) {
	k = strings.TrimPrefix(k, `.*\.`)
	lit := strings.ReplaceAll(k, `\.`, ".")
	if lit == "" || strings.Trim(lit, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.") != "" ||
		strings.Contains(strings.ReplaceAll(k, `\.`, ""), ".") {
		return "", false
	}
	return lit, true
}

// patternMatch is PEFT's rule for a rank_pattern or alpha_pattern key
// that is a literal: re.match("(.*\.)?(key)$", name).
func patternMatch(name, suffix string) bool {
	return name == suffix || strings.HasSuffix(name, "."+suffix)
}

// Mask resolves the targets against a model of shape c as PEFT does:
// which modules of which layers the adapter holds, with their ranks and
// alphas where rank_pattern or alpha_pattern set them (nil when neither
// does). A module that exists nowhere in c is an error naming the entry.
func (ac AdapterConfig) Mask(c Config) (mask [][NumModules]bool, ranks [][NumModules]int, alphas [][NumModules]float64, err error) {
	mask = make([][NumModules]bool, c.Layers)
	if len(ac.rankPat) > 0 {
		ranks = make([][NumModules]int, c.Layers)
	}
	if len(ac.alphaPat) > 0 {
		alphas = make([][NumModules]float64, c.Layers)
	}
	used := map[string]bool{}
	for l := range c.Layers {
		for m := range NumModules {
			if !c.Has(l, m) {
				continue
			}
			key := moduleKey(l, m)
			hit := ac.all && m < Router
			for _, e := range ac.modules {
				if m < Router && peftMatch(key, e) {
					hit, used[e] = true, true
				}
			}
			for _, e := range ac.params {
				if m >= Router && peftMatch(key, e) {
					hit, used[e] = true, true
				}
			}
			if !hit {
				continue
			}
			mask[l][m] = true
			// PEFT takes the first matching key, in the file's order;
			// keys are kept sorted, which is how json.dump writes them.
			for _, p := range ac.rankPat {
				if patternMatch(key, p.suffix) {
					ranks[l][m] = int(p.value)
					break
				}
			}
			for _, p := range ac.alphaPat {
				if patternMatch(key, p.suffix) {
					alphas[l][m] = p.value
					break
				}
			}
		}
	}
	for _, e := range append(append([]string(nil), ac.modules...), ac.params...) {
		if !used[e] {
			return nil, nil, nil, fmt.Errorf("%w: %s: target %q matches no module of this %s model", ErrAdapter, AdapterConfigFile, e, c.Arch)
		}
	}
	return mask, ranks, alphas, nil
}

// NewAdapter returns a zero adapter of this configuration for a model of
// shape c (Mask).
func (ac AdapterConfig) NewAdapter(c Config) (*Adapter, error) {
	mask, ranks, alphas, err := ac.Mask(c)
	if err != nil {
		return nil, err
	}
	a, err := newAdapterMask(c, ac.Rank, ac.Alpha, mask, ranks, alphas)
	if err != nil {
		return nil, err
	}
	a.RSLoRA = ac.RSLoRA
	return a, nil
}

// Params is the number of LoRA parameters this configuration puts on a
// model of shape c.
func (ac AdapterConfig) Params(c Config) (int64, error) {
	mask, ranks, _, err := ac.Mask(c)
	if err != nil {
		return 0, err
	}
	var n int64
	for l := range mask {
		for m := range NumModules {
			if !mask[l][m] {
				continue
			}
			r := ac.Rank
			if ranks != nil && ranks[l][m] != 0 {
				r = ranks[l][m]
			}
			in, out := c.Dims(m)
			n += int64(r) * int64(in+out) * int64(c.pairs(m))
		}
	}
	return n, nil
}
