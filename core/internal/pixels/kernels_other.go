//go:build !amd64

package pixels

// haveAVX2 is false off amd64: the scalar kernels run.
var haveAVX2 = false

func vertAVX2(dst, src *byte, n int, offs *int, wp *int32, npairs int, init int32, prec uint64) {
	panic("pixels: no vector kernels on this architecture")
}

func horizAVX2(dst, src *byte, nout int, off *int32, np *int32, wp *int32, kp int, init int32, prec uint64) {
	panic("pixels: no vector kernels on this architecture")
}

func vert32AVX2(dst, src *byte, n int, offs *int, w *int32, ntaps int, init int32, prec uint64) {
	panic("pixels: no vector kernels on this architecture")
}

func horiz32AVX2(dst, src *byte, nout int, off *int32, nt *int32, w *int32, ksize int, init int32, prec uint64) {
	panic("pixels: no vector kernels on this architecture")
}

func horiz2AVX2(dst *byte, dstride int, src *byte, sstride int, nout int, off *int32, np *int32, wp *int32, kp int, init int32, prec uint64) {
	panic("pixels: no vector kernels on this architecture")
}

func patchRunsAVX2(dst, src *float32, ps, stride, tt int) {
	panic("pixels: no vector kernels on this architecture")
}
