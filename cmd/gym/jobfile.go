package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	pb "github.com/zooai/gym/api/hanzod/v1"
	"github.com/zooai/gym/jobconf"
	"github.com/zooai/gym/jobspec"
	"github.com/zooai/gym/trainer"
)

// A job file (docs/job-file.md) is one YAML mapping. Its limits mirror the
// ones hanzod enforces, so a mistake is reported with its line before
// anything is sent; hanzod still checks everything itself.
const (
	maxJobFileBytes = 1 << 20
	maxJobName      = 256     // model, dataset
	maxJobEpochs    = 100_000 // hanzod's limit
	minJobNodes     = 3       // a ring continues only with at least 3 nodes
	maxJobNodes     = 4096
	maxJobVRAMMiB   = 1 << 24 // 16 TiB
	maxJobUtility   = 1_000_000
	maxSubmitter    = 128
	maxJobSteps     = 1_000_000 // steps_per_epoch, hanzod's limit
	maxJobPrompts   = 1 << 16   // prompts_per_step, hanzod's limit
	maxJobSpotCheck = 10_000    // spot_check_bp: basis points
)

// Defaults of the run settings (docs/job-file.md). hanzod reads 0 as "the
// default" for each; gym sends the value itself, so what --dry-run shows is
// what hanzod records.
const (
	defaultPromptsPerStep = 16   // the trainer's (trainer.DefaultConfig)
	defaultSpotCheckBP    = 1000 // 10% of deltas replayed
)

// jobFile is a parsed, validated and normalised job file.
type jobFile struct {
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
	StepsPerEpoch  int        `json:"steps_per_epoch"`
	PromptsPerStep int        `json:"prompts_per_step"`
	Seed           uint64     `json:"seed"`
	Byzantine      int        `json:"byzantine"`
	SpotCheckBP    int        `json:"spot_check_bp"`
	GSPO           gspoConfig `json:"gspo"`
	// HasGSPO records whether the file had a gspo section.
	HasGSPO bool `json:"-"`
}

// gspoConfig is the training configuration: the keys are SPEC.md's (the
// seed's GSPOConfig) and hanzod's job spec holds the same type, so the file,
// the wire and the event log cannot drift apart.
type gspoConfig = jobspec.GSPO

func defaultGSPO() gspoConfig { return jobspec.DefaultGSPO() }

// spec is what hanzod's SubmitJob takes.
func (j *jobFile) spec() *pb.JobSpec {
	s := &pb.JobSpec{
		Model: j.Model, Dataset: j.Dataset, Epochs: int32(j.Epochs), MinNodes: int32(j.MinNodes), MaxNodes: int32(j.MaxNodes),
		MinVramMib: j.MinVRAMMiB, Aggregation: j.Aggregation, Utility: j.Utility, Submitter: j.Submitter,
	}
	if j.Deadline != nil {
		s.DeadlineUnixMs = j.Deadline.UnixMilli()
	}
	s.StepsPerEpoch, s.PromptsPerStep, s.Seed, s.Byzantine = int32(j.StepsPerEpoch), int32(j.PromptsPerStep), j.Seed, int32(j.Byzantine)
	s.SpotCheckBp = spotCheckProto(j.SpotCheckBP)
	s.Gspo = gspoProto(j.GSPO)
	return s
}

// spotCheckProto maps the file's spot_check_bp (0: none) onto hanzod's
// (0: the default, -1: none).
func spotCheckProto(bp int) int32 {
	if bp == 0 {
		return -1
	}
	return int32(bp)
}

// spotCheckFrom is the inverse: the share hanzod applies, in basis points.
func spotCheckFrom(bp int32) int {
	switch {
	case bp == 0:
		return defaultSpotCheckBP
	case bp < 0:
		return 0
	}
	return int(bp)
}

// proto is the GSPO section as hanzod's API carries it, every field set
// (defaults filled in), so hanzod records exactly what --dry-run shows.
func gspoProto(g gspoConfig) *pb.GSPOConfig {
	return &pb.GSPOConfig{
		ImportanceSamplingLevel: &g.ImportanceSamplingLevel, Beta: &g.Beta,
		GroupSize: int32p(g.GroupSize), AggregateInterval: int32p(g.AggregateInterval), Use_4Bit: &g.Use4Bit,
		LoraRank: int32p(g.LoRARank), LoraAlpha: &g.LoRAAlpha, MaxSeqLen: int32p(g.MaxSeqLen),
		GradientAccumulationSteps: int32p(g.GradientAccumulationSteps), LearningRate: &g.LearningRate,
		WarmupSteps: int32p(g.WarmupSteps), WeightDecay: &g.WeightDecay,
	}
}

// gspoFrom reads a job's GSPO settings as hanzod reports them (nil: the
// job has none, it was submitted before hanzod recorded them).
func gspoFrom(p *pb.GSPOConfig) *gspoConfig {
	if p == nil {
		return nil
	}
	return &gspoConfig{
		ImportanceSamplingLevel: p.GetImportanceSamplingLevel(), Beta: p.GetBeta(), GroupSize: int(p.GetGroupSize()),
		AggregateInterval: int(p.GetAggregateInterval()), Use4Bit: p.GetUse_4Bit(), LoRARank: int(p.GetLoraRank()),
		LoRAAlpha: p.GetLoraAlpha(), MaxSeqLen: int(p.GetMaxSeqLen()), GradientAccumulationSteps: int(p.GetGradientAccumulationSteps()),
		LearningRate: p.GetLearningRate(), WarmupSteps: int(p.GetWarmupSteps()), WeightDecay: p.GetWeightDecay(),
	}
}

// int32p returns a pointer to v; the parser bounds every whole number well
// inside int32.
func int32p(v int) *int32 {
	x := int32(v)
	return &x
}

// jobFileError lists every problem found in a job file.
type jobFileError struct {
	name     string
	problems []string
}

func (e *jobFileError) Error() string {
	if len(e.problems) == 1 {
		return e.problems[0]
	}
	return fmt.Sprintf("%s has %d problems:\n  %s", e.name, len(e.problems), strings.Join(e.problems, "\n  "))
}

// readJobFile reads and parses a job file ("-": standard input, named
// stdin in messages); relative deadlines count from now.
func readJobFile(path string, stdin io.Reader, now time.Time) (*jobFile, error) {
	r := stdin
	if path == "-" {
		path = "stdin"
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxJobFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxJobFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes; a job file is a short YAML mapping (docs/job-file.md)", path, maxJobFileBytes)
	}
	return parseJobFile(path, data, now)
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseJobFile parses a job file named name (for messages).
func parseJobFile(name string, data []byte, now time.Time) (*jobFile, error) {
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
	j := &jobFile{GSPO: defaultGSPO()}
	root := resolve(doc.Content[0])
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: a job file is a mapping of keys to values (model: ..., dataset: ...), not a %s", name, root.Line, kindName(root))
	}
	var deadline *yaml.Node
	top := []jobKey{
		{"model", true, func(n *yaml.Node) { j.Model = p.text(n, "model", "the base model to post-train, e.g. Qwen/Qwen3-0.6B") }},
		{"dataset", true, func(n *yaml.Node) { j.Dataset = p.text(n, "dataset", "the training data, e.g. openai/gsm8k") }},
		{"epochs", true, func(n *yaml.Node) {
			j.Epochs = int(p.integer(n, "epochs", 1, maxJobEpochs, "a job trains at least one epoch"))
		}},
		{"min_nodes", true, func(n *yaml.Node) {
			j.MinNodes = int(p.integer(n, "min_nodes", minJobNodes, maxJobNodes, "a ring continues only with at least 3 nodes"))
		}},
		{"max_nodes", false, func(n *yaml.Node) {
			j.MaxNodes = int(p.integer(n, "max_nodes", minJobNodes, maxJobNodes, "leave it out to use exactly min_nodes"))
		}},
		{"min_vram_mib", false, func(n *yaml.Node) {
			j.MinVRAMMiB = uint64(p.integer(n, "min_vram_mib", 0, maxJobVRAMMiB, "MiB of GPU memory a node needs; 24 GiB is 24576"))
		}},
		{"aggregation", false, func(n *yaml.Node) {
			j.Aggregation = p.oneOf(n, "aggregation", "mean", "median", "trimmed-mean")
		}},
		{"utility", false, func(n *yaml.Node) {
			j.Utility = uint64(p.integer(n, "utility", 1, maxJobUtility, "the priority weight; leave it out for 1"))
		}},
		{"submitter", false, func(n *yaml.Node) {
			j.Submitter = p.str(n, "submitter")
			if len(j.Submitter) > maxSubmitter {
				p.errorf(n, "submitter: %d bytes, at most %d (a ledger account, usually a node id)", len(j.Submitter), maxSubmitter)
			}
		}},
		{"deadline", false, func(n *yaml.Node) { deadline = n }},
		{"steps_per_epoch", false, func(n *yaml.Node) {
			j.StepsPerEpoch = int(p.integer(n, "steps_per_epoch", 1, maxJobSteps, "training steps per epoch, a multiple of gspo.aggregate_interval"))
		}},
		{"prompts_per_step", false, func(n *yaml.Node) {
			j.PromptsPerStep = int(p.integer(n, "prompts_per_step", 1, maxJobPrompts, "prompts each worker samples per step, each with gspo.group_size completions"))
		}},
		{"seed", false, func(n *yaml.Node) { j.Seed = p.unsigned(n, "seed") }},
		{"byzantine", false, func(n *yaml.Node) {
			j.Byzantine = int(p.integer(n, "byzantine", 0, (maxJobNodes-1)/3, "Byzantine workers to tolerate; 0 trusts every worker"))
		}},
		{"spot_check_bp", false, func(n *yaml.Node) {
			j.SpotCheckBP = int(p.integer(n, "spot_check_bp", 0, maxJobSpotCheck, "basis points of deltas replayed: 1000 is 10%, 0 none"))
		}},
		{"gspo", false, func(n *yaml.Node) { j.HasGSPO = true; p.gspo(n, &j.GSPO) }},
	}
	p.mapping(root, "", top)
	if deadline != nil {
		j.Deadline = p.deadline(deadline, now)
	}
	p.run(j)
	if j.Aggregation == "" {
		j.Aggregation = "mean"
	}
	if j.Utility == 0 {
		j.Utility = 1
	}
	if j.MaxNodes == 0 {
		j.MaxNodes = j.MinNodes
	} else if j.MinNodes != 0 && j.MaxNodes < j.MinNodes {
		p.errorf(p.seen["max_nodes"], "max_nodes: %d is below min_nodes %d; raise it or leave it out", j.MaxNodes, j.MinNodes)
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	if j.Model == jobconf.BuiltinModel {
		// The built-in trainer has rules of its own (hanzod would accept
		// the job and fail it once it runs).
		if _, err := jobconf.FromSpec("job", jobspec.FromProto(j.spec())); err != nil {
			msg := err.Error()
			for _, pre := range []string{jobconf.ErrJob.Error() + ": ", trainer.ErrConfig.Error() + ": "} {
				msg = strings.TrimPrefix(msg, pre)
			}
			p.errorf(p.seen["model"], "model: %s: the built-in trainer cannot run these settings: %s", j.Model, msg)
			return nil, p.err()
		}
	}
	return j, nil
}

// run checks the run settings against each other and the rest of the file
// (the rules hanzod applies) and fills in their defaults.
func (p *jobParser) run(j *jobFile) {
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
		j.PromptsPerStep = defaultPromptsPerStep
	}
	if p.seen["spot_check_bp"] == nil {
		j.SpotCheckBP = defaultSpotCheckBP
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
	e := &jobFileError{name: p.name}
	for i, pr := range p.problems {
		if i == maxProblems {
			e.problems = append(e.problems, fmt.Sprintf("... and %d more", len(p.problems)-i))
			break
		}
		e.problems = append(e.problems, pr.msg)
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
func (p *jobParser) text(n *yaml.Node, key, what string) string {
	s := p.str(n, key)
	switch {
	case n.Kind != yaml.ScalarNode || n.Tag == "!!null":
	case strings.TrimSpace(s) == "":
		p.errorf(n, "%s is empty; give %s", key, what)
	case len(s) > maxJobName:
		p.errorf(n, "%s: %d bytes, at most %d", key, len(s), maxJobName)
	case strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		p.errorf(n, "%s contains a control character; give %s", key, what)
	}
	return s
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

func (p *jobParser) oneOf(n *yaml.Node, key string, choices ...string) string {
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
func (p *jobParser) gspo(n *yaml.Node, g *gspoConfig) {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "gspo: want a mapping of GSPO settings (importance_sampling_level: sequence, ...), got %s", kindName(n))
		return
	}
	const pre = "gspo."
	ranged := func(dst *float64, key string, ok func(float64) bool, rule string) func(*yaml.Node) {
		return func(n *yaml.Node) {
			if v, good := p.number(n, pre+key); good {
				if !ok(v) {
					p.errorf(n, "%s%s: %s %s", pre, key, n.Value, rule)
					return
				}
				*dst = v
			}
		}
	}
	whole := func(dst *int, key string, lo, hi int64, hint string) func(*yaml.Node) {
		return func(n *yaml.Node) {
			*dst = int(p.integer(n, pre+key, lo, hi, hint))
		}
	}
	p.mapping(n, pre, []jobKey{
		{"importance_sampling_level", false, func(n *yaml.Node) {
			if v := p.oneOf(n, pre+"importance_sampling_level", "sequence", "token"); v != "" {
				g.ImportanceSamplingLevel = v
			}
		}},
		{"beta", false, ranged(&g.Beta, "beta", func(v float64) bool { return v >= 0 }, "is negative; the KL weight is 0 (none) or more, 0.1 by default")},
		{"group_size", false, whole(&g.GroupSize, "group_size", 2, 1024, "completions per prompt; advantages need a group of at least 2")},
		{"aggregate_interval", false, whole(&g.AggregateInterval, "aggregate_interval", 1, 1_000_000, "local steps between ring syncs")},
		{"use_4bit", false, func(n *yaml.Node) { g.Use4Bit = p.boolean(n, pre+"use_4bit") }},
		{"lora_rank", false, whole(&g.LoRARank, "lora_rank", 1, 4096, "the LoRA adapter rank, e.g. 16")},
		{"lora_alpha", false, ranged(&g.LoRAAlpha, "lora_alpha", func(v float64) bool { return v > 0 }, "must be above 0 (LoRA scaling, often twice lora_rank)")},
		{"max_seq_len", false, whole(&g.MaxSeqLen, "max_seq_len", 1, 1<<20, "tokens per prompt plus completion")},
		{"gradient_accumulation_steps", false, whole(&g.GradientAccumulationSteps, "gradient_accumulation_steps", 1, 65536, "micro-batches per optimiser step")},
		{"learning_rate", false, ranged(&g.LearningRate, "learning_rate", func(v float64) bool { return v > 0 && v <= 1 }, "is outside (0, 1]; LoRA rates are small, e.g. 2e-5")},
		{"warmup_steps", false, whole(&g.WarmupSteps, "warmup_steps", 0, 1_000_000_000, "steps of linear learning-rate warm-up")},
		{"weight_decay", false, ranged(&g.WeightDecay, "weight_decay", func(v float64) bool { return v >= 0 && v <= 1 }, "is outside [0, 1]; AdamW decay is small, e.g. 0.01")},
	})
}

// MarshalJSON writes the deadline as RFC 3339 (or null).
func (j jobFile) MarshalJSON() ([]byte, error) {
	type plain jobFile
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
