package promdoc_test

import (
	"testing"

	"github.com/zooai/gym/internal/promdoc"
)

func TestCompare(t *testing.T) {
	exp := []byte("# TYPE gym_a_total counter\ngym_a_total 1\n# TYPE gym_b gauge\n# TYPE other_x gauge\n")
	doc := []byte("| `gym_a_total` | counter | — | x |\n| `gym_b` | counter | — | y |\n| `gym_c` | gauge | — | z |\n| `gym_z` | gauge | | |\n")
	got := promdoc.Compare(exp, doc, "gym_")
	want := []string{
		"gym_b is exported as a gauge; the doc says \"counter\"",
		"the doc lists gym_c, which is not exported",
		"the doc lists gym_z, which is not exported",
	}
	if len(got) != len(want) {
		t.Fatalf("%q", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%q, want %q", got, want)
		}
	}
	if d := promdoc.Compare(exp, doc, "gym_a"); len(d) != 0 {
		t.Fatalf("prefix gym_a: %q", d)
	}
	if d := promdoc.Compare(exp, doc, "gym_q"); len(d) != 1 {
		t.Fatalf("nothing exported: %q", d)
	}
}
