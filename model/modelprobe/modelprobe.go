// Package modelprobe shows what the Go engine computes for a prompt: the
// next-token distribution's top K (ids, text, logits) of a Hugging Face
// base model, with or without a PEFT LoRA adapter, and — the check a user
// runs before trusting a new checkpoint — the largest difference between
// the engine's logits and transformers' (PeftModel's) on the same token
// ids, computed by a Python with transformers. `gym model logits` is its
// command.
//
// Run is pure Go: it reads the directory (basemodel.Open), encodes the
// prompt with the model's tokenizer.json (special tokens added as the
// tokenizer's post-processor adds them, as transformers' tokenizer does by
// default) and runs the engine over every position. Compare hands the
// same ids to compare.py (embedded), which loads the directory with
// AutoModelForCausalLM in float32, and compares every position's logits.
package modelprobe

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/zooai/gym/model/basemodel"
	"github.com/zooai/gym/model/llama"
)

//go:embed compare.py
var compareScript []byte

// ErrInput reports arguments Run refuses: an empty prompt, one that
// encodes to no tokens or to more than the model's context, K < 1.
var ErrInput = errors.New("modelprobe: bad input")

// Options say what to run.
type Options struct {
	Model   string // a Hugging Face model directory (config.json, weights, tokenizer.json)
	Adapter string // a PEFT adapter directory; "" for the base alone
	Prompt  string
	TopK    int
	Threads int
}

// Token is one entry of the top K.
type Token struct {
	ID    int     `json:"id"`
	Text  string  `json:"text"`
	Logit float32 `json:"logit"`
	Prob  float64 `json:"prob"` // softmax probability at the last position
}

// Report is what Run found, and Compare adds to.
type Report struct {
	Model        string   `json:"model"`
	Architecture string   `json:"architecture"`
	Layers       int      `json:"layers"`
	SparseLayers int      `json:"sparse_layers"`     // Mixture-of-Experts layers
	Experts      int      `json:"experts,omitempty"` // per sparse layer
	TopExperts   int      `json:"experts_per_token,omitempty"`
	Adapter      string   `json:"adapter,omitempty"`
	Targets      []string `json:"adapter_targets,omitempty"`
	Prompt       string   `json:"prompt"`
	IDs          []int    `json:"ids"`
	Top          []Token  `json:"top"`
	// Routes are, per sparse layer, the experts the last position was
	// routed to (largest probability first).
	Routes map[int][]int `json:"routes,omitempty"`
	// Compare is set by Compare.
	Compare *Comparison `json:"transformers,omitempty"`

	logits []float32 // [T, Vocab]
	vocab  int
}

// Comparison is the engine against transformers on the same ids.
type Comparison struct {
	Python       string  `json:"python"`
	Transformers string  `json:"transformers_version"`
	Torch        string  `json:"torch_version"`
	PEFT         string  `json:"peft_version,omitempty"`
	Architecture string  `json:"architecture"`
	Positions    int     `json:"positions"`
	MaxAbsDiff   float64 `json:"max_abs_diff"`  // over every position and vocabulary entry
	MaxAbsLogit  float64 `json:"max_abs_logit"` // transformers', for scale
	WorstPos     int     `json:"worst_position"`
	WorstID      int     `json:"worst_id"`
	TopSame      bool    `json:"top_k_same"` // the same ids, in the same order, at the last position
	TheirTop     []int   `json:"their_top_ids"`
}

// Run loads the model (and adapter), encodes the prompt and returns the
// last position's top K with every position's logits kept for Compare.
func Run(o Options) (*Report, error) {
	if o.TopK < 1 {
		return nil, fmt.Errorf("%w: top K %d < 1", ErrInput, o.TopK)
	}
	if o.Prompt == "" {
		return nil, fmt.Errorf("%w: empty prompt", ErrInput)
	}
	b, err := basemodel.Open(o.Model)
	if err != nil {
		return nil, err
	}
	c := b.Weights.Cfg
	r := &Report{Model: o.Model, Architecture: string(c.Arch), Layers: c.Layers, Prompt: o.Prompt, vocab: c.Vocab}
	for l := range c.Layers {
		if c.Sparse(l) {
			r.SparseLayers++
		}
	}
	if r.SparseLayers > 0 {
		r.Experts, r.TopExperts = c.MoE.Experts, c.MoE.TopK
	}
	var a *llama.Adapter
	if o.Adapter != "" {
		if a, _, err = llama.ReadAdapter(o.Adapter, c); err != nil {
			return nil, fmt.Errorf("modelprobe: adapter %s: %w", o.Adapter, err)
		}
		r.Adapter = o.Adapter
		for _, m := range a.Targets {
			r.Targets = append(r.Targets, m.String())
		}
	}
	ids, err := b.Tokenizer.Encode(o.Prompt, true)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInput, err)
	}
	if len(ids) == 0 || len(ids) > c.MaxPositions {
		return nil, fmt.Errorf("%w: the prompt is %d tokens (context %d)", ErrInput, len(ids), c.MaxPositions)
	}
	r.IDs = ids
	md, err := llama.New(b.Weights, a, max(1, o.Threads))
	if err != nil {
		return nil, err
	}
	act, err := md.Forward(ids, 1, len(ids))
	if err != nil {
		return nil, err
	}
	r.logits = act.Logits
	T := len(ids)
	for l := range c.Layers {
		if rt := act.Routes(l); rt != nil {
			if r.Routes == nil {
				r.Routes = map[int][]int{}
			}
			K := c.MoE.TopK
			r.Routes[l] = rt[(T-1)*K : T*K]
		}
	}
	last := r.logits[(T-1)*c.Vocab : T*c.Vocab]
	lp := make([]float32, c.Vocab)
	llama.LogSoftmax(lp, last)
	for _, id := range topK(last, o.TopK) {
		text, err := b.Tokenizer.Decode([]int{id}, false)
		if err != nil {
			text = ""
		}
		r.Top = append(r.Top, Token{ID: id, Text: text, Logit: last[id], Prob: math.Exp(float64(lp[id]))})
	}
	return r, nil
}

// topK returns the indices of the k largest values, largest first (ties:
// the lower index first).
func topK(x []float32, k int) []int {
	idx := make([]int, len(x))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return x[idx[a]] > x[idx[b]] })
	return idx[:min(k, len(idx))]
}

// Compare runs transformers (and PEFT when the report has an adapter)
// with python on the report's ids and records the largest difference from
// the engine's logits over every position.
func Compare(ctx context.Context, python string, r *Report) error {
	tmp, err := os.MkdirTemp("", "gym-modelprobe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	script := filepath.Join(tmp, "compare.py")
	if err := os.WriteFile(script, compareScript, 0o600); err != nil {
		return err
	}
	model, err := filepath.Abs(r.Model)
	if err != nil {
		return err
	}
	adapter := ""
	if r.Adapter != "" {
		if adapter, err = filepath.Abs(r.Adapter); err != nil {
			return err
		}
	}
	idsJSON, _ := json.Marshal(r.IDs)
	out := filepath.Join(tmp, "logits.f32")
	cmd := exec.CommandContext(ctx, python, script, model, adapter, string(idsJSON), out)
	cmd.Dir = tmp // keep the working directory's packages off Python's path
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("modelprobe: %s %s: %v\n%s", python, "compare.py", err, tail(stderr.String(), 2000))
	}
	var info struct {
		Transformers, Torch, Architecture string
		PEFT                              *string `json:"peft"`
		Shape                             []int
	}
	if err := json.Unmarshal(lastLine(stdout.Bytes()), &info); err != nil {
		return fmt.Errorf("modelprobe: compare.py printed %q: %v", tail(stdout.String(), 500), err)
	}
	T := len(r.IDs)
	if len(info.Shape) != 2 || info.Shape[0] != T || info.Shape[1] != r.vocab {
		return fmt.Errorf("modelprobe: transformers' logits have shape %v, the engine's [%d %d]", info.Shape, T, r.vocab)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	if len(raw) != 4*T*r.vocab {
		return fmt.Errorf("modelprobe: %d bytes of transformers' logits, want %d", len(raw), 4*T*r.vocab)
	}
	theirs := make([]float32, T*r.vocab)
	if err := binary.Read(bytes.NewReader(raw), binary.LittleEndian, theirs); err != nil && err != io.EOF {
		return err
	}
	cmp := &Comparison{Python: python, Transformers: info.Transformers, Torch: info.Torch, Architecture: info.Architecture}
	if info.PEFT != nil {
		cmp.PEFT = *info.PEFT
	}
	if err := r.compareLogits(cmp, theirs); err != nil {
		return err
	}
	r.Compare = cmp
	return nil
}

// compareLogits fills cmp's figures from transformers' logits [T, Vocab].
func (r *Report) compareLogits(cmp *Comparison, theirs []float32) error {
	T := len(r.IDs)
	if len(theirs) != len(r.logits) || len(theirs) != T*r.vocab {
		return fmt.Errorf("modelprobe: %d logits from transformers, the engine has %d", len(theirs), len(r.logits))
	}
	cmp.Positions = T
	for i, v := range theirs {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("modelprobe: transformers' logit %d is %v", i, v)
		}
		d := math.Abs(float64(v) - float64(r.logits[i]))
		if d > cmp.MaxAbsDiff || i == 0 {
			cmp.MaxAbsDiff, cmp.WorstPos, cmp.WorstID = d, i/r.vocab, i%r.vocab
		}
		cmp.MaxAbsLogit = max(cmp.MaxAbsLogit, math.Abs(float64(v)))
	}
	cmp.TheirTop = topK(theirs[(T-1)*r.vocab:], len(r.Top))
	cmp.TopSame = true
	for i, t := range r.Top {
		cmp.TopSame = cmp.TopSame && cmp.TheirTop[i] == t.ID
	}
	return nil
}

// WriteText writes the report for people.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "model %s: %s, %d layers", r.Model, r.Architecture, r.Layers)
	if r.SparseLayers > 0 {
		fmt.Fprintf(w, " (%d sparse: %d experts, %d per token)", r.SparseLayers, r.Experts, r.TopExperts)
	}
	fmt.Fprintln(w)
	if r.Adapter != "" {
		fmt.Fprintf(w, "adapter %s: LoRA on %s\n", r.Adapter, strings.Join(r.Targets, " "))
	}
	fmt.Fprintf(w, "prompt: %d tokens %v\n", len(r.IDs), r.IDs)
	fmt.Fprintf(w, "next token after position %d, top %d:\n", len(r.IDs)-1, len(r.Top))
	fmt.Fprintf(w, "  %4s  %8s  %12s  %8s  %s\n", "rank", "id", "logit", "prob", "text")
	for i, t := range r.Top {
		fmt.Fprintf(w, "  %4d  %8d  %12.6f  %8.5f  %q\n", i+1, t.ID, t.Logit, t.Prob, t.Text)
	}
	if len(r.Routes) > 0 {
		ls := make([]int, 0, len(r.Routes))
		for l := range r.Routes {
			ls = append(ls, l)
		}
		sort.Ints(ls)
		fmt.Fprintf(w, "experts of the last position:")
		for _, l := range ls {
			fmt.Fprintf(w, " layer %d %v", l, r.Routes[l])
		}
		fmt.Fprintln(w)
	}
	if c := r.Compare; c != nil {
		peft := ""
		if c.PEFT != "" {
			peft = ", peft " + c.PEFT
		}
		fmt.Fprintf(w, "transformers %s (torch %s%s, %s): max |Δlogit| = %.3g over %d positions × %d ids (position %d, id %d; max |logit| %.3g); top %d the same: %v\n",
			c.Transformers, c.Torch, peft, c.Architecture, c.MaxAbsDiff, c.Positions, r.vocab, c.WorstPos, c.WorstID, c.MaxAbsLogit, len(r.Top), c.TopSame)
		if !c.TopSame {
			fmt.Fprintf(w, "  transformers' top %d: %v\n", len(c.TheirTop), c.TheirTop)
		}
	}
}

func lastLine(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
