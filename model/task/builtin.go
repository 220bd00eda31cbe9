package task

import (
	"fmt"
	"slices"
	"strings"

	"github.com/zooai/gym/model/prng"
)

// digits writes n zero-padded to width digits.
func digits(n, width int) string { return fmt.Sprintf("%0*d", width, n) }

func reverse(s string) string {
	b := []byte(s)
	slices.Reverse(b)
	return string(b)
}

// Addition is adding two Digits-digit numbers: prompt "^23+58=", answer the
// sum zero-padded to Digits+1 digits written least-significant digit first
// ("180"), the order in which a left-to-right model can carry.
type Addition struct{ Digits int }

// Name implements Task.
func (a Addition) Name() string { return "addition" }

func (a Addition) max() int {
	m := 1
	for range a.Digits {
		m *= 10
	}
	return m
}

// Make returns the problem x + y.
func (a Addition) Make(x, y int) Problem {
	return Problem{
		Prompt: "^" + digits(x, a.Digits) + "+" + digits(y, a.Digits) + "=",
		Answer: reverse(digits(x+y, a.Digits+1)),
	}
}

// Generate implements Task.
func (a Addition) Generate(r *prng.Source) Problem {
	return a.Make(r.IntN(a.max()), r.IntN(a.max()))
}

// Operands parses the prompt back into its two numbers.
func (a Addition) Operands(p Problem) (x, y int, err error) {
	s := p.Prompt
	if len(s) != 3+2*a.Digits || s[0] != '^' || s[1+a.Digits] != '+' || s[len(s)-1] != '=' {
		return 0, 0, fmt.Errorf("task: %q is not a %d-digit addition prompt", s, a.Digits)
	}
	for i := 0; i < a.Digits; i++ {
		dx, dy := s[1+i], s[2+a.Digits+i]
		if dx < '0' || dx > '9' || dy < '0' || dy > '9' {
			return 0, 0, fmt.Errorf("task: %q is not a %d-digit addition prompt", s, a.Digits)
		}
		x = 10*x + int(dx-'0')
		y = 10*y + int(dy-'0')
	}
	return x, y, nil
}

// Buggy implements Task: the sum without carries, (x_i + y_i) mod 10 for
// every digit and a leading 0 — the classic "forgot the carry".
func (a Addition) Buggy(p Problem) string {
	x, y, err := a.Operands(p)
	if err != nil {
		return ""
	}
	var b strings.Builder
	for i := 0; i < a.Digits; i++ { // i-th least significant digit
		b.WriteByte(byte('0' + (x%10+y%10)%10))
		x, y = x/10, y/10
	}
	b.WriteByte('0')
	return b.String()
}

// Sort is sorting Len digits ascending: prompt "^72915:", answer "12579".
type Sort struct{ Len int }

// Name implements Task.
func (s Sort) Name() string { return "sort" }

// Make returns the problem of sorting ds (digits 0 to 9).
func (s Sort) Make(ds []int) Problem {
	var in strings.Builder
	for _, d := range ds {
		in.WriteByte(byte('0' + d))
	}
	sorted := []byte(in.String())
	slices.Sort(sorted)
	return Problem{Prompt: "^" + in.String() + ":", Answer: string(sorted)}
}

// Generate implements Task.
func (s Sort) Generate(r *prng.Source) Problem {
	ds := make([]int, s.Len)
	for i := range ds {
		ds[i] = r.IntN(10)
	}
	return s.Make(ds)
}

// Buggy implements Task: a single bubble-sort pass (the outer loop run
// once), which moves the largest digit to the end and leaves the rest
// mostly in place.
func (s Sort) Buggy(p Problem) string {
	if len(p.Prompt) != s.Len+2 {
		return ""
	}
	out := []byte(p.Prompt[1 : 1+s.Len])
	for i := 0; i+1 < len(out); i++ {
		if out[i] > out[i+1] {
			out[i], out[i+1] = out[i+1], out[i]
		}
	}
	return string(out)
}
