package jobspec_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/zooai/gym/jobspec"
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
	b, err := os.ReadFile("../docs/job-file.md")
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
	for _, r := range []jobspec.Real{f.Beta, f.LoRAAlpha, f.LearningRate, f.WeightDecay} {
		def, allowed := row(r.Key)
		if allowed != r.Range() {
			t.Errorf("%s: the docs allow %q, the table %q", r.Key, allowed, r.Range())
		}
		if d, err := strconv.ParseFloat(def, 64); err != nil || d != r.Default {
			t.Errorf("%s: the docs' default %q, the table's %v", r.Key, def, r.Default)
		}
	}
	for _, c := range []jobspec.Choice{f.Aggregation, f.ImportanceSamplingLevel} {
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
}
