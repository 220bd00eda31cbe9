//go:build !purego

#include "textflag.h"

// AVX-512 kernels of kernels.go. Every multiply-add is a fused one
// (VFMADD231PS: a·b + c rounded once), which the Go kernels compute
// exactly with fma32. Each function computes exactly what its Go
// counterpart (same name with a Go suffix) computes, bit for bit; see the
// comments there for the summation orders.

// REDUCE16 sums the 16 lanes of acc in the tree order of reduceLanes and
// stores the float32 at dst. Clobbers Z0, Z1.
#define REDUCE16(acc, dst) \
	VEXTRACTF64X4 $1, acc, Y1; \
	VMOVAPS acc, Z0; \
	VADDPS Y1, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPS X1, X0, X0; \
	VMOVHLPS X0, X0, X1; \
	VADDPS X1, X0, X0; \
	VMOVSHDUP X0, X1; \
	VADDSS X1, X0, X0; \
	MOVSS X0, dst

// PRODADD sets acc = a·b + acc with a single rounding (fma32); t is unused.
#define PRODADD(a, b, t, acc) \
	VFMADD231PS b, a, acc

// func tn4x4(x *float32, ldx int, w *float32, ldw int, chunks int, y *float32, ldy int)
TEXT ·tn4x4(SB), NOSPLIT, $0-56
	MOVQ x+0(FP), SI
	MOVQ ldx+8(FP), AX
	SHLQ $2, AX
	MOVQ w+16(FP), DI
	MOVQ ldw+24(FP), BX
	SHLQ $2, BX
	MOVQ chunks+32(FP), CX
	LEAQ (DI)(BX*2), R9
	LEAQ (SI)(AX*2), R8
	VXORPS Z16, Z16, Z16
	VXORPS Z17, Z17, Z17
	VXORPS Z18, Z18, Z18
	VXORPS Z19, Z19, Z19
	VXORPS Z20, Z20, Z20
	VXORPS Z21, Z21, Z21
	VXORPS Z22, Z22, Z22
	VXORPS Z23, Z23, Z23
	VXORPS Z24, Z24, Z24
	VXORPS Z25, Z25, Z25
	VXORPS Z26, Z26, Z26
	VXORPS Z27, Z27, Z27
	VXORPS Z28, Z28, Z28
	VXORPS Z29, Z29, Z29
	VXORPS Z30, Z30, Z30
	VXORPS Z31, Z31, Z31
	TESTQ CX, CX
	JEQ tn4x4reduce

tn4x4loop:
	VMOVUPS (SI), Z0
	VMOVUPS (SI)(AX*1), Z1
	VMOVUPS (R8), Z2
	VMOVUPS (R8)(AX*1), Z3
	VMOVUPS (DI), Z4
	VMOVUPS (DI)(BX*1), Z5
	VMOVUPS (R9), Z6
	VMOVUPS (R9)(BX*1), Z7
	PRODADD(Z0, Z4, Z8, Z16)
	PRODADD(Z0, Z5, Z9, Z17)
	PRODADD(Z0, Z6, Z10, Z18)
	PRODADD(Z0, Z7, Z11, Z19)
	PRODADD(Z1, Z4, Z12, Z20)
	PRODADD(Z1, Z5, Z13, Z21)
	PRODADD(Z1, Z6, Z14, Z22)
	PRODADD(Z1, Z7, Z8, Z23)
	PRODADD(Z2, Z4, Z9, Z24)
	PRODADD(Z2, Z5, Z10, Z25)
	PRODADD(Z2, Z6, Z11, Z26)
	PRODADD(Z2, Z7, Z12, Z27)
	PRODADD(Z3, Z4, Z13, Z28)
	PRODADD(Z3, Z5, Z14, Z29)
	PRODADD(Z3, Z6, Z8, Z30)
	PRODADD(Z3, Z7, Z9, Z31)
	ADDQ $64, SI
	ADDQ $64, R8
	ADDQ $64, DI
	ADDQ $64, R9
	DECQ CX
	JNE tn4x4loop

tn4x4reduce:
	MOVQ y+40(FP), DX
	MOVQ ldy+48(FP), R10
	SHLQ $2, R10
	LEAQ (DX)(R10*2), R11
	REDUCE16(Z16, (DX))
	REDUCE16(Z17, 4(DX))
	REDUCE16(Z18, 8(DX))
	REDUCE16(Z19, 12(DX))
	REDUCE16(Z20, (DX)(R10*1))
	REDUCE16(Z21, 4(DX)(R10*1))
	REDUCE16(Z22, 8(DX)(R10*1))
	REDUCE16(Z23, 12(DX)(R10*1))
	REDUCE16(Z24, (R11))
	REDUCE16(Z25, 4(R11))
	REDUCE16(Z26, 8(R11))
	REDUCE16(Z27, 12(R11))
	REDUCE16(Z28, (R11)(R10*1))
	REDUCE16(Z29, 4(R11)(R10*1))
	REDUCE16(Z30, 8(R11)(R10*1))
	REDUCE16(Z31, 12(R11)(R10*1))
	VZEROUPPER
	RET

// func tn1x4(x *float32, w *float32, ldw int, chunks int, y *float32)
TEXT ·tn1x4(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ ldw+16(FP), BX
	SHLQ $2, BX
	MOVQ chunks+24(FP), CX
	MOVQ y+32(FP), DX
	LEAQ (DI)(BX*2), R9
	VXORPS Z16, Z16, Z16
	VXORPS Z17, Z17, Z17
	VXORPS Z18, Z18, Z18
	VXORPS Z19, Z19, Z19
	TESTQ CX, CX
	JEQ tn1x4reduce

tn1x4loop:
	VMOVUPS (SI), Z0
	VMOVUPS (DI), Z4
	VMOVUPS (DI)(BX*1), Z5
	VMOVUPS (R9), Z6
	VMOVUPS (R9)(BX*1), Z7
	PRODADD(Z0, Z4, Z8, Z16)
	PRODADD(Z0, Z5, Z9, Z17)
	PRODADD(Z0, Z6, Z10, Z18)
	PRODADD(Z0, Z7, Z11, Z19)
	ADDQ $64, SI
	ADDQ $64, DI
	ADDQ $64, R9
	DECQ CX
	JNE tn1x4loop

tn1x4reduce:
	REDUCE16(Z16, (DX))
	REDUCE16(Z17, 4(DX))
	REDUCE16(Z18, 8(DX))
	REDUCE16(Z19, 12(DX))
	VZEROUPPER
	RET

// func dotChunks(a *float32, b *float32, chunks int) float32
TEXT ·dotChunks(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ chunks+16(FP), CX
	LEAQ ret+24(FP), DX
	VXORPS Z16, Z16, Z16
	TESTQ CX, CX
	JEQ dotreduce

dotloop:
	VMOVUPS (SI), Z0
	VMOVUPS (DI), Z4
	PRODADD(Z0, Z4, Z8, Z16)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNE dotloop

dotreduce:
	REDUCE16(Z16, (DX))
	VZEROUPPER
	RET

// NN kernels: y[r, 0:64] += Σ_k x[r,k]·w[k, 0:64] for k = 0 … kn-1 in order,
// each element's running sum kept in a register lane.

// func nn4x64(x *float32, ldx int, w *float32, ldw int, kn int, y *float32, ldy int)
TEXT ·nn4x64(SB), NOSPLIT, $0-56
	MOVQ x+0(FP), SI
	MOVQ ldx+8(FP), AX
	SHLQ $2, AX
	MOVQ w+16(FP), DI
	MOVQ ldw+24(FP), BX
	SHLQ $2, BX
	MOVQ kn+32(FP), CX
	MOVQ y+40(FP), DX
	MOVQ ldy+48(FP), R10
	SHLQ $2, R10
	LEAQ (SI)(AX*2), R8
	LEAQ (DX)(R10*2), R11
	VMOVUPS (DX), Z16
	VMOVUPS 64(DX), Z17
	VMOVUPS 128(DX), Z18
	VMOVUPS 192(DX), Z19
	VMOVUPS (DX)(R10*1), Z20
	VMOVUPS 64(DX)(R10*1), Z21
	VMOVUPS 128(DX)(R10*1), Z22
	VMOVUPS 192(DX)(R10*1), Z23
	VMOVUPS (R11), Z24
	VMOVUPS 64(R11), Z25
	VMOVUPS 128(R11), Z26
	VMOVUPS 192(R11), Z27
	VMOVUPS (R11)(R10*1), Z28
	VMOVUPS 64(R11)(R10*1), Z29
	VMOVUPS 128(R11)(R10*1), Z30
	VMOVUPS 192(R11)(R10*1), Z31
	TESTQ CX, CX
	JEQ nn4x64store

nn4x64loop:
	VMOVUPS (DI), Z4
	VMOVUPS 64(DI), Z5
	VMOVUPS 128(DI), Z6
	VMOVUPS 192(DI), Z7
	VBROADCASTSS (SI), Z0
	VBROADCASTSS (SI)(AX*1), Z1
	VBROADCASTSS (R8), Z2
	VBROADCASTSS (R8)(AX*1), Z3
	PRODADD(Z0, Z4, Z8, Z16)
	PRODADD(Z0, Z5, Z9, Z17)
	PRODADD(Z0, Z6, Z10, Z18)
	PRODADD(Z0, Z7, Z11, Z19)
	PRODADD(Z1, Z4, Z12, Z20)
	PRODADD(Z1, Z5, Z13, Z21)
	PRODADD(Z1, Z6, Z14, Z22)
	PRODADD(Z1, Z7, Z8, Z23)
	PRODADD(Z2, Z4, Z9, Z24)
	PRODADD(Z2, Z5, Z10, Z25)
	PRODADD(Z2, Z6, Z11, Z26)
	PRODADD(Z2, Z7, Z12, Z27)
	PRODADD(Z3, Z4, Z13, Z28)
	PRODADD(Z3, Z5, Z14, Z29)
	PRODADD(Z3, Z6, Z8, Z30)
	PRODADD(Z3, Z7, Z9, Z31)
	ADDQ $4, SI
	ADDQ $4, R8
	ADDQ BX, DI
	DECQ CX
	JNE nn4x64loop

nn4x64store:
	VMOVUPS Z16, (DX)
	VMOVUPS Z17, 64(DX)
	VMOVUPS Z18, 128(DX)
	VMOVUPS Z19, 192(DX)
	VMOVUPS Z20, (DX)(R10*1)
	VMOVUPS Z21, 64(DX)(R10*1)
	VMOVUPS Z22, 128(DX)(R10*1)
	VMOVUPS Z23, 192(DX)(R10*1)
	VMOVUPS Z24, (R11)
	VMOVUPS Z25, 64(R11)
	VMOVUPS Z26, 128(R11)
	VMOVUPS Z27, 192(R11)
	VMOVUPS Z28, (R11)(R10*1)
	VMOVUPS Z29, 64(R11)(R10*1)
	VMOVUPS Z30, 128(R11)(R10*1)
	VMOVUPS Z31, 192(R11)(R10*1)
	VZEROUPPER
	RET

// func nn1x64(x *float32, w *float32, ldw int, kn int, y *float32)
TEXT ·nn1x64(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ ldw+16(FP), BX
	SHLQ $2, BX
	MOVQ kn+24(FP), CX
	MOVQ y+32(FP), DX
	VMOVUPS (DX), Z16
	VMOVUPS 64(DX), Z17
	VMOVUPS 128(DX), Z18
	VMOVUPS 192(DX), Z19
	TESTQ CX, CX
	JEQ nn1x64store

nn1x64loop:
	VBROADCASTSS (SI), Z0
	VMOVUPS (DI), Z4
	VMOVUPS 64(DI), Z5
	VMOVUPS 128(DI), Z6
	VMOVUPS 192(DI), Z7
	PRODADD(Z0, Z4, Z8, Z16)
	PRODADD(Z0, Z5, Z9, Z17)
	PRODADD(Z0, Z6, Z10, Z18)
	PRODADD(Z0, Z7, Z11, Z19)
	ADDQ $4, SI
	ADDQ BX, DI
	DECQ CX
	JNE nn1x64loop

nn1x64store:
	VMOVUPS Z16, (DX)
	VMOVUPS Z17, 64(DX)
	VMOVUPS Z18, 128(DX)
	VMOVUPS Z19, 192(DX)
	VZEROUPPER
	RET

// func axpyChunks(alpha float32, x *float32, y *float32, chunks int)
TEXT ·axpyChunks(SB), NOSPLIT, $0-32
	VBROADCASTSS alpha+0(FP), Z0
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DI
	MOVQ chunks+24(FP), CX
	TESTQ CX, CX
	JEQ axpydone

axpyloop:
	VMOVUPS (SI), Z4
	VMOVUPS (DI), Z16
	PRODADD(Z0, Z4, Z8, Z16)
	VMOVUPS Z16, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNE axpyloop

axpydone:
	VZEROUPPER
	RET

// func nn1x16(x *float32, w *float32, ldw int, kn int, y *float32)
TEXT ·nn1x16(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ ldw+16(FP), BX
	SHLQ $2, BX
	MOVQ kn+24(FP), CX
	MOVQ y+32(FP), DX
	VMOVUPS (DX), Z16
	TESTQ CX, CX
	JEQ nn1x16store

nn1x16loop:
	VBROADCASTSS (SI), Z0
	VMOVUPS (DI), Z4
	PRODADD(Z0, Z4, Z8, Z16)
	ADDQ $4, SI
	ADDQ BX, DI
	DECQ CX
	JNE nn1x16loop

nn1x16store:
	VMOVUPS Z16, (DX)
	VZEROUPPER
	RET

// Widening kernels: dst[0:16·chunks] = src[0:16·chunks] converted to
// float32, 16 elements per instruction; both conversions are exact.

// func widenBF16Chunks(dst *float32, src *uint16, chunks int)
TEXT ·widenBF16Chunks(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ chunks+16(FP), CX
	TESTQ CX, CX
	JEQ wbf16done

wbf16loop:
	VPMOVZXWD (SI), Z0
	VPSLLD $16, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNE wbf16loop

wbf16done:
	VZEROUPPER
	RET

// func widenF16Chunks(dst *float32, src *uint16, chunks int)
TEXT ·widenF16Chunks(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ chunks+16(FP), CX
	TESTQ CX, CX
	JEQ wf16done

wf16loop:
	VCVTPH2PS (SI), Z0
	VMOVUPS Z0, (DI)
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNE wf16loop

wf16done:
	VZEROUPPER
	RET
