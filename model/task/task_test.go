package task

import (
	"slices"
	"testing"

	"github.com/zooai/gym/model/prng"
)

func TestAdditionEncoding(t *testing.T) {
	a := Addition{Digits: 2}
	p := a.Make(23, 58)
	if got := p.Prompt; got != "^23+58=" {
		t.Fatalf("prompt %q", got)
	}
	if got := p.Answer; got != "180" {
		t.Fatalf("answer %q (81 reversed, zero-padded: 180)", got)
	}
	if got := a.Buggy(p); got != "170" {
		t.Fatalf("buggy answer %q, want 170 (3+8=1, 2+5=7, no carry)", got)
	}
	if x, y, err := a.Operands(p); err != nil || x != 23 || y != 58 {
		t.Fatalf("operands %d %d %v", x, y, err)
	}
	p = a.Make(99, 99)
	if p.Answer != "891" || a.Buggy(p) != "880" {
		t.Fatalf("99+99: %q buggy %q", p.Answer, a.Buggy(p))
	}
}

// TestAdditionProperty: the answer, read back, is the sum, and the buggy
// answer equals it exactly when no column carries.
func TestAdditionProperty(t *testing.T) {
	a := Addition{Digits: 3}
	r := prng.New(1)
	for range 2000 {
		p := a.Generate(r)
		x, y, _ := a.Operands(p)
		ans := []byte(p.Answer)
		slices.Reverse(ans)
		n := 0
		for _, d := range ans {
			n = 10*n + int(d-'0')
		}
		if n != x+y {
			t.Fatalf("%s%s: answer reads %d", p.Prompt, p.Answer, n)
		}
		carry := false
		for xx, yy := x, y; xx > 0 || yy > 0; xx, yy = xx/10, yy/10 {
			if xx%10+yy%10 >= 10 {
				carry = true
			}
		}
		if Exact(p, a.Buggy(p)) == carry {
			t.Fatalf("%d+%d: carry %v but buggy answer exact = %v", x, y, carry, !carry)
		}
	}
}

func TestSort(t *testing.T) {
	s := Sort{Len: 5}
	p := s.Make([]int{7, 2, 9, 1, 5})
	if p.Prompt != "^72915:" || p.Answer != "12579" {
		t.Fatalf("%q -> %q", p.Prompt, p.Answer)
	}
	if got := s.Buggy(p); got != "27159" {
		t.Fatalf("one bubble pass gave %q, want 27159", got)
	}
}

func TestReward(t *testing.T) {
	p := Addition{Digits: 2}.Make(23, 58)
	cases := []struct {
		comp string
		want float64
	}{{"180", 1}, {"170", 2.0 / 3}, {"000", 1.0 / 3}, {"999", 0}, {"18", 2.0 / 3}, {"", 0},
		{"1800", 3.0 / 4}, {"180\n", 3.0 / 4}, {"1é0", 2.0 / 3}}
	for _, c := range cases {
		if got := Reward(p, c.comp); got != c.want {
			t.Errorf("Reward(%q) = %v, want %v", c.comp, got, c.want)
		}
		if Exact(p, c.comp) != (c.want == 1) {
			t.Errorf("Exact(%q) wrong", c.comp)
		}
	}
}

func TestSplitKeepsHeldOutOut(t *testing.T) {
	for _, name := range Names() {
		tk, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		s := NewSplit(tk, 500)
		if len(s.Eval) != 500 {
			t.Fatalf("%s: %d eval problems", name, len(s.Eval))
		}
		held := map[string]bool{}
		for _, p := range s.Eval {
			if held[p.Prompt] {
				t.Fatalf("%s: duplicate eval problem", name)
			}
			held[p.Prompt] = true
			if len(p.Prompt) != len(s.Eval[0].Prompt) || len(p.Answer) != len(s.Eval[0].Answer) {
				t.Fatalf("%s: lengths %d/%d", name, len(p.Prompt), len(p.Answer))
			}
		}
		for _, p := range s.Batch(7, 0, 3, 4000) {
			if held[p.Prompt] {
				t.Fatalf("%s: training batch contains held-out %s", name, p.Prompt)
			}
		}
		if !slices.EqualFunc(NewSplit(tk, 500).Eval, s.Eval, func(a, b Problem) bool { return a == b }) {
			t.Fatalf("%s: eval set not reproducible", name)
		}
	}
	if _, err := Lookup("chess"); err == nil {
		t.Fatal("unknown task accepted")
	}
}

func TestBatchIsPureFunction(t *testing.T) {
	s := NewSplit(Addition{Digits: 2}, 100)
	eq := func(a, b []Problem) bool {
		return slices.EqualFunc(a, b, func(x, y Problem) bool { return x == y })
	}
	a := s.Batch(1, 2, 3, 16)
	if !eq(a, s.Batch(1, 2, 3, 16)) {
		t.Fatal("same (seed, worker, step) gave different batches")
	}
	for _, other := range [][]Problem{s.Batch(2, 2, 3, 16), s.Batch(1, 3, 3, 16), s.Batch(1, 2, 4, 16)} {
		if eq(a, other) {
			t.Fatal("different (seed, worker, step) gave the same batch")
		}
	}
}

// TestHeldOutSetPinned pins held-out and training problems to those the
// token-id tasks of commit 8201890 drew: accuracy figures across versions
// are measured on the same set, and a replayed step draws the same batch.
func TestHeldOutSetPinned(t *testing.T) {
	for name, want := range map[string][]string{
		"addition": {"^15+00=", "510", "^91+87=", "871", "^99+17=", "611", "^54+98=", "251", "^97+72=", "^94+58="},
		"sort":     {"^10989:", "01899", "^10304:", "00134", "^84813:", "13488", "^28163:", "12368", "^97957:", "^87809:"},
	} {
		tk, _ := Lookup(name)
		s := NewSplit(tk, 500)
		b := s.Batch(7, 3, 5, 2)
		got := []string{s.Eval[0].Prompt, s.Eval[0].Answer, s.Eval[1].Prompt, s.Eval[1].Answer, s.Eval[2].Prompt, s.Eval[2].Answer,
			s.Eval[499].Prompt, s.Eval[499].Answer, b[0].Prompt, b[1].Prompt}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %q, want %q", name, got, want)
		}
	}
}
