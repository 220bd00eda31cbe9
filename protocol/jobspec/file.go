package jobspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/zooai/gym/model/dataset"
	"github.com/zooai/gym/model/reward"
)

// MaxFileBytes bounds a job file: a job file is a short YAML mapping.
const MaxFileBytes = 1 << 20

// File is a parsed, validated and normalised job file.
type File struct {
	Model       string     `json:"model"`
	Dataset     string     `json:"dataset"`
	Epochs      int        `json:"epochs"`
	MinNodes    int        `json:"min_nodes"`
	MaxNodes    int        `json:"max_nodes"`
	MinVRAMMiB  uint64     `json:"min_vram_mib"`
	Aggregation string     `json:"aggregation"`
	Utility     uint64     `json:"utility"`
	Submitter   string     `json:"submitter"`
	Deadline    *time.Time `json:"deadline"` // nil: none
	// The run: steps per epoch (a multiple of gspo.aggregate_interval),
	// prompts each worker samples per step, the seed of data order,
	// sampling and adapter initialisation, the number f of Byzantine
	// workers to tolerate, and the share of deltas the judge replays, in
	// basis points (0: none).
	StepsPerEpoch  int    `json:"steps_per_epoch"`
	PromptsPerStep int    `json:"prompts_per_step"`
	Seed           uint64 `json:"seed"`
	Byzantine      int    `json:"byzantine"`
	SpotCheckBP    int    `json:"spot_check_bp"`
	// Validators is the verdicts per trace check (0: hanzod checks).
	Validators int  `json:"validators"`
	GSPO       GSPO `json:"gspo"`
	// Backend is the training backend workers must use: go, torch or any.
	Backend string `json:"backend"`
	// DType is the type workers must train in: any, float32, bfloat16 or
	// float16.
	DType string `json:"dtype"`
	// Data maps a dataset's rows onto problems (docs/datasets.md).
	Data Data `json:"data"`
	// Reward is the reward list in canonical form ("" for the default).
	Reward Rewards `json:"reward,omitempty"`
	// HasGSPO records whether the file had a gspo section.
	HasGSPO bool `json:"-"`
}

// Spec is the job as hanzod's SubmitJob takes it: every setting given,
// defaults filled in, the file's spot_check_bp 0 ("none") written as -1.
func (j *File) Spec() Spec {
	s := Spec{
		Model: j.Model, Dataset: j.Dataset, Epochs: j.Epochs, MinNodes: j.MinNodes, MaxNodes: j.MaxNodes, MinVRAMMiB: j.MinVRAMMiB,
		Aggregation: j.Aggregation, Utility: j.Utility, Submitter: j.Submitter, GSPO: j.GSPO,
		StepsPerEpoch: j.StepsPerEpoch, PromptsPerStep: j.PromptsPerStep, Seed: j.Seed, Byzantine: j.Byzantine, SpotCheckBP: j.SpotCheckBP,
		Validators: j.Validators, Data: j.Data, Reward: j.Reward,
	}
	if j.Backend != Fields.Backend.Default {
		s.Backend = j.Backend
	}
	if j.DType != Fields.DType.Default {
		s.DType = j.DType
	}
	if j.Deadline != nil {
		s.Deadline = j.Deadline.UnixMilli()
	}
	if s.SpotCheckBP == 0 {
		s.SpotCheckBP = -1
	}
	return s
}

// FileError lists every problem found in a job file.
type FileError struct {
	Name     string   // the file, as messages name it
	Problems []string // "FILE:LINE: key: what is wrong", in line order
}

func (e *FileError) Error() string {
	if len(e.Problems) == 1 {
		return e.Problems[0]
	}
	return fmt.Sprintf("%s has %d problems:\n  %s", e.Name, len(e.Problems), strings.Join(e.Problems, "\n  "))
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// ReadFile reads a job file of at most MaxFileBytes from r and parses it
// with ParseFile.
func ReadFile(name string, r io.Reader, now time.Time, check func(Spec) error) (*File, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes; a job file is a short YAML mapping (docs/job-file.md)", name, MaxFileBytes)
	}
	return ParseFile(name, data, now, check)
}

// ParseFile parses a job file (docs/job-file.md) named name (for
// messages): every key is checked against Fields, every problem reported
// with its line (a *FileError), defaults filled in; a relative deadline
// counts from now. check (optional) is a model's own rules: given the spec
// the file makes, a refusal is reported on the model line.
func ParseFile(name string, data []byte, now time.Time, check func(Spec) error) (*File, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty; a job file needs at least model, dataset, epochs and min_nodes (see examples/job.yaml)", name)
		}
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			return nil, fmt.Errorf("%s:%s: not valid YAML: %s", name, m[1], m[2])
		}
		return nil, fmt.Errorf("%s: not valid YAML: %s", name, msg)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			line = doc.Line
		}
		return nil, fmt.Errorf("%s:%d: a job file holds one YAML document; remove the second one (after ---)", name, line)
	}
	if len(doc.Content) == 0 || doc.Content[0].Tag == "!!null" {
		return nil, fmt.Errorf("%s: empty; a job file needs at least model, dataset, epochs and min_nodes (see examples/job.yaml)", name)
	}
	p := &jobParser{name: name}
	f := &Fields
	j := &File{GSPO: DefaultGSPO()}
	root := resolve(doc.Content[0])
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: a job file is a mapping of keys to values (model: ..., dataset: ...), not a %s", name, root.Line, kindName(root))
	}
	var deadline *yaml.Node
	top := []jobKey{
		{"model", true, func(n *yaml.Node) { j.Model = p.text(n, f.Model) }},
		{"dataset", true, func(n *yaml.Node) { j.Dataset = p.text(n, f.Dataset) }},
		{"epochs", true, func(n *yaml.Node) { j.Epochs = int(p.whole(n, f.Epochs)) }},
		{"min_nodes", true, func(n *yaml.Node) { j.MinNodes = int(p.whole(n, f.MinNodes)) }},
		{"max_nodes", false, func(n *yaml.Node) { j.MaxNodes = int(p.whole(n, f.MaxNodes)) }},
		{"min_vram_mib", false, func(n *yaml.Node) { j.MinVRAMMiB = uint64(p.whole(n, f.MinVRAMMiB)) }},
		{"aggregation", false, func(n *yaml.Node) { j.Aggregation = p.oneOf(n, f.Aggregation) }},
		{"backend", false, func(n *yaml.Node) { j.Backend = p.oneOf(n, f.Backend) }},
		{"dtype", false, func(n *yaml.Node) { j.DType = p.oneOf(n, f.DType) }},
		{"utility", false, func(n *yaml.Node) { j.Utility = uint64(p.whole(n, f.Utility)) }},
		{"submitter", false, func(n *yaml.Node) {
			j.Submitter = p.str(n, "submitter")
			if len(j.Submitter) > f.Submitter.MaxLen {
				p.errorf(n, "submitter: %d bytes, at most %d (%s)", len(j.Submitter), f.Submitter.MaxLen, f.Submitter.Hint)
			}
		}},
		{"deadline", false, func(n *yaml.Node) { deadline = n }},
		{"steps_per_epoch", false, func(n *yaml.Node) { j.StepsPerEpoch = int(p.whole(n, f.StepsPerEpoch)) }},
		{"prompts_per_step", false, func(n *yaml.Node) { j.PromptsPerStep = int(p.whole(n, f.PromptsPerStep)) }},
		{"seed", false, func(n *yaml.Node) { j.Seed = p.unsigned(n, "seed") }},
		{"byzantine", false, func(n *yaml.Node) { j.Byzantine = int(p.whole(n, f.Byzantine)) }},
		{"spot_check_bp", false, func(n *yaml.Node) { j.SpotCheckBP = int(p.whole(n, f.SpotCheckBP)) }},
		{"validators", false, func(n *yaml.Node) {
			j.Validators = int(p.whole(n, f.Validators))
			if j.Validators == 1 {
				p.errorf(n, "validators: 1; a check needs 0 (hanzod checks) or 2..%d verdicts (two that disagree go to a third)", f.Validators.Max)
			}
		}},
		{"gspo", false, func(n *yaml.Node) { j.HasGSPO = true; p.gspo(n, &j.GSPO) }},
		{"data", false, func(n *yaml.Node) { p.data(n, &j.Data) }},
		{"reward", false, func(n *yaml.Node) { j.Reward = p.reward(n) }},
	}
	p.mapping(root, "", top)
	if deadline != nil {
		j.Deadline = p.deadline(deadline, now)
	}
	p.run(j)
	if j.Aggregation == "" {
		j.Aggregation = f.Aggregation.Default
	}
	if j.Backend == "" {
		j.Backend = f.Backend.Default
	}
	if j.DType == "" {
		j.DType = f.DType.Default
	}
	if j.Utility == 0 {
		j.Utility = uint64(f.Utility.Default)
	}
	if j.MaxNodes == 0 {
		j.MaxNodes = j.MinNodes
	} else if j.MinNodes != 0 && j.MaxNodes < j.MinNodes {
		p.errorf(p.seen["max_nodes"], "max_nodes: %d is below min_nodes %d; raise it or leave it out", j.MaxNodes, j.MinNodes)
	}
	p.checkData(j)
	if err := p.err(); err != nil {
		return nil, err
	}
	// The rules that relate settings to each other, as hanzod applies
	// them (Spec.Normalise): a file breaking one would be refused on
	// submission, so it is refused here, at its section's line.
	s := j.Spec()
	if err := s.Normalise(); err != nil {
		at := root
		if n := p.seen["gspo"]; n != nil && strings.HasPrefix(err.Error(), "gspo.") {
			at = n
		}
		p.errorf(at, "%v", err)
		return nil, p.err()
	}
	if check != nil {
		if err := check(j.Spec()); err != nil {
			p.errorf(p.seen["model"], "model: %s: %v", j.Model, err)
			return nil, p.err()
		}
	}
	return j, nil
}

// run checks the run settings against each other and the rest of the file
// (the rules hanzod applies) and fills in their defaults.
func (p *jobParser) run(j *File) {
	if n := p.seen["byzantine"]; n != nil && j.Byzantine > 0 {
		if j.Aggregation == "mean" {
			p.errorf(n, "byzantine: %d needs aggregation median or trimmed-mean (a mean cannot defend against any Byzantine worker); change aggregation on line %d",
				j.Byzantine, p.seen["aggregation"].Line)
		}
		if j.MinNodes != 0 && 3*j.Byzantine >= j.MinNodes {
			p.errorf(n, "byzantine: %d needs min_nodes above %d (f < n/3), min_nodes is %d; raise min_nodes or declare fewer", j.Byzantine, 3*j.Byzantine, j.MinNodes)
		}
		if j.Aggregation == "" {
			j.Aggregation = "median" // the robust rule a mean would otherwise refuse
		}
	}
	if n := p.seen["steps_per_epoch"]; n == nil {
		j.StepsPerEpoch = j.GSPO.AggregateInterval // one sync per epoch
	} else if iv := j.GSPO.AggregateInterval; j.StepsPerEpoch > 0 && iv > 0 && j.StepsPerEpoch%iv != 0 {
		lo := j.StepsPerEpoch / iv * iv
		hint := fmt.Sprintf("make it %d", lo+iv)
		if lo > 0 {
			hint = fmt.Sprintf("make it %d or %d", lo, lo+iv)
		}
		p.errorf(n, "steps_per_epoch: %d is not a multiple of gspo.aggregate_interval %d (an epoch is whole syncs); %s", j.StepsPerEpoch, iv, hint)
	}
	if p.seen["prompts_per_step"] == nil {
		j.PromptsPerStep = int(Fields.PromptsPerStep.Default)
	}
	if p.seen["spot_check_bp"] == nil {
		j.SpotCheckBP = int(Fields.SpotCheckBP.Default)
	}
}

type jobKey struct {
	key      string
	required bool
	set      func(*yaml.Node)
}

type jobParser struct {
	name     string
	problems []problem
	seen     map[string]*yaml.Node // top-level keys, for cross-field messages
}

type problem struct {
	line int
	msg  string
}

const maxProblems = 20

func (p *jobParser) errorf(n *yaml.Node, format string, args ...any) {
	p.problems = append(p.problems, problem{n.Line, fmt.Sprintf("%s:%d: %s", p.name, n.Line, fmt.Sprintf(format, args...))})
}

// err lists the problems in line order.
func (p *jobParser) err() error {
	if len(p.problems) == 0 {
		return nil
	}
	sort.SliceStable(p.problems, func(a, b int) bool { return p.problems[a].line < p.problems[b].line })
	e := &FileError{Name: p.name}
	for i, pr := range p.problems {
		if i == maxProblems {
			e.Problems = append(e.Problems, fmt.Sprintf("... and %d more", len(p.problems)-i))
			break
		}
		e.Problems = append(e.Problems, pr.msg)
	}
	return e
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "empty value"
		}
		return fmt.Sprintf("value %q", n.Value)
	}
	return "YAML node"
}

// resolve follows an alias (*name) to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// mapping walks a mapping's keys: unknown and repeated keys are refused,
// missing required ones reported. prefix names the section in messages.
func (p *jobParser) mapping(m *yaml.Node, prefix string, keys []jobKey) {
	known := make([]string, len(keys))
	for i, k := range keys {
		known[i] = k.key
	}
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		kn, vn := m.Content[i], resolve(m.Content[i+1])
		if kn.Kind != yaml.ScalarNode {
			p.errorf(kn, "keys are plain words (e.g. %smodel), not a %s", prefix, kindName(kn))
			continue
		}
		key := kn.Value
		if key == "<<" {
			p.errorf(kn, "merge keys (<<) are not supported; write the keys out")
			continue
		}
		if prev, dup := seen[key]; dup {
			p.errorf(kn, "%s%s is given twice (first on line %d); keep one", prefix, key, prev.Line)
			continue
		}
		var k *jobKey
		for i := range keys {
			if keys[i].key == key {
				k = &keys[i]
			}
		}
		if k == nil {
			msg := fmt.Sprintf("unknown key %q", prefix+key)
			if s := closest(key, known); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", prefix+s)
			}
			where := "known keys"
			if prefix != "" {
				where = "known keys in " + strings.TrimSuffix(prefix, ".")
			}
			p.errorf(kn, "%s; %s: %s", msg, where, strings.Join(known, ", "))
			continue
		}
		seen[key] = kn
		k.set(vn)
	}
	if prefix == "" {
		p.seen = seen
	}
	for _, k := range keys {
		if _, ok := seen[k.key]; k.required && !ok {
			p.errorf(m, "%s%s is missing (required; see docs/job-file.md)", prefix, k.key)
		}
	}
}

// closest returns the known key nearest to key when it is plausibly a
// typo (two edits or fewer) or a shortened form (min_vram for min_vram_mib).
func closest(key string, known []string) string {
	key = strings.ToLower(key)
	best, bestD := "", 3
	for _, k := range known {
		d := editDistance(key, k)
		if d >= bestD && len(key) >= 3 && (strings.HasPrefix(k, key) || strings.HasPrefix(key, k)) {
			d = 2
		}
		if d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func (p *jobParser) scalar(n *yaml.Node, key, want string) bool {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.errorf(n, "%s: want %s, got %s", key, want, kindName(n))
		return false
	}
	return true
}

func (p *jobParser) str(n *yaml.Node, key string) string {
	if !p.scalar(n, key, "a string") {
		return ""
	}
	return n.Value
}

// text reads model or dataset: a non-empty string of bounded length.
func (p *jobParser) text(n *yaml.Node, t Text) string {
	key, what := t.Key, t.Hint
	s := p.str(n, key)
	switch {
	case n.Kind != yaml.ScalarNode || n.Tag == "!!null":
	case strings.TrimSpace(s) == "":
		p.errorf(n, "%s is empty; give %s", key, what)
	case len(s) > t.MaxLen:
		p.errorf(n, "%s: %d bytes, at most %d", key, len(s), t.MaxLen)
	case strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		p.errorf(n, "%s contains a control character; give %s", key, what)
	}
	return s
}

// whole reads a whole number in w's range.
func (p *jobParser) whole(n *yaml.Node, w Whole) int64 {
	return p.integer(n, w.Key, w.Min, w.Max, w.Hint)
}

// real reads a real number in r's range into dst.
func (p *jobParser) real(n *yaml.Node, dst *float64, r Real) {
	v, ok := p.number(n, r.Key)
	if !ok {
		return
	}
	if !r.Contains(v) {
		var what string
		switch {
		case math.IsInf(r.Max, 1) && r.MinOpen:
			what = fmt.Sprintf("must be above %v", r.Min)
		case math.IsInf(r.Max, 1) && r.Min == 0:
			what = "is negative"
		default:
			what = "is outside " + r.Range()
		}
		p.errorf(n, "%s: %s %s (%s)", r.Key, n.Value, what, r.Hint)
		return
	}
	*dst = v
}

func (p *jobParser) integer(n *yaml.Node, key string, lo, hi int64, hint string) int64 {
	if !p.scalar(n, key, "a whole number") {
		return 0
	}
	var v int64
	if n.Tag != "!!int" || n.Decode(&v) != nil {
		if f, err := strconv.ParseFloat(n.Value, 64); err == nil && n.Tag == "!!float" && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			v = int64(f) // 1e3 is a whole number written as a float
		} else {
			hint := ""
			if _, err := strconv.ParseInt(n.Value, 10, 64); err == nil && n.Tag == "!!str" {
				hint = " (remove the quotes)"
			}
			p.errorf(n, "%s: want a whole number, got %q%s", key, n.Value, hint)
			return 0
		}
	}
	if v < lo || v > hi {
		p.errorf(n, "%s: %d is outside %d..%d (%s)", key, v, lo, hi, hint)
		return 0
	}
	return v
}

// unsigned reads a whole number in 0..2⁶⁴−1.
func (p *jobParser) unsigned(n *yaml.Node, key string) uint64 {
	if !p.scalar(n, key, "a whole number") {
		return 0
	}
	var v uint64
	if n.Tag != "!!int" || n.Decode(&v) != nil {
		if f, err := strconv.ParseFloat(n.Value, 64); err == nil && n.Tag == "!!float" && f == math.Trunc(f) && f >= 0 && f < 1<<53 {
			return uint64(f)
		}
		hint := ""
		switch _, err := strconv.ParseUint(n.Value, 10, 64); {
		case err == nil && n.Tag == "!!str":
			hint = " (remove the quotes)"
		case strings.HasPrefix(n.Value, "-"):
			hint = " (it is 0 or more)"
		}
		p.errorf(n, "%s: want a whole number from 0 to %d, got %q%s", key, uint64(math.MaxUint64), n.Value, hint)
		return 0
	}
	return v
}

func (p *jobParser) number(n *yaml.Node, key string) (float64, bool) {
	if !p.scalar(n, key, "a number") {
		return 0, false
	}
	var v float64
	if (n.Tag != "!!float" && n.Tag != "!!int") || n.Decode(&v) != nil {
		p.errorf(n, "%s: want a number, got %q", key, n.Value)
		return 0, false
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		p.errorf(n, "%s: want a finite number, got %s", key, n.Value)
		return 0, false
	}
	return v, true
}

func (p *jobParser) boolean(n *yaml.Node, key string) bool {
	if !p.scalar(n, key, "true or false") {
		return false
	}
	var v bool
	if n.Tag != "!!bool" || n.Decode(&v) != nil {
		p.errorf(n, "%s: want true or false, got %q", key, n.Value)
	}
	return v
}

func (p *jobParser) oneOf(n *yaml.Node, c Choice) string {
	key, choices := c.Key, c.Values
	s := p.str(n, key)
	for _, c := range choices {
		if s == c {
			return s
		}
	}
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		p.errorf(n, "%s: %q is not one of %s", key, s, strings.Join(choices, ", "))
	}
	return ""
}

// modules reads a list of LoRA target modules ([q_proj, v_proj]) or the
// word for all of them, in canonical form.
func (p *jobParser) modules(n *yaml.Node, m Modules) string {
	var names []string
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!str":
		names = []string{n.Value}
	case n.Kind == yaml.SequenceNode:
		for _, c := range n.Content {
			if !p.scalar(c, m.Key, "a module name") {
				return ""
			}
			names = append(names, c.Value)
		}
	default:
		p.errorf(n, "%s: want a list of module names or %s, got %s", m.Key, m.All, kindName(n))
		return ""
	}
	t, err := m.Canonical(names)
	if err != nil {
		p.errorf(n, "%s", err)
	}
	return canonicalTargets(t)
}

// deadline reads an RFC 3339 time or a duration from now (Go syntax, plus
// whole days: 36h, 90m, 7d).
func (p *jobParser) deadline(n *yaml.Node, now time.Time) *time.Time {
	const hint = "give an RFC 3339 time such as 2026-12-31T18:00:00Z, or a duration from submission such as 72h or 7d"
	s := strings.TrimSpace(p.str(n, "deadline"))
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return nil
	}
	var t time.Time
	if d, err := parseDays(s); err == nil {
		if d <= 0 {
			p.errorf(n, "deadline: %s is not in the future; %s", s, hint)
			return nil
		}
		t = now.Add(d)
	} else if t, err = time.Parse(time.RFC3339Nano, s); err != nil {
		p.errorf(n, "deadline: cannot read %q; %s", s, hint)
		return nil
	} else if !t.After(now) {
		p.errorf(n, "deadline: %s is already past; %s", s, hint)
		return nil
	}
	t = t.UTC().Truncate(time.Millisecond)
	return &t
}

// parseDays is time.ParseDuration plus a whole-day form "Nd".
func parseDays(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(d, 10, 32)
		if err != nil || n > 100*365 {
			return 0, fmt.Errorf("bad day count %q", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// gspo reads the gspo section.
func (p *jobParser) gspo(n *yaml.Node, g *GSPO) {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "gspo: want a mapping of GSPO settings (importance_sampling_level: sequence, ...), got %s", kindName(n))
		return
	}
	f := &Fields
	p.mapping(n, "gspo.", []jobKey{
		{"importance_sampling_level", false, func(n *yaml.Node) {
			if v := p.oneOf(n, f.ImportanceSamplingLevel); v != "" {
				g.ImportanceSamplingLevel = v
			}
		}},
		{"beta", false, func(n *yaml.Node) { p.real(n, &g.Beta, f.Beta) }},
		{"group_size", false, func(n *yaml.Node) { g.GroupSize = int(p.whole(n, f.GroupSize)) }},
		{"aggregate_interval", false, func(n *yaml.Node) { g.AggregateInterval = int(p.whole(n, f.AggregateInterval)) }},
		{"use_4bit", false, func(n *yaml.Node) { g.Use4Bit = p.boolean(n, f.Use4Bit.Key) }},
		{"lora_rank", false, func(n *yaml.Node) { g.LoRARank = int(p.whole(n, f.LoRARank)) }},
		{"lora_alpha", false, func(n *yaml.Node) { p.real(n, &g.LoRAAlpha, f.LoRAAlpha) }},
		{"max_seq_len", false, func(n *yaml.Node) { g.MaxSeqLen = int(p.whole(n, f.MaxSeqLen)) }},
		{"gradient_accumulation_steps", false, func(n *yaml.Node) { g.GradientAccumulationSteps = int(p.whole(n, f.GradientAccumulationSteps)) }},
		{"learning_rate", false, func(n *yaml.Node) { p.real(n, &g.LearningRate, f.LearningRate) }},
		{"warmup_steps", false, func(n *yaml.Node) { g.WarmupSteps = int(p.whole(n, f.WarmupSteps)) }},
		{"weight_decay", false, func(n *yaml.Node) { p.real(n, &g.WeightDecay, f.WeightDecay) }},
		{"lora_target_modules", false, func(n *yaml.Node) { g.LoRATargets = p.modules(n, f.LoRATargetModules) }},
		{"outer_learning_rate", false, func(n *yaml.Node) { p.real(n, &g.OuterLR, f.OuterLR) }},
		{"outer_momentum", false, func(n *yaml.Node) { p.real(n, &g.OuterMomentum, f.OuterMomentum) }},
		{"max_grad_norm", false, func(n *yaml.Node) { p.real(n, &g.MaxGradNorm, f.MaxGradNorm) }},
		{"num_iterations", false, func(n *yaml.Node) {
			if v := p.whole(n, f.NumIterations); v != f.NumIterations.Default { // the default is stored as 0
				g.NumIterations = int(v)
			}
		}},
		// The defaults' names are stored as "", their one encoding.
		{"inner_optimizer", false, func(n *yaml.Node) {
			if v := p.oneOf(n, f.InnerOptimizer); v != f.InnerOptimizer.Default {
				g.InnerOptimizer = v
			}
		}},
		{"outer_optimizer", false, func(n *yaml.Node) {
			if v := p.oneOf(n, f.OuterOptimizer); v != f.OuterOptimizer.Default {
				g.OuterOptimizer = v
			}
		}},
	})
}

// MarshalJSON writes the deadline as RFC 3339 (or null).
func (j File) MarshalJSON() ([]byte, error) {
	type plain File
	out := struct {
		plain
		Deadline *string `json:"deadline"`
	}{plain: plain(j)}
	if j.Deadline != nil {
		s := j.Deadline.UTC().Format(time.RFC3339Nano)
		out.Deadline = &s
	}
	return json.Marshal(out)
}

// data reads the data section: the mapping of a dataset's rows.
func (p *jobParser) data(n *yaml.Node, d *Data) {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "data: want a mapping (answer: FIELD, template: \"^{question}=\", held_out: test, ...), got %s", kindName(n))
		return
	}
	str := func(dst *string, key string) func(*yaml.Node) {
		return func(n *yaml.Node) {
			*dst = p.str(n, "data."+key)
			if len(*dst) > dataset.MaxTemplateBytes {
				p.errorf(n, "data.%s: %d bytes, at most %d", key, len(*dst), dataset.MaxTemplateBytes)
			}
		}
	}
	p.mapping(n, "data.", []jobKey{
		{"prompt", false, str(&d.Prompt, "prompt")},
		{"template", false, str(&d.Template, "template")},
		{"answer", true, str(&d.Answer, "answer")},
		{"extract", false, str(&d.Extract, "extract")},
		{"split", false, str(&d.Split, "split")},
		{"held_out", false, str(&d.HeldOut, "held_out")},
		{"hold_out_bp", false, func(n *yaml.Node) {
			d.HoldOutBP = int(p.integer(n, "data.hold_out_bp", 1, 5000, "basis points of the training split held out: 1000 is 10%"))
		}},
	})
	if err := d.Config().Validate(); err != nil && len(p.problems) == 0 {
		p.errorf(n, "data: %s", trimPrefix(err, dataset.ErrConfig))
	}
}

// reward reads the reward list: [{verifier: numeric, weight: 1}, ...].
func (p *jobParser) reward(n *yaml.Node) Rewards {
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, "reward: want a list of verifiers ([{verifier: numeric, weight: 1}, ...]), got %s", kindName(n))
		return ""
	}
	if len(n.Content) > reward.MaxTerms {
		p.errorf(n, "reward: %d verifiers, at most %d", len(n.Content), reward.MaxTerms)
		return ""
	}
	terms := make([]reward.Term, len(n.Content))
	before := len(p.problems)
	for i, c := range n.Content {
		c = resolve(c)
		if c.Kind != yaml.MappingNode {
			p.errorf(c, "reward[%d]: want a mapping (verifier: numeric, weight: 1), got %s", i, kindName(c))
			continue
		}
		t := &terms[i]
		pre := fmt.Sprintf("reward[%d].", i)
		p.mapping(c, pre, []jobKey{
			{"verifier", true, func(n *yaml.Node) { t.Verifier = p.str(n, pre+"verifier") }},
			{"weight", true, func(n *yaml.Node) { t.Weight, _ = p.number(n, pre+"weight") }},
			{"pattern", false, func(n *yaml.Node) { t.Pattern = p.str(n, pre+"pattern") }},
			{"tolerance", false, func(n *yaml.Node) { t.Tolerance, _ = p.number(n, pre+"tolerance") }},
			{"max_chars", false, func(n *yaml.Node) {
				t.MaxChars = int(p.integer(n, pre+"max_chars", 1, reward.MaxChars, "characters before the length penalty starts"))
			}},
			{"url", false, func(n *yaml.Node) { t.URL = p.str(n, pre+"url") }},
		})
		if len(p.problems) == before {
			if _, err := reward.New([]reward.Term{*t}); err != nil {
				p.errorf(c, "reward[%d]: %s", i, strings.TrimPrefix(trimPrefix(err, reward.ErrInvalid), "reward[0] ("+t.Verifier+"): "))
			}
		}
	}
	if len(p.problems) > before {
		return ""
	}
	r, err := NewRewards(terms)
	if err != nil {
		p.errorf(n, "reward: %s", trimPrefix(err, reward.ErrInvalid))
	}
	return r
}

// checkData relates the dataset to its mapping (the rules Normalise
// applies), reported on the dataset line.
func (p *jobParser) checkData(j *File) {
	dn := p.seen["dataset"]
	if dn == nil || j.Dataset == "" {
		return
	}
	// Another name (a Hub id, say) is hanzod's to accept and the
	// workers' to refuse, as for model.
	_, byCID, _ := DatasetCID(j.Dataset)
	switch {
	case byCID && p.seen["data"] == nil:
		p.errorf(dn, "dataset: %s needs a data section: the answer field, a prompt field or template, and held_out or hold_out_bp (docs/datasets.md)", j.Dataset)
	case !byCID && p.seen["data"] != nil:
		p.errorf(p.seen["data"], "data: a mapping is for a dataset named by CID; %s is a built-in task", j.Dataset)
	}
}
