package pixels

import "golang.org/x/sys/cpu"

// haveAVX2 selects the assembly kernels; tests turn it off to compare with the scalar code.
var haveAVX2 = cpu.X86.HasAVX2

//go:noescape
func vertAVX2(dst, src *byte, n int, offs *int, wp *int32, npairs int, init int32, prec uint64)

//go:noescape
func horizAVX2(dst, src *byte, nout int, off *int32, np *int32, wp *int32, kp int, init int32, prec uint64)

//go:noescape
func vert32AVX2(dst, src *byte, n int, offs *int, w *int32, ntaps int, init int32, prec uint64)

//go:noescape
func horiz32AVX2(dst, src *byte, nout int, off *int32, nt *int32, w *int32, ksize int, init int32, prec uint64)

//go:noescape
func horiz2AVX2(dst *byte, dstride int, src *byte, sstride int, nout int, off *int32, np *int32, wp *int32, kp int, init int32, prec uint64)

//go:noescape
func patchRunsAVX2(dst, src *float32, ps, stride, tt int)
