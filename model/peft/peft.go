// Package peft reads and writes LoRA adapters in the Hugging Face PEFT
// layout, so a checkpoint gym publishes loads with
// PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base),
// checkpoint), and a checkpoint directory is the unit that `gym eval` and
// the orchestrator pass around.
//
// A checkpoint is a directory of three files:
//
//	adapter_model.safetensors  the LoRA matrices, F32, under PEFT's names for
//	                           the architecture:
//	                           base_model.model.model.layers.<l>.self_attn.q_proj.lora_A.weight [r, in],
//	                           …mlp.down_proj.lora_B.weight [out, r] (llama.Adapter.Views);
//	                           __metadata__ is {"format": "pt"}, as PEFT writes it
//	adapter_config.json        what LoraConfig.save_pretrained writes (sorted
//	                           keys, 2-space indent): target_modules are the
//	                           transformers module names, base_model_name_or_path
//	                           the base model's name; plus "zoo_gym": the base
//	                           model's SHA3, job, epoch and free-form extra fields
//	                           (Extra["task"] is the task)
//	README.md                  the model card: YAML front matter, then the base
//	                           model's name and SHA3, job, epoch, quality,
//	                           held-out accuracy, the CID of
//	                           adapter_model.safetensors and how to load it
//
// The shapes are PEFT's and the engine's alike (lora_A is nn.Linear(in, r),
// its weight [r, in]), so no tensor is transposed. The scale is
// lora_alpha/r (use_rslora false). Read checks a directory against the base
// model's shape with llama.ReadAdapter (strict: unknown keys and LoRA
// variants the engine does not compute are refused).
//
// PEFT releases that drop unknown adapter_config.json keys (0.14 and later
// warn and ignore "zoo_gym") load the directory as is; older ones raise on
// the extra key: delete it from a copy of the file for them.
package peft

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
	"strings"

	"github.com/zooai/gym/internal/atomicfile"
	"github.com/zooai/gym/model/llama"
	"github.com/zooai/gym/model/safetensors"
)

// File names inside a checkpoint directory.
const (
	WeightsFile = "adapter_model.safetensors"
	ConfigFile  = "adapter_config.json"
	CardFile    = "README.md"
)

// ExtraTask is the Card.Extra (and Config.Extra) key naming the task the
// adapter was trained on.
const ExtraTask = "task"

// maxConfigBytes bounds adapter_config.json.
const maxConfigBytes = 1 << 20

var (
	// ErrFormat reports a checkpoint whose files do not match each other or
	// the PEFT layout.
	ErrFormat = errors.New("peft: bad checkpoint")
	// ErrCard reports card fields that cannot be written.
	ErrCard = errors.New("peft: bad model card")
)

// Card is what the model card (README.md) says about the adapter.
type Card struct {
	BaseModel  string   // base_model_name_or_path: the base model's name (builtin, a CID, a Hub id)
	BaseSHA3   string   // hex SHA3-256 identifying the base model
	Job        string   // the job that trained it
	Epoch      int      // the epoch it closes
	Quality    float64  // the orchestrator's validation score
	Accuracy   *float64 // held-out accuracy in [0, 1]; nil: not measured
	WeightsCID string   // CID of adapter_model.safetensors (computed by the caller from WeightsBytes)
	Extra      map[string]string
}

// Config is what Read learns from adapter_config.json.
type Config struct {
	BaseModel string // base_model_name_or_path
	Adapter   llama.AdapterConfig
	BaseSHA3  string // zoo_gym.base_sha3
	Job       string // zoo_gym.job
	Epoch     int    // zoo_gym.epoch
	Extra     map[string]string
}

// gymConfig is the "zoo_gym" object of adapter_config.json.
type gymConfig struct {
	BaseSHA3 string            `json:"base_sha3"`
	Job      string            `json:"job"`
	Epoch    int               `json:"epoch"`
	Extra    map[string]string `json:"extra"`
}

// loraConfig is adapter_config.json as LoraConfig.save_pretrained writes it
// (keys sorted), with the fields that change a LoRA layer's meaning.
type loraConfig struct {
	AlphaPattern      map[string]any `json:"alpha_pattern"`
	AutoMapping       any            `json:"auto_mapping"`
	BaseModel         string         `json:"base_model_name_or_path"`
	Bias              string         `json:"bias"`
	FanInFanOut       bool           `json:"fan_in_fan_out"`
	InferenceMode     bool           `json:"inference_mode"`
	InitLoraWeights   bool           `json:"init_lora_weights"`
	LayersPattern     any            `json:"layers_pattern"`
	LayersToTransform any            `json:"layers_to_transform"`
	LoraAlpha         float64        `json:"lora_alpha"`
	LoraDropout       float64        `json:"lora_dropout"`
	ModulesToSave     any            `json:"modules_to_save"`
	PeftType          string         `json:"peft_type"`
	R                 int            `json:"r"`
	RankPattern       map[string]any `json:"rank_pattern"`
	Revision          any            `json:"revision"`
	TargetModules     []string       `json:"target_modules"`
	TargetParameters  []string       `json:"target_parameters,omitempty"` // absent unless the router or experts are adapted: dense checkpoints keep their bytes
	TaskType          string         `json:"task_type"`
	UseDora           bool           `json:"use_dora"`
	UseRslora         bool           `json:"use_rslora"`
	ZooGym            *gymConfig     `json:"zoo_gym"`
}

// WeightsBytes returns the adapter_model.safetensors bytes of a: the same
// bytes Write puts in the directory, so a caller can compute their CID
// before writing the card.
func WeightsBytes(a *llama.Adapter) ([]byte, error) {
	if err := checkAdapter(a); err != nil {
		return nil, err
	}
	var ts []safetensors.Tensor
	for _, t := range a.Views() {
		shape := make([]uint64, len(t.Shape))
		for i, d := range t.Shape {
			shape[i] = uint64(d)
		}
		ts = append(ts, safetensors.Tensor{Name: t.Name, DType: "F32", Shape: shape, Data: llama.Float32Bytes(t.Data)})
	}
	var b bytes.Buffer
	if err := safetensors.Write(&b, ts, map[string]string{"format": "pt"}); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func checkAdapter(a *llama.Adapter) error {
	if a == nil || a.Rank < 1 || len(a.Targets) == 0 || !(a.Alpha > 0) || math.IsInf(a.Alpha, 0) {
		return fmt.Errorf("%w: no adapter, or one without rank, alpha or targets", ErrFormat)
	}
	if a.RSLoRA {
		return fmt.Errorf("%w: rsLoRA adapters are not written", ErrFormat)
	}
	if a.Ranks != nil || a.Alphas != nil {
		return fmt.Errorf("%w: adapters with per-module ranks or alphas are not written", ErrFormat)
	}
	for _, t := range a.Views() {
		if n := t.Shape[0] * t.Shape[1]; len(t.Data) != n {
			return fmt.Errorf("%w: tensor %s holds %d values, its shape %v needs %d", ErrFormat, t.Name, len(t.Data), t.Shape, n)
		}
		for _, v := range t.Data {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("%w: tensor %s holds %v", ErrFormat, t.Name, v)
			}
		}
	}
	return nil
}

// ConfigBytes returns the adapter_config.json bytes Write puts in the
// directory for a and card.
func ConfigBytes(a *llama.Adapter, card Card) ([]byte, error) {
	if err := checkAdapter(a); err != nil {
		return nil, err
	}
	// The router and the stacked experts are parameters to PEFT
	// (target_parameters, under their module paths inside a layer).
	var targets, params []string
	for _, m := range a.Targets {
		if m >= llama.Router {
			params = append(params, "mlp."+m.String())
		} else {
			targets = append(targets, m.String())
		}
	}
	extra := card.Extra
	if extra == nil {
		extra = map[string]string{}
	}
	c := loraConfig{
		AlphaPattern: map[string]any{}, BaseModel: card.BaseModel, Bias: "none", InferenceMode: true, InitLoraWeights: true,
		LoraAlpha: a.Alpha, PeftType: "LORA", R: a.Rank, RankPattern: map[string]any{},
		TargetModules: targets, TargetParameters: params, TaskType: "CAUSAL_LM",
		ZooGym: &gymConfig{BaseSHA3: card.BaseSHA3, Job: card.Job, Epoch: card.Epoch, Extra: extra},
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// CardBytes returns the README.md bytes Write puts in the directory.
func CardBytes(card Card) ([]byte, error) {
	if err := card.check(); err != nil {
		return nil, err
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	var b strings.Builder
	fmt.Fprintf(&b, "---\nbase_model: %s\nlibrary_name: peft\ntags:\n- zoo-gym\n- gspo\n- lora\n---\n\n", q(card.BaseModel))
	title := "LoRA adapter"
	if card.Job != "" {
		title += " for job " + card.Job
	}
	fmt.Fprintf(&b, "# %s, epoch %d\n\n", title, card.Epoch)
	b.WriteString("A LoRA adapter trained with GSPO by Zoo Gym's decentralized workers and merged by the orchestrator.\n\n")
	b.WriteString("| field | value |\n| --- | --- |\n")
	row := func(k, v string) { fmt.Fprintf(&b, "| %s | %s |\n", k, v) }
	row("base model", "`"+card.BaseModel+"`")
	if card.BaseSHA3 != "" {
		row("base model SHA3-256", "`"+card.BaseSHA3+"`")
	}
	if card.Job != "" {
		row("job", "`"+card.Job+"`")
	}
	row("epoch", fmt.Sprint(card.Epoch))
	row("quality", fmt.Sprintf("%.6g", card.Quality))
	if card.Accuracy != nil {
		row("held-out accuracy", fmt.Sprintf("%.2f%%", 100**card.Accuracy))
	}
	if card.WeightsCID != "" {
		row(WeightsFile+" CID", "`"+card.WeightsCID+"`")
	}
	for _, k := range slices.Sorted(maps.Keys(card.Extra)) {
		row(k, card.Extra[k])
	}
	b.WriteString("\n## How to load\n\nWith Hugging Face PEFT, on the base model (its directory: `gym base export DIR` writes the built-in one):\n\n```python\n")
	b.WriteString("from peft import PeftModel\nfrom transformers import AutoModelForCausalLM\n\n")
	b.WriteString("base = AutoModelForCausalLM.from_pretrained(\"path/to/the/base/model\")\n")
	b.WriteString("model = PeftModel.from_pretrained(base, \"path/to/this/directory\")\n```\n\n")
	b.WriteString("With gym, which evaluates it and the base model on the task's held-out set:\n\n```sh\ngym eval [--model DIR] --checkpoint path/to/this/directory\n```\n")
	return []byte(b.String()), nil
}

// check refuses card text that would break the front matter or the table.
func (c Card) check() error {
	fields := map[string]string{"base model": c.BaseModel, "base SHA3": c.BaseSHA3, "job": c.Job, "weights CID": c.WeightsCID}
	for k, v := range c.Extra {
		fields["extra key "+k] = k
		fields["extra "+k] = v
	}
	for name, v := range fields {
		if strings.ContainsAny(v, "\r\n|`") || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return fmt.Errorf("%w: %s %q holds a control character, | or `", ErrCard, name, v)
		}
	}
	if c.Accuracy != nil && !(*c.Accuracy >= 0 && *c.Accuracy <= 1) {
		return fmt.Errorf("%w: accuracy %v outside [0, 1]", ErrCard, *c.Accuracy)
	}
	if math.IsNaN(c.Quality) || math.IsInf(c.Quality, 0) {
		return fmt.Errorf("%w: quality %v", ErrCard, c.Quality)
	}
	return nil
}

// Write writes a and card as a checkpoint directory, making dir if it is
// missing. Every file is written atomically. A file already in dir with the
// same bytes is left alone (writing the same checkpoint twice succeeds);
// one with different bytes makes Write fail with an error wrapping
// fs.ErrExist before anything is written: a published checkpoint is never
// changed in place.
func Write(dir string, a *llama.Adapter, card Card) error {
	w, err := WeightsBytes(a)
	if err != nil {
		return err
	}
	c, err := ConfigBytes(a, card)
	if err != nil {
		return err
	}
	r, err := CardBytes(card)
	if err != nil {
		return err
	}
	files := []struct {
		name string
		data []byte
	}{{WeightsFile, w}, {ConfigFile, c}, {CardFile, r}}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var todo []int
	for i, f := range files {
		old, err := os.ReadFile(filepath.Join(dir, f.name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			todo = append(todo, i)
		case err != nil:
			return err
		case !bytes.Equal(old, f.data):
			return fmt.Errorf("peft: %s holds a different checkpoint (%s differs): write to a new directory: %w", dir, f.name, fs.ErrExist)
		}
	}
	for _, i := range todo {
		f := files[i]
		if err := atomicfile.WriteBytes(filepath.Join(dir, f.name), 0o644, false, f.data); err != nil {
			return err
		}
	}
	return nil
}

// ParseConfig parses adapter_config.json as llama.ParseAdapterConfig does
// (strictly: what the engine would not compute as PEFT does is refused)
// and reads gym's "zoo_gym" fields, which must be there.
func ParseConfig(b []byte) (Config, error) {
	if len(b) > maxConfigBytes {
		return Config{}, fmt.Errorf("%w: %s is %d bytes, more than %d", ErrFormat, ConfigFile, len(b), maxConfigBytes)
	}
	ac, err := llama.ParseAdapterConfig(b)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	var c struct {
		ZooGym *gymConfig `json:"zoo_gym"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, fmt.Errorf("%w: %s: %v", ErrFormat, ConfigFile, err)
	}
	if c.ZooGym == nil {
		return Config{}, fmt.Errorf("%w: %s: no zoo_gym object: not written by gym", ErrFormat, ConfigFile)
	}
	out := Config{BaseModel: ac.Base, Adapter: ac, BaseSHA3: c.ZooGym.BaseSHA3, Job: c.ZooGym.Job, Epoch: c.ZooGym.Epoch, Extra: c.ZooGym.Extra}
	if out.Extra == nil {
		out.Extra = map[string]string{}
	}
	return out, nil
}

// Read loads the checkpoint in dir for a base model of shape mc
// (llama.ReadAdapter: the tensors exactly those the config implies for
// that shape, finite). README.md is not read.
func Read(dir string, mc llama.Config) (*llama.Adapter, Config, error) {
	cp := filepath.Join(dir, ConfigFile)
	st, err := os.Stat(cp)
	if err != nil {
		return nil, Config{}, fmt.Errorf("peft: %s has no %s: %w", dir, ConfigFile, err)
	}
	if st.Size() > maxConfigBytes {
		return nil, Config{}, fmt.Errorf("%w: %s is %d bytes, more than %d", ErrFormat, cp, st.Size(), maxConfigBytes)
	}
	raw, err := os.ReadFile(cp)
	if err != nil {
		return nil, Config{}, err
	}
	cfg, err := ParseConfig(raw)
	if err != nil {
		return nil, Config{}, err
	}
	wst, err := os.Stat(filepath.Join(dir, WeightsFile))
	if err != nil {
		return nil, Config{}, fmt.Errorf("peft: %s has no %s: %w", dir, WeightsFile, err)
	}
	// The adapter the config describes is allocated before its tensors are
	// read: the file must be large enough to hold it (2 bytes a value at
	// the least, in BF16 or F16), so a config cannot size it alone.
	np, err := cfg.Adapter.Params(mc)
	if err != nil {
		return nil, Config{}, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	params := float64(np)
	if float64(wst.Size()) < 2*params {
		return nil, Config{}, fmt.Errorf("%w: %s: r=%d on %v of this base model is %.0f values, %s has %d bytes",
			ErrFormat, ConfigFile, cfg.Adapter.Rank, cfg.Adapter.Targets, params, WeightsFile, wst.Size())
	}
	a, _, err := llama.ReadAdapter(dir, mc)
	if err != nil {
		return nil, Config{}, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	return a, cfg, nil
}
