//go:build !amd64 || purego

package llama

// haveSIMD is false: there are no assembly kernels on this platform (or
// with the purego tag), and the Go kernels compute the same bits.
const haveSIMD = false

func tn4x4(x *float32, ldx int, w *float32, ldw int, chunks int, y *float32, ldy int) {
	panic("llama: no SIMD kernels")
}

func tn1x4(x *float32, w *float32, ldw int, chunks int, y *float32) {
	panic("llama: no SIMD kernels")
}

func dotChunks(a *float32, b *float32, chunks int) float32 { panic("llama: no SIMD kernels") }

func nn4x64(x *float32, ldx int, w *float32, ldw int, kn int, y *float32, ldy int) {
	panic("llama: no SIMD kernels")
}

func nn1x64(x *float32, w *float32, ldw int, kn int, y *float32) { panic("llama: no SIMD kernels") }

func axpyChunks(alpha float32, x *float32, y *float32, chunks int) { panic("llama: no SIMD kernels") }

func nn1x16(x *float32, w *float32, ldw int, kn int, y *float32) { panic("llama: no SIMD kernels") }

func widenBF16Chunks(dst *float32, src *uint16, chunks int) { panic("llama: no SIMD kernels") }

func widenF16Chunks(dst *float32, src *uint16, chunks int) { panic("llama: no SIMD kernels") }
