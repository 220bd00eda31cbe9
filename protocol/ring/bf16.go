package ring

import "math"

// toBF16 rounds f to bfloat16 (round to nearest, ties to even); NaN stays NaN.
func toBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN: keep sign, force a quiet mantissa bit
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

func fromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// RoundBF16 returns f rounded to the nearest bfloat16, as a float32.
func RoundBF16(f float32) float32 { return fromBF16(toBF16(f)) }
