package ledger

import (
	"fmt"
	"math"
	"strings"
)

// ParseGYM reads an amount of GYM written as a whole number or with up to
// six decimals (100, 0.025, 2345.000001) as micro-GYM; zero is allowed.
// A digit must stand on both sides of a decimal point. Errors wrap
// ErrAmount and say what is wrong with the text.
func ParseGYM(s string) (Amount, error) {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrAmount, s, why) }
	whole, frac, dot := strings.Cut(s, ".")
	switch {
	case s == "":
		return 0, bad("empty")
	case strings.HasPrefix(s, "-"):
		return 0, bad("negative")
	case whole == "" || (dot && frac == ""):
		return 0, bad("a digit is missing around the decimal point")
	case strings.Trim(whole, "0123456789") != "" || strings.Trim(frac, "0123456789") != "":
		return 0, bad("only digits and one decimal point")
	case len(frac) > 6:
		return 0, bad(fmt.Sprintf("%d decimals, at most 6 (1 micro-GYM is 0.000001)", len(frac)))
	}
	var w, f uint64
	for _, c := range whole {
		if w > (math.MaxUint64-9)/10 {
			return 0, bad("too large")
		}
		w = w*10 + uint64(c-'0')
	}
	for i := range 6 {
		f *= 10
		if i < len(frac) {
			f += uint64(frac[i] - '0')
		}
	}
	if w > (math.MaxUint64-f)/uint64(GYM) {
		return 0, bad("too large")
	}
	return Amount(w*uint64(GYM) + f), nil
}
