package ledger

import (
	"fmt"
	"math"
	"strings"
)

// ParseGYM reads an amount of GYM written as a whole number or with up to
// six decimals (100, 0.025, 2345.000001) as micro-GYM; zero is allowed.
func ParseGYM(s string) (Amount, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w: %q: %s; write GYM as a whole number or with up to 6 decimals, e.g. 100 or 0.025", ErrAmount, s, why)
	}
	whole, frac, dot := strings.Cut(s, ".")
	switch {
	case whole == "" && (!dot || frac == ""):
		return 0, bad("no digits")
	case len(frac) > 6:
		return 0, bad(fmt.Sprintf("%d decimals, at most 6 (1 micro-GYM is 0.000001)", len(frac)))
	case dot && frac == "":
		return 0, bad("nothing after the decimal point")
	}
	var w, f uint64
	for _, c := range whole {
		if c < '0' || c > '9' {
			return 0, bad("not a number")
		}
		if w > (math.MaxUint64-9)/10 {
			return 0, bad("too large")
		}
		w = w*10 + uint64(c-'0')
	}
	for i := range 6 {
		f *= 10
		if i < len(frac) {
			c := frac[i]
			if c < '0' || c > '9' {
				return 0, bad("not a number")
			}
			f += uint64(c - '0')
		}
	}
	if w > (math.MaxUint64-f)/uint64(GYM) {
		return 0, bad("too large")
	}
	return Amount(w*uint64(GYM) + f), nil
}
