//go:build !purego

package llama

import "golang.org/x/sys/cpu"

// haveSIMD reports whether the AVX-512 kernels of kernels_amd64.s can run:
// AVX-512 F and VL with the operating system saving the registers.
var haveSIMD = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL

// The assembly kernels; each equals, bit for bit, its Go counterpart (the
// same name with the suffix Go) in kernels.go.

//go:noescape
func tn4x4(x *float32, ldx int, w *float32, ldw int, chunks int, y *float32, ldy int)

//go:noescape
func tn1x4(x *float32, w *float32, ldw int, chunks int, y *float32)

//go:noescape
func dotChunks(a *float32, b *float32, chunks int) float32

//go:noescape
func nn4x64(x *float32, ldx int, w *float32, ldw int, kn int, y *float32, ldy int)

//go:noescape
func nn1x64(x *float32, w *float32, ldw int, kn int, y *float32)

//go:noescape
func axpyChunks(alpha float32, x *float32, y *float32, chunks int)

//go:noescape
func nn1x16(x *float32, w *float32, ldw int, kn int, y *float32)

//go:noescape
func widenBF16Chunks(dst *float32, src *uint16, chunks int)

//go:noescape
func widenF16Chunks(dst *float32, src *uint16, chunks int)
