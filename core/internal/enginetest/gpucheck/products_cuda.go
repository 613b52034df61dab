//go:build cuda

package main

import (
	"fmt"
	"math/rand/v2"
	"unsafe"

	"github.com/iris-vlm/iris/core/internal/ml/cuda/gpu"
)

// timeProducts times cuBLASLt's first want candidates for each bf16 product shape (y[M, N] =
// x[M, K] W[N, K]^T + bias, random operands) and prints the heuristic's pick against the fastest.
func timeProducts(shapes [][3]int, want, runs int) error {
	dev, err := gpu.Open(0)
	if err != nil {
		return err
	}
	defer func() { _ = dev.Close() }()
	return dev.Do(func() error {
		s, err := gpu.NewStream()
		if err != nil {
			return err
		}
		defer func() { _ = s.Destroy() }()
		b, err := gpu.NewBLAS(s)
		if err != nil {
			return err
		}
		defer b.Destroy()
		r := rand.New(rand.NewPCG(1, 2))
		fmt.Printf("%-22s %10s %10s %7s %6s  %s\n", "product MxNxK", "pick us", "best us", "gain", "TF/s", "best config (id tile stages splitk cluster) / pick's")
		var pick, best float64
		for _, sh := range shapes {
			M, N, K := sh[0], sh[1], sh[2]
			var bufs [4]gpu.Buffer
			for i, n := range []int{M * K, N * K, N, M * N} {
				if bufs[i], err = gpu.Alloc(int64(n) * 2); err != nil {
					return err
				}
				defer func() { _ = bufs[i].Free() }()
				h := make([]uint16, n)
				for j := range h { // bf16 of N(0, 0.05^2) (x and bias larger do not change the time)
					f := float32(r.NormFloat64() * 0.05)
					h[j] = uint16(*(*uint32)(unsafe.Pointer(&f)) >> 16)
				}
				if i == 3 {
					continue
				}
				if err := gpu.CopyHtoD(bufs[i].Ptr, unsafe.Pointer(&h[0]), int64(n)*2); err != nil {
					return err
				}
			}
			c, err := b.LtCandidates(gpu.BF16, bufs[3].Ptr, N, bufs[0].Ptr, K, bufs[1].Ptr, bufs[2].Ptr, M, N, K, want, runs)
			if err != nil {
				return err
			}
			bi := 0
			for i := range c {
				if c[i].Time < c[bi].Time {
					bi = i
				}
			}
			p, q := c[0].Time.Seconds()*1e6, c[bi].Time.Seconds()*1e6
			pick, best = pick+p, best+q
			fmt.Printf("%-22s %10.1f %10.1f %6.1f%% %6.0f  %v / %v (%d candidates)\n", fmt.Sprintf("%dx%dx%d", M, N, K), p, q,
				100*(p-q)/p, 2*float64(M)*float64(N)*float64(K)/q/1e6, c[bi].Config, c[0].Config, len(c))
		}
		fmt.Printf("%-22s %10.1f %10.1f %6.1f%%\n", "sum", pick, best, 100*(pick-best)/pick)
		return nil
	})
}
