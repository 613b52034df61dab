#include "textflag.h"

// AVX2 kernels for the torch flavour's fixed-point resampling: 16-bit taps, 8-bit samples,
// 32-bit sums (VPMADDWD multiplies pairs of samples by pairs of taps and adds them), then a
// rounding offset, an arithmetic shift and saturation to [0, 255] — the same integers as the
// scalar code in resize.go, which tests compare them with.

// func vertAVX2(dst, src *byte, n int, offs *int, wp *int32, npairs int, init int32, prec uint64)
// For x in [0, n) step 16: dst[x..x+16) = sat((init + Σ_p w0_p·src[offs[2p]+x] + w1_p·src[offs[2p+1]+x]) >> prec),
// wp[p] holding w0_p in its low and w1_p in its high 16 bits. n is a multiple of 16, npairs >= 1.
TEXT ·vertAVX2(SB), NOSPLIT, $0-64
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ offs+24(FP), R8
	MOVQ wp+32(FP), R9
	MOVQ npairs+40(FP), R10
	MOVL init+48(FP), AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	MOVQ prec+56(FP), AX
	MOVQ AX, X15
	XORQ BX, BX

vloopx:
	CMPQ BX, CX
	JGE  vdone
	VMOVDQA Y14, Y0
	VMOVDQA Y14, Y1
	XORQ DX, DX

vloopp:
	MOVQ DX, R13
	SHLQ $4, R13
	MOVQ (R8)(R13*1), R11
	MOVQ 8(R8)(R13*1), R12
	ADDQ SI, R11
	ADDQ SI, R12
	VPMOVZXBW (R11)(BX*1), Y2
	VPMOVZXBW (R12)(BX*1), Y3
	VPBROADCASTD (R9)(DX*4), Y4
	VPUNPCKLWD Y3, Y2, Y5
	VPUNPCKHWD Y3, Y2, Y6
	VPMADDWD Y4, Y5, Y5
	VPMADDWD Y4, Y6, Y6
	VPADDD Y5, Y0, Y0
	VPADDD Y6, Y1, Y1
	INCQ DX
	CMPQ DX, R10
	JLT  vloopp

	VPSRAD X15, Y0, Y0
	VPSRAD X15, Y1, Y1
	VPACKSSDW Y1, Y0, Y0
	VPACKUSWB Y0, Y0, Y0
	VPERMQ $0x08, Y0, Y0
	VMOVDQU X0, (DI)(BX*1)
	ADDQ $16, BX
	JMP  vloopx

vdone:
	VZEROUPPER
	RET

// Shuffle of 8 loaded bytes r0 g0 b0 r1 g1 b1 . . into the words r0 r1 g0 g1 b0 b1 0 0.
DATA hshuf<>+0(SB)/8, $0xff04ff01ff03ff00
DATA hshuf<>+8(SB)/8, $0xffffffffff05ff02
GLOBL hshuf<>(SB), RODATA|NOPTR, $16

// func horizAVX2(dst, src *byte, nout int, off *int32, np *int32, wp *int32, kp int, init int32, prec uint64)
// For output pixel x in [0, nout): channels c of dst[3x..3x+3) =
// sat((init + Σ_p w0·src[off[x]+6p+c] + w1·src[off[x]+6p+3+c]) >> prec) over np[x] tap pairs,
// the pairs of output x at wp[x·kp ...]. Every load reads 8 bytes from src+off[x]+6p.
TEXT ·horizAVX2(SB), NOSPLIT, $0-72
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nout+16(FP), CX
	MOVQ off+24(FP), R8
	MOVQ np+32(FP), R9
	MOVQ wp+40(FP), R10
	MOVQ kp+48(FP), R11
	SHLQ $2, R11
	MOVL init+56(FP), AX
	VMOVD AX, X14
	VPBROADCASTD X14, X14
	MOVQ prec+64(FP), AX
	MOVQ AX, X15
	VMOVDQU hshuf<>(SB), X13
	XORQ BX, BX

hloopx:
	CMPQ BX, CX
	JGE  hdone
	MOVLQSX (R8)(BX*4), R12
	ADDQ SI, R12
	MOVLQSX (R9)(BX*4), DX
	MOVQ R10, R13
	VMOVDQA X14, X0

hloopp:
	VMOVQ (R12), X1
	VPSHUFB X13, X1, X1
	VPBROADCASTD (R13), X2
	VPMADDWD X2, X1, X1
	VPADDD X1, X0, X0
	ADDQ $6, R12
	ADDQ $4, R13
	DECQ DX
	JNZ  hloopp

	VPSRAD X15, X0, X0
	VPACKSSDW X0, X0, X0
	VPACKUSWB X0, X0, X0
	VMOVD X0, AX
	MOVW AX, (DI)
	SHRL $16, AX
	MOVB AX, 2(DI)
	ADDQ $3, DI
	ADDQ R11, R10
	INCQ BX
	JMP  hloopx

hdone:
	RET

// func vert32AVX2(dst, src *byte, n int, offs *int, w *int32, ntaps int, init int32, prec uint64)
// The 32-bit-tap variant of vertAVX2 (the PIL flavour): dst[x] = sat((init + Σ_t w[t]·src[offs[t]+x]) >> prec)
// for x in [0, n), n a multiple of 16, ntaps >= 1.
TEXT ·vert32AVX2(SB), NOSPLIT, $0-64
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ offs+24(FP), R8
	MOVQ w+32(FP), R9
	MOVQ ntaps+40(FP), R10
	MOVL init+48(FP), AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	MOVQ prec+56(FP), AX
	MOVQ AX, X15
	XORQ BX, BX

wloopx:
	CMPQ BX, CX
	JGE  wdone
	VMOVDQA Y14, Y0
	VMOVDQA Y14, Y1
	XORQ DX, DX

wloopt:
	MOVQ (R8)(DX*8), R11
	ADDQ SI, R11
	VPMOVZXBD (R11)(BX*1), Y2
	VPMOVZXBD 8(R11)(BX*1), Y3
	VPBROADCASTD (R9)(DX*4), Y4
	VPMULLD Y4, Y2, Y2
	VPMULLD Y4, Y3, Y3
	VPADDD Y2, Y0, Y0
	VPADDD Y3, Y1, Y1
	INCQ DX
	CMPQ DX, R10
	JLT  wloopt

	VPSRAD X15, Y0, Y0
	VPSRAD X15, Y1, Y1
	VPACKSSDW Y1, Y0, Y0
	VPERMQ $0xD8, Y0, Y0
	VPACKUSWB Y0, Y0, Y0
	VPERMQ $0x08, Y0, Y0
	VMOVDQU X0, (DI)(BX*1)
	ADDQ $16, BX
	JMP  wloopx

wdone:
	VZEROUPPER
	RET

// func horiz32AVX2(dst, src *byte, nout int, off *int32, nt *int32, w *int32, ksize int, init int32, prec uint64)
// The 32-bit-tap variant of horizAVX2: nt[x] taps, output x's at w[x·ksize ...]; every load
// reads 4 bytes from src+off[x]+3t.
TEXT ·horiz32AVX2(SB), NOSPLIT, $0-72
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nout+16(FP), CX
	MOVQ off+24(FP), R8
	MOVQ nt+32(FP), R9
	MOVQ w+40(FP), R10
	MOVQ ksize+48(FP), R11
	SHLQ $2, R11
	MOVL init+56(FP), AX
	VMOVD AX, X14
	VPBROADCASTD X14, X14
	MOVQ prec+64(FP), AX
	MOVQ AX, X15
	XORQ BX, BX

gloopx:
	CMPQ BX, CX
	JGE  gdone
	MOVLQSX (R8)(BX*4), R12
	ADDQ SI, R12
	MOVLQSX (R9)(BX*4), DX
	MOVQ R10, R13
	VMOVDQA X14, X0

gloopt:
	VPMOVZXBD (R12), X1
	VPBROADCASTD (R13), X2
	VPMULLD X2, X1, X1
	VPADDD X1, X0, X0
	ADDQ $3, R12
	ADDQ $4, R13
	DECQ DX
	JNZ  gloopt

	VPSRAD X15, X0, X0
	VPACKSSDW X0, X0, X0
	VPACKUSWB X0, X0, X0
	VMOVD X0, AX
	MOVW AX, (DI)
	SHRL $16, AX
	MOVB AX, 2(DI)
	ADDQ $3, DI
	ADDQ R11, R10
	INCQ BX
	JMP  gloopx

gdone:
	RET

// func horiz2AVX2(dst *byte, dstride int, src *byte, sstride int, nout int, off *int32, np *int32, wp *int32, kp int, init int32, prec uint64)
// horizAVX2 for two rows at once, one per 128-bit lane: rows src and src+sstride into dst and
// dst+dstride, with the same taps.
TEXT ·horiz2AVX2(SB), NOSPLIT, $0-88
	MOVQ dst+0(FP), DI
	MOVQ dstride+8(FP), R14
	MOVQ src+16(FP), SI
	MOVQ sstride+24(FP), R15
	MOVQ nout+32(FP), CX
	MOVQ off+40(FP), R8
	MOVQ np+48(FP), R9
	MOVQ wp+56(FP), R10
	MOVQ kp+64(FP), R11
	SHLQ $2, R11
	MOVL init+72(FP), AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	MOVQ prec+80(FP), AX
	MOVQ AX, X15
	VBROADCASTI128 hshuf<>(SB), Y13
	XORQ BX, BX

kloopx:
	CMPQ BX, CX
	JGE  kdone
	MOVLQSX (R8)(BX*4), R12
	ADDQ SI, R12
	MOVLQSX (R9)(BX*4), DX
	MOVQ R10, R13
	VMOVDQA Y14, Y0

kloopp:
	VMOVQ (R12), X1
	VMOVQ (R12)(R15*1), X3
	VINSERTI128 $1, X3, Y1, Y1
	VPSHUFB Y13, Y1, Y1
	VPBROADCASTD (R13), Y2
	VPMADDWD Y2, Y1, Y1
	VPADDD Y1, Y0, Y0
	ADDQ $6, R12
	ADDQ $4, R13
	DECQ DX
	JNZ  kloopp

	VPSRAD X15, Y0, Y0
	VPACKSSDW Y0, Y0, Y0
	VPACKUSWB Y0, Y0, Y0
	VMOVD X0, AX
	MOVW AX, (DI)
	SHRL $16, AX
	MOVB AX, 2(DI)
	VEXTRACTI128 $1, Y0, X1
	VMOVD X1, AX
	MOVW AX, (DI)(R14*1)
	SHRL $16, AX
	MOVB AX, 2(DI)(R14*1)
	ADDQ $3, DI
	ADDQ R11, R10
	INCQ BX
	JMP  kloopx

kdone:
	VZEROUPPER
	RET

// func patchRunsAVX2(dst, src *float32, ps, stride, tt int)
// One channel of a patch row of pixel_values: for py in [0, ps) and k in [0, tt),
// dst[k·ps² + py·ps ...+ps) = src[py·stride ...+ps). ps >= 8: each run moves in 8-float pieces,
// the last one at ps-8, overlapping the one before with the same values.
TEXT ·patchRunsAVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ ps+16(FP), CX
	MOVQ stride+24(FP), R8
	MOVQ tt+32(FP), R9
	SHLQ $2, R8
	MOVQ CX, R10
	IMULQ CX, R10
	SHLQ $2, R10
	MOVQ CX, R11
	SHLQ $2, R11
	LEAQ -32(R11), R12
	MOVQ CX, DX

prow:
	XORQ BX, BX

pchunk:
	CMPQ BX, R12
	JGE  plast
	VMOVUPS (SI)(BX*1), Y0
	MOVQ DI, R13
	MOVQ R9, R14

pstore:
	VMOVUPS Y0, (R13)(BX*1)
	ADDQ R10, R13
	DECQ R14
	JNZ  pstore
	ADDQ $32, BX
	JMP  pchunk

plast:
	VMOVUPS (SI)(R12*1), Y0
	MOVQ DI, R13
	MOVQ R9, R14

pstorelast:
	VMOVUPS Y0, (R13)(R12*1)
	ADDQ R10, R13
	DECQ R14
	JNZ  pstorelast
	ADDQ R8, SI
	ADDQ R11, DI
	DECQ DX
	JNZ  prow
	VZEROUPPER
	RET
