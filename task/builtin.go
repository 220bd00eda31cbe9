package task

import (
	"fmt"
	"slices"

	"github.com/zooai/gym/prng"
)

func digits(n, width int) []int {
	out := make([]int, width)
	for i := width - 1; i >= 0; i-- {
		out[i] = n % 10
		n /= 10
	}
	return out
}

func tok(s string) []int {
	ids, err := Encode(s)
	if err != nil {
		panic(err)
	}
	return ids
}

func digitTokens(ds []int) []int {
	out := make([]int, len(ds))
	for i, d := range ds {
		out[i] = 1 + d // '0' is token 1
	}
	return out
}

// Addition is adding two Digits-digit numbers: prompt "^23+58=", answer the
// sum zero-padded to Digits+1 digits written least-significant digit first
// ("180"), the order in which a left-to-right model can carry.
type Addition struct{ Digits int }

// Name implements Task.
func (a Addition) Name() string { return "addition" }

// PromptLen implements Task.
func (a Addition) PromptLen() int { return 3 + 2*a.Digits }

// AnswerLen implements Task.
func (a Addition) AnswerLen() int { return a.Digits + 1 }

func (a Addition) max() int {
	m := 1
	for range a.Digits {
		m *= 10
	}
	return m
}

// Make returns the problem x + y.
func (a Addition) Make(x, y int) Problem {
	p := append(tok("^"), digitTokens(digits(x, a.Digits))...)
	p = append(p, tok("+")...)
	p = append(p, digitTokens(digits(y, a.Digits))...)
	p = append(p, tok("=")...)
	ans := digits(x+y, a.Digits+1)
	slices.Reverse(ans)
	return Problem{Prompt: p, Answer: digitTokens(ans)}
}

// Generate implements Task.
func (a Addition) Generate(r *prng.Source) Problem {
	return a.Make(r.IntN(a.max()), r.IntN(a.max()))
}

// Operands parses the prompt back into its two numbers.
func (a Addition) Operands(p Problem) (x, y int, err error) {
	if len(p.Prompt) != a.PromptLen() {
		return 0, 0, fmt.Errorf("task: addition prompt of length %d", len(p.Prompt))
	}
	for i := 0; i < a.Digits; i++ {
		x = 10*x + p.Prompt[1+i] - 1
		y = 10*y + p.Prompt[2+a.Digits+i] - 1
	}
	return x, y, nil
}

// Buggy implements Task: the sum without carries, (x_i + y_i) mod 10 for
// every digit and a leading 0 — the classic "forgot the carry".
func (a Addition) Buggy(p Problem) []int {
	out := make([]int, a.AnswerLen())
	for i := 0; i < a.Digits; i++ { // i-th least significant digit
		xd := p.Prompt[a.Digits-i] - 1
		yd := p.Prompt[1+2*a.Digits-i] - 1
		out[i] = (xd+yd)%10 + 1
	}
	out[a.Digits] = 1 // '0'
	return out
}

// Sort is sorting Len digits ascending: prompt "^72915:", answer "12579".
type Sort struct{ Len int }

// Name implements Task.
func (s Sort) Name() string { return "sort" }

// PromptLen implements Task.
func (s Sort) PromptLen() int { return s.Len + 2 }

// AnswerLen implements Task.
func (s Sort) AnswerLen() int { return s.Len }

// Make returns the problem of sorting ds.
func (s Sort) Make(ds []int) Problem {
	p := append(tok("^"), digitTokens(ds)...)
	p = append(p, tok(":")...)
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	return Problem{Prompt: p, Answer: digitTokens(sorted)}
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
func (s Sort) Buggy(p Problem) []int {
	out := slices.Clone(p.Prompt[1 : 1+s.Len])
	for i := 0; i+1 < len(out); i++ {
		if out[i] > out[i+1] {
			out[i], out[i+1] = out[i+1], out[i]
		}
	}
	return out
}
