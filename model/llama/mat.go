package llama

import (
	"fmt"
	"math"
	"runtime"
)

// DType is how a base weight matrix is held in memory.
type DType uint8

// The dtypes of a Mat. BF16 and F16 are the checkpoint's own 16-bit values
// (bfloat16, IEEE 754 binary16), kept as they are stored.
const (
	F32 DType = iota
	BF16
	F16
)

func (d DType) String() string {
	switch d {
	case F32:
		return "F32"
	case BF16:
		return "BF16"
	case F16:
		return "F16"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Mat is a base weight matrix, row-major: a projection [out, in], the
// embeddings or the output head [Vocab, Hidden]. It holds float32 values
// (F32: what NewWeights makes, an F32 tensor, or any tensor read by
// Checkpoint.ReadFloat32), or the raw bits of a BF16 or F16 tensor as the
// checkpoint stores them, memory-mapped from the file where it allows.
// 16-bit values are widened to float32 inside the kernels, exactly (both
// are subsets of float32), so a product with a 16-bit matrix has the bits
// of the same product with its float32 copy.
//
// A 16-bit Mat is read-only: its values are reachable only through the
// engine's kernels and Float32, never as a slice that could outlive the
// mapping.
type Mat struct {
	// F32 holds the values of an F32 matrix; nil for BF16 and F16.
	F32 []float32

	dtype DType
	half  []uint16 // BF16 or F16 bits, when dtype is not F32
	keep  *mapping // the mapped file half lies in, or nil; kept alive by every copy of the Mat
}

// DType is how m holds its values.
func (m Mat) DType() DType { return m.dtype }

// Len is the number of elements.
func (m Mat) Len() int {
	if m.dtype == F32 {
		return len(m.F32)
	}
	return len(m.half)
}

// Bytes is the memory m's values take: 4 bytes per element for F32, 2
// for BF16 and F16 (which, when mapped, is the file's page cache).
func (m Mat) Bytes() int64 {
	if m.dtype == F32 {
		return 4 * int64(len(m.F32))
	}
	return 2 * int64(len(m.half))
}

// slice is the view of elements off … off+n-1 of m (the same memory).
func (m Mat) slice(off, n int) Mat {
	if m.dtype == F32 {
		return Mat{F32: m.F32[off : off+n : off+n]}
	}
	return Mat{dtype: m.dtype, half: m.half[off : off+n : off+n], keep: m.keep}
}

// Mapped reports whether m's values are the memory-mapped file itself
// rather than a copy in the Go heap.
func (m Mat) Mapped() bool { return m.keep != nil }

// Float32 returns m's values as float32: F32 itself, or a widened copy of
// a 16-bit matrix.
func (m Mat) Float32() []float32 {
	if m.dtype == F32 {
		return m.F32
	}
	out := make([]float32, len(m.half))
	m.widenAt(out, 0)
	return out
}

// widenAt sets dst[i] to element off+i, for i < len(dst).
func (m Mat) widenAt(dst []float32, off int) {
	if m.dtype == F32 {
		copy(dst, m.F32[off:off+len(dst)])
		return
	}
	widen(m.dtype, dst, m.half[off:off+len(dst)])
	runtime.KeepAlive(m.keep)
}

// bf16ToFloat converts a bfloat16 value to float32 exactly: its bits are
// float32's upper half.
func bf16ToFloat(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// halfFinite reports whether a 16-bit value of dtype dt is finite (its
// exponent is not all ones).
func halfFinite(dt DType, h uint16) bool {
	if dt == BF16 {
		return h&0x7f80 != 0x7f80
	}
	return h&0x7c00 != 0x7c00
}

// widenGo sets dst[i] to src[i] converted from dtype dt (BF16 or F16) to
// float32, for i < len(dst): the Go form of the widening kernels.
func widenGo(dt DType, dst []float32, src []uint16) {
	src = src[:len(dst)]
	if dt == BF16 {
		for i, h := range src {
			dst[i] = bf16ToFloat(h)
		}
		return
	}
	for i, h := range src {
		dst[i] = halfToFloat(h)
	}
}

// widen is widenGo, 16 elements per instruction where the SIMD kernels
// are available (VPMOVZXWD and VPSLLD for bfloat16, VCVTPH2PS for
// binary16: both exact).
func widen(dt DType, dst []float32, src []uint16) {
	src = src[:len(dst)]
	i := 0
	if ch := len(dst) / lanes; useSIMD && ch > 0 {
		if dt == BF16 {
			widenBF16Chunks(&dst[0], &src[0], ch)
		} else {
			widenF16Chunks(&dst[0], &src[0], ch)
		}
		i = ch * lanes
	}
	widenGo(dt, dst[i:], src[i:])
}

// matMulTW is matMulT with w a base matrix of any dtype. A 16-bit w is
// widened a panel of colPanel rows at a time into each goroutine's scratch
// space and multiplied by matTile, tile by tile as matMulT does, so every
// output element is the same sum in the same order as matMulT on w's
// float32 values: the same bits.
func matMulTW(threads int, y, x []float32, w Mat, bias []float32, N, in, out int) {
	if w.dtype == F32 {
		matMulT(threads, y, x, w.F32, bias, N, in, out)
		return
	}
	_, _, _ = x[:N*in], w.half[:out*in], y[:N*out]
	rb := (N + rowBlock - 1) / rowBlock
	cp := (out + colPanel - 1) / colPanel
	parallel(threads, rb*cp, N*in*out, func(lo, hi int) {
		panel := make([]float32, min(colPanel, out)*in)
		last := -1
		for it := lo; it < hi; it++ {
			// Panels outermost, as in matMulT: a goroutine widens each
			// panel it meets once.
			p, r := it/rb, it%rb
			n0, n1 := r*rowBlock, min((r+1)*rowBlock, N)
			o0, o1 := p*colPanel, min((p+1)*colPanel, out)
			if p != last {
				widen(w.dtype, panel[:(o1-o0)*in], w.half[o0*in:o1*in])
				last = p
			}
			// Row o of w is row o-o0 of the panel; y[o0:] puts output
			// column o at column o-o0.
			matTile(y[o0:], x, panel, in, out, n0, n1, 0, o1-o0)
		}
	})
	addBias(y, bias, N, out)
	runtime.KeepAlive(w.keep)
}

// matMulNNW is matMulNN with w a base matrix of any dtype. A 16-bit w is
// widened a block of kBlock × colPanel at a time (the piece nnTile
// multiplies) into each goroutine's scratch space, so every output element
// is the same sum in the same order as matMulNN on w's float32 values.
func matMulNNW(threads int, y, x []float32, w Mat, N, K, M int) {
	if w.dtype == F32 {
		matMulNN(threads, y, x, w.F32, N, K, M)
		return
	}
	_, _, _ = x[:N*K], w.half[:K*M], y[:N*M]
	rb := (N + rowBlock - 1) / rowBlock
	cp := (M + colPanel - 1) / colPanel
	parallel(threads, rb*cp, N*K*M, func(lo, hi int) {
		blk := make([]float32, min(kBlock, K)*min(colPanel, M))
		for it := lo; it < hi; it++ {
			p, r := it/rb, it%rb
			n0, n1 := r*rowBlock, min((r+1)*rowBlock, N)
			m0, m1 := p*colPanel, min((p+1)*colPanel, M)
			mw := m1 - m0
			for n := n0; n < n1; n++ {
				clear(y[n*M+m0 : n*M+m1])
			}
			for k0 := 0; k0 < K; k0 += kBlock {
				k1 := min(k0+kBlock, K)
				for k := k0; k < k1; k++ {
					widen(w.dtype, blk[(k-k0)*mw:(k-k0+1)*mw], w.half[k*M+m0:k*M+m1])
				}
				nnTile(y, x, blk, mw, K, M, n0, n1, m0, m1, k0, k1)
			}
		}
	})
	runtime.KeepAlive(w.keep)
}
