package jobspec_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zooai/gym/protocol/jobspec"
)

// thousands writes v with comma separators, as docs/job-file.md does.
func thousands(v int64) string {
	s := strconv.FormatInt(v, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// docRows reads the key tables of docs/job-file.md: key → the cells after
// the key (for the job keys: required, type, default, allowed; for the
// gspo keys: type, default, allowed).
func docRows(t *testing.T) map[string][]string {
	b, err := os.ReadFile("../../docs/job-file.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	section := ""
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "### ") {
			section = line
		}
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		key := strings.Trim(cells[0], "`")
		switch {
		case strings.Contains(section, "`gspo` keys"):
			rows["gspo."+key] = []string{"no", cells[1], cells[2], cells[3]}
		case strings.Contains(section, "Job keys"):
			rows[key] = cells[1:5]
		}
	}
	return rows
}

// docs/job-file.md's tables say what Fields says: each range, default and
// choice.
func TestFieldsMatchDocs(t *testing.T) {
	rows := docRows(t)
	f := jobspec.Fields
	row := func(key string) (def, allowed string) {
		r, ok := rows[key]
		if !ok {
			t.Errorf("docs/job-file.md has no row for %s", key)
			return "", ""
		}
		return r[2], r[3]
	}
	for _, w := range []jobspec.Whole{f.Epochs, f.MinNodes, f.MinVRAMMiB, f.Utility, f.StepsPerEpoch, f.PromptsPerStep, f.Byzantine, f.SpotCheckBP,
		f.GroupSize, f.AggregateInterval, f.LoRARank, f.MaxSeqLen, f.GradientAccumulationSteps, f.WarmupSteps} {
		def, allowed := row(w.Key)
		if want := thousands(w.Min) + "–" + thousands(w.Max); !strings.HasPrefix(allowed, want) {
			t.Errorf("%s: the docs allow %q, the table %s", w.Key, allowed, want)
		}
		if w.Default != 0 && def != strconv.FormatInt(w.Default, 10) {
			t.Errorf("%s: the docs' default %q, the table's %d", w.Key, def, w.Default)
		}
	}
	if _, allowed := row(f.MaxNodes.Key); allowed != "`min_nodes`–"+thousands(f.MaxNodes.Max) {
		t.Errorf("max_nodes: the docs allow %q", allowed)
	}
	for _, r := range []jobspec.Real{f.Beta, f.LoRAAlpha, f.LearningRate, f.WeightDecay, f.OuterLR, f.OuterMomentum, f.MaxGradNorm} {
		def, allowed := row(r.Key)
		if allowed != r.Range() {
			t.Errorf("%s: the docs allow %q, the table %q", r.Key, allowed, r.Range())
		}
		if d, err := strconv.ParseFloat(def, 64); err != nil || d != r.Default {
			t.Errorf("%s: the docs' default %q, the table's %v", r.Key, def, r.Default)
		}
	}
	for _, c := range []jobspec.Choice{f.Aggregation, f.ImportanceSamplingLevel, f.InnerOptimizer, f.OuterOptimizer, f.Backend, f.DType} {
		def, allowed := row(c.Key)
		if want := "`" + strings.Join(c.Values, "`, `") + "`"; allowed != want || def != "`"+c.Default+"`" {
			t.Errorf("%s: the docs say %q default %q, the table %q default %q", c.Key, allowed, def, want, c.Default)
		}
	}
	for _, x := range []jobspec.Text{f.Model, f.Dataset, f.Submitter} {
		if _, allowed := row(x.Key); !strings.Contains(allowed, fmt.Sprint(x.MaxLen)+" bytes") {
			t.Errorf("%s: the docs allow %q, the table %d bytes", x.Key, allowed, x.MaxLen)
		}
	}
	if def, _ := row(f.Use4Bit.Key); def != strconv.FormatBool(f.Use4Bit.Default) {
		t.Errorf("use_4bit: the docs' default %q", def)
	}
	m := f.LoRATargetModules
	def, allowed := row(m.Key)
	if want := "`[" + strings.ReplaceAll(m.Default, ",", ", ") + "]`"; def != want {
		t.Errorf("%s: the docs' default %q, the table's %q", m.Key, def, want)
	}
	if want := "any of `" + strings.Join(m.Values, " ") + "`, each once, or `" + m.All + "`"; allowed != want {
		t.Errorf("%s: the docs allow %q, the table %q", m.Key, allowed, want)
	}
}

// Target module lists are kept in one canonical form: transformers' order,
// each name once, all-linear for all of them; anything else is refused by
// name, from a job file and from the wire alike.
func TestLoRATargetModules(t *testing.T) {
	m := jobspec.Fields.LoRATargetModules
	for _, tc := range []struct {
		in   []string
		want string
		err  string
	}{
		{[]string{"v_proj", "q_proj"}, "q_proj,v_proj", ""},
		{[]string{"all-linear"}, "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj", ""},
		{[]string{"down_proj"}, "down_proj", ""},
		{nil, "", "is empty"},
		{[]string{"q_proj", "q_proj"}, "", `"q_proj" is given twice`},
		{[]string{"lm_head"}, "", `"lm_head" is not one of`},
		{[]string{"q_proj", "all-linear"}, "", `"all-linear" is not one of`},
	} {
		got, err := m.Canonical(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: got %q, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v: got %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}

	file := func(targets string) (jobspec.GSPO, error) {
		j, err := jobspec.ParseFile("j.yaml", []byte("model: m\ndataset: d\nepochs: 1\nmin_nodes: 3\ngspo:\n  lora_target_modules: "+targets+"\n"), time.Unix(0, 0), nil)
		if err != nil {
			return jobspec.GSPO{}, err
		}
		return j.GSPO, nil
	}
	if g, err := file("[up_proj, q_proj]"); err != nil || g.LoRATargets != "q_proj,up_proj" || !slices.Equal(g.Targets(), []string{"q_proj", "up_proj"}) {
		t.Errorf("a list: %+v %v", g, err)
	}
	if g, err := file("all-linear"); err != nil || len(g.Targets()) != 7 {
		t.Errorf("all-linear: %+v %v", g, err)
	}
	if _, err := file("[q_proj, fc1]"); err == nil || !strings.Contains(err.Error(), `j.yaml:6: gspo.lora_target_modules: "fc1" is not one of`) {
		t.Errorf("an unknown module: %v", err)
	}
	if _, err := file("{a: 1}"); err == nil || !strings.Contains(err.Error(), "want a list of module names") {
		t.Errorf("a mapping: %v", err)
	}
	if g, err := file("[q_proj]"); err != nil || jobspec.DefaultGSPO().Targets()[1] != "v_proj" || g.LoRATargets != "q_proj" {
		t.Errorf("defaults: %+v %v", g, err)
	}
	// The default set has one encoding, "", however it is written.
	if g, err := file("[v_proj, q_proj]"); err != nil || g.LoRATargets != "" || g != jobspec.DefaultGSPO() {
		t.Errorf("the default set written out: %+v %v", g, err)
	}

	// The wire: a set in any order becomes the canonical one; an empty
	// list is the default; an old spec without the field reads as the
	// default.
	s := jobspec.Spec{Model: "m", Dataset: "d", Epochs: 1, MinNodes: 3, GSPO: jobspec.DefaultGSPO()}
	p := jobspec.ToProto(s)
	p.Gspo.LoraTargetModules = []string{"o_proj", "k_proj"}
	back := jobspec.FromProto(p)
	if err := back.Normalise(); err != nil || back.GSPO.LoRATargets != "k_proj,o_proj" {
		t.Errorf("from the wire: %+v %v", back.GSPO, err)
	}
	p.Gspo.LoraTargetModules = []string{"k_proj", "bogus"}
	back = jobspec.FromProto(p)
	if err := back.Normalise(); err == nil || !strings.Contains(err.Error(), `"bogus"`) {
		t.Errorf("a bogus module from the wire: %v", err)
	}
	old := jobspec.GSPO{LoRARank: 8}
	if !slices.Equal(old.Targets(), []string{"q_proj", "v_proj"}) {
		t.Errorf("an old spec's targets: %v", old.Targets())
	}
}
