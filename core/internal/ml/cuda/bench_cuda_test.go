//go:build cuda

package cuda

import (
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/ml/cuda/gpu"
)

// decodeShape is a decoder's shape as the decode kernels see it.
type decodeShape struct {
	name                         string
	H, I, qd, kvd, vocab, layers int
	heads, kvh, hd               int
}

// decodeShapes are the decoders of the served families' full-size checkpoints.
var decodeShapes = []decodeShape{
	{"qwen2.5-vl-3b", 2048, 11008, 2048, 256, 151936, 36, 16, 2, 128},
	{"qwen3-vl-2b", 2048, 6144, 2048, 1024, 151936, 28, 16, 8, 128},
	{"qwen3-vl-8b", 4096, 12288, 4096, 1024, 151936, 36, 32, 8, 128},
}

// BenchmarkDecodeKernels times the kernels of one decode step of each decodeShapes (bf16) in
// isolation: each case is captured in a CUDA graph as layers launches over distinct weights
// (so that no layer finds its weights in L2), the graph replayed, GPU time taken by events.
// It reports microseconds a launch and the weight bytes streamed per second; the cuBLAS cases
// are the baseline of the same run. Run on the GPU machine:
//
//	cuda.test -test.run '^$' -test.bench DecodeKernels/qwen3-vl-2b -test.benchtime 1x
func BenchmarkDecodeKernels(b *testing.B) {
	for _, sh := range decodeShapes {
		b.Run(sh.name, func(b *testing.B) { benchDecodeKernels(b, sh) })
	}
}

func benchDecodeKernels(b *testing.B, sh decodeShape) {
	f := newKfix(b)
	H, I, qd, kvd, vocab, layers := sh.H, sh.I, sh.qd, sh.kvd, sh.vocab, sh.layers
	heads, kvh, hd := sh.heads, sh.kvh, sh.hd
	dt := bf16
	k := f.ks[dt]
	sms := f.dev.Info().SMs
	alloc := func(n int64) gpu.DevPtr {
		buf, err := gpu.Alloc(n*dt.size() + 256)
		if err != nil {
			b.Fatal(err)
		}
		f.bufs = append(f.bufs, buf)
		// bf16 0.0078 in every element: the values do not matter for time, NaNs would not either
		if err := f.s.Memset32(buf.Ptr, 0x3c003c00, (n*dt.size()+3)/4); err != nil {
			b.Fatal(err)
		}
		return buf.Ptr
	}
	type tcase struct {
		name   string
		bytes  int64 // weights read by one launch
		reps   int
		launch func(rep int) error
	}
	var cases, small []tcase
	f.do(func() error {
		x, delta, nw, xo := alloc(int64(I)), alloc(int64(H)), alloc(int64(H)), alloc(int64(I))
		y, yf := alloc(int64(2*vocab)), alloc(int64(2*vocab))
		bias := alloc(int64(I))
		ids := f.putI32([]int32{5})
		wqkv, wo, wgu, wdown := make([]gpu.DevPtr, layers), make([]gpu.DevPtr, layers), make([]gpu.DevPtr, layers), make([]gpu.DevPtr, layers)
		for l := range layers {
			wqkv[l], wo[l], wgu[l], wdown[l] = alloc(int64(qd+2*kvd)*int64(H)), alloc(int64(H)*int64(qd)), alloc(int64(2*I)*int64(H)), alloc(int64(H)*int64(I))
		}
		wlm := alloc(int64(vocab) * int64(H))
		gemv := func(fn *gpu.Function, perSM, N, K int, args ...gpu.Arg) error {
			blocks := min((N+gemvWarps-1)/gemvWarps, perSM*sms)
			return fn.Launch(gpu.Dim3{X: blocks}, gpu.Dim3{X: 32 * gemvWarps}, int((int64(K)*dt.size()+15)&^15), f.s, args...)
		}
		linear := func(yp, xp, wp gpu.DevPtr, N, K int) error {
			return f.blas.linear(dt, yp, N, xp, K, wp, 1, N, K, false)
		}
		for _, perSM := range []int{2, 4, 8} {
			cases = append(cases,
				tcase{fmt.Sprintf("gemv qkv norm+bias %dx%d /%d", qd+2*kvd, H, perSM), int64(qd+2*kvd) * int64(H) * 2, layers, func(l int) error {
					return gemv(k.gemv, perSM, qd+2*kvd, H, gpu.P(y), gpu.P(0), gpu.P(wqkv[l]), gpu.P(x), gpu.P(bias), gpu.I(qd+2*kvd), gpu.I(H),
						gpu.I(1), gpu.P(delta), gpu.P(nw), gpu.P(xo), gpu.F(1e-6))
				}},
				tcase{fmt.Sprintf("gemv o %dx%d /%d", H, qd, perSM), int64(H) * int64(qd) * 2, layers, func(l int) error {
					return gemv(k.gemv, perSM, H, qd, gpu.P(y), gpu.P(0), gpu.P(wo[l]), gpu.P(x), gpu.P(0), gpu.I(H), gpu.I(qd),
						gpu.I(0), gpu.P(0), gpu.P(0), gpu.P(0), gpu.F(0))
				}},
				tcase{fmt.Sprintf("gemv gate/up norm+swiglu %dx%d /%d", 2*I, H, perSM), int64(2*I) * int64(H) * 2, layers, func(l int) error {
					return gemv(k.gemvGLU, perSM, I, H, gpu.P(y), gpu.P(0), gpu.P(wgu[l]), gpu.P(x), gpu.P(0), gpu.I(I), gpu.I(H),
						gpu.I(1), gpu.P(delta), gpu.P(nw), gpu.P(xo), gpu.F(1e-6))
				}},
				tcase{fmt.Sprintf("gemv down %dx%d /%d", H, I, perSM), int64(H) * int64(I) * 2, layers, func(l int) error {
					return gemv(k.gemv, perSM, H, I, gpu.P(y), gpu.P(0), gpu.P(wdown[l]), gpu.P(x), gpu.P(0), gpu.I(H), gpu.I(I),
						gpu.I(0), gpu.P(0), gpu.P(0), gpu.P(0), gpu.F(0))
				}},
				tcase{fmt.Sprintf("gemv lm_head norm+f32 %dx%d /%d", vocab, H, perSM), int64(vocab) * int64(H) * 2, 4, func(int) error {
					return gemv(k.gemv, perSM, vocab, H, gpu.P(0), gpu.P(yf), gpu.P(wlm), gpu.P(x), gpu.P(0), gpu.I(vocab), gpu.I(H),
						gpu.I(1), gpu.P(delta), gpu.P(nw), gpu.P(xo), gpu.F(1e-6))
				}})
		}
		cases = append(cases,
			tcase{"cublas qkv", int64(qd+2*kvd) * int64(H) * 2, layers, func(l int) error { return linear(y, x, wqkv[l], qd+2*kvd, H) }},
			tcase{"cublas o", int64(H) * int64(qd) * 2, layers, func(l int) error { return linear(y, x, wo[l], H, qd) }},
			tcase{"cublas gate/up", int64(2*I) * int64(H) * 2, layers, func(l int) error { return linear(y, x, wgu[l], 2*I, H) }},
			tcase{"cublas down", int64(H) * int64(I) * 2, layers, func(l int) error { return linear(y, x, wdown[l], H, I) }},
			tcase{"cublas lm_head", int64(vocab) * int64(H) * 2, 4, func(int) error { return linear(y, x, wlm, vocab, H) }},
		)
		small = append(small,
			tcase{"rmsnorm (one row)", 0, layers, func(int) error {
				return k.rmsnorm.Launch(gpu.Dim3{X: 1}, gpu.Dim3{X: 256}, 0, f.s, gpu.P(y), gpu.P(xo), gpu.P(x), gpu.P(delta), gpu.P(nw), gpu.I(H), gpu.F(1e-6))
			}},
			tcase{"embed (one row)", 0, layers, func(int) error {
				return k.embed.Launch(gpu.Dim3{X: 1}, gpu.Dim3{X: 256}, 0, f.s, gpu.P(y), gpu.P(wlm), gpu.I(H), gpu.P(ids), gpu.I(H))
			}},
		)
		// decode attention over caches of several lengths (the graph's 128 splits)
		cs := make([]float32, hd)
		for i := range cs {
			cs[i] = float32(i%7) / 7
		}
		cos := f.put(f32, cs)
		for _, past := range []int{200, 420, 1000, 4000} {
			const capacity = 4096 + 64
			kc, vc := alloc(int64(layers*capacity*kvd)), alloc(int64(layers*capacity*kvd))
			qkv, out := alloc(int64(qd+2*kvd)), alloc(int64(qd))
			const splits = 128 // the captured graph's, for a 8192-token context
			part := alloc(int64(heads*splits*(hd+2)) * 2)
			ticket := f.putI32(make([]int32, heads))
			slots, spans := f.putI32([]int32{int32(past)}), f.putI32([]int32{0, int32(past + 1)})
			small = append(small, tcase{fmt.Sprintf("attention decode, %d cached", past), 0, layers, func(l int) error {
				lo := int64(l*capacity*kvd) * dt.size()
				return k.attnPool.Launch(gpu.Dim3{X: heads, Y: splits, Z: 1}, gpu.Dim3{X: decThreads}, 0, f.s,
					gpu.P(out), gpu.I(qd), gpu.P(part), gpu.P(ticket), gpu.P(qkv), gpu.I(qd+2*kvd),
					gpu.P(qkv.Add(int64(qd)*dt.size())), gpu.I(qd+2*kvd), gpu.P(qkv.Add(int64(qd+kvd)*dt.size())), gpu.I(qd+2*kvd),
					gpu.P(cos), gpu.P(cos), gpu.I(0), gpu.P(kc.Add(lo)), gpu.P(vc.Add(lo)), gpu.P(slots), gpu.P(spans),
					gpu.I(heads), gpu.I(kvh), gpu.I(hd), gpu.F(0.088), gpu.P(0), gpu.P(0), gpu.F(0))
			}})
		}
		// prefill attention (causal GQA, a fresh sequence): the flash kernel on CUDA cores
		// against the cuBLAS path (scores materialised)
		for _, n := range []int{200, 420} {
			qb, kb, vb, ob := alloc(int64(n*qd)), alloc(int64(n*kvd)), alloc(int64(n*kvd)), alloc(int64(n*qd))
			seg := f.putI32([]int32{0, int32(n)})
			area := int64(n * n)
			sb, pb := alloc(int64(heads)*area*2), alloc(int64(heads)*area)
			a := attnArgs{out: ob, q: qb, k: kb, v: vb, ldo: qd, ldq: qd, ldk: kvd, ldv: kvd,
				nq: n, nk: n, heads: heads, kvh: kvh, hd: hd, causal: true, scale: 0.088}
			ab := a // every head in one pass, through pointer arrays
			ptrs := gqaPointers(dt, ab, sb, pb)
			ab.ptrs = alloc(int64(len(ptrs)) * 8 / dt.size())
			if err := f.s.Sync(); err != nil { // alloc's fill, before the pointers overwrite it
				return err
			}
			if err := gpu.CopyHtoD(ab.ptrs, unsafe.Pointer(&ptrs[0]), int64(len(ptrs))*8); err != nil {
				return err
			}
			small = append(small,
				tcase{fmt.Sprintf("prefill attention %d, flash", n), 0, layers, func(int) error {
					return k.flash[hd].Launch(gpu.Dim3{X: (n + attBQ - 1) / attBQ, Y: heads, Z: 1}, gpu.Dim3{X: 4 * attBQ}, 0, f.s,
						gpu.P(ob), gpu.P(qb), gpu.P(kb), gpu.P(vb), gpu.I(qd), gpu.I(kvd), gpu.I(kvd), gpu.I(qd),
						gpu.P(seg), gpu.P(seg), gpu.I(heads), gpu.I(kvh), gpu.I(1), gpu.F(0.088))
				}},
				tcase{fmt.Sprintf("prefill attention %d, cuBLAS", n), 0, layers, func(int) error {
					return attnGemm(dt, k, f.blas, f.s, a, sb, pb, heads/kvh)
				}},
				tcase{fmt.Sprintf("prefill attention %d, cuBLAS batched", n), 0, layers, func(int) error {
					return attnGemm(dt, k, f.blas, f.s, ab, sb, pb, heads)
				}})
		}
		cases = append(small, cases...)
		return nil
	})
	const replays = 20
	for _, c := range cases {
		var per time.Duration
		f.do(func() error {
			if err := f.s.BeginCapture(); err != nil {
				return err
			}
			var lerr error
			for l := range c.reps {
				if lerr == nil {
					lerr = c.launch(l)
				}
			}
			g, err := f.s.EndCapture()
			if lerr != nil {
				return fmt.Errorf("%s: %w", c.name, lerr)
			}
			if err != nil {
				return err
			}
			defer func() { _ = g.Destroy() }()
			start, err := gpu.NewEvent()
			if err != nil {
				return err
			}
			defer func() { _ = start.Destroy() }()
			stop, err := gpu.NewEvent()
			if err != nil {
				return err
			}
			defer func() { _ = stop.Destroy() }()
			if err := g.Launch(f.s); err != nil { // warm-up
				return err
			}
			if err := start.Record(f.s); err != nil {
				return err
			}
			for range replays {
				if err := g.Launch(f.s); err != nil {
					return err
				}
			}
			if err := stop.Record(f.s); err != nil {
				return err
			}
			if err := stop.Sync(); err != nil {
				return err
			}
			d, err := stop.Since(start)
			per = d / time.Duration(replays*c.reps)
			return err
		})
		us := float64(per.Nanoseconds()) / 1e3
		line := fmt.Sprintf("%-44s %8.2f us", c.name, us)
		if c.bytes > 0 {
			line += fmt.Sprintf("  %7.0f GB/s", float64(c.bytes)/us/1e3)
		}
		b.Log(line)
		fmt.Println("kernel", line)
	}
}

// towerShape is a ViT tower's shape as one image's ops see it: segments of seg rows (one a tile
// or frame), hidden H, MLP I, depth blocks.
type towerShape struct {
	name                      string
	segs, seg, H, I, heads, L int
}

// BenchmarkVisionTower times the ops of a pre-norm ViT tower at full size in bf16 (zeroed
// weights: the values do not matter for time): every block's LayerNorms, products, attention
// within each segment, GELU and the two LayerScales, then the attention alone and the products
// alone, GPU time by Sync. InternViT-300M (InternVL3 2B and 8B) over the 13 tiles of a 4:3 photo
// and over one tile; segments of 1024 rows (16-byte rows of scores) and the flash kernel alone for
// comparison. Run on the GPU machine:
//
//	cuda.test -test.run '^$' -test.bench VisionTower -test.benchtime 5x
//
// On one H200 (2026-12-01), best of 3-5, in ms (tower, attention alone, products alone): 13 tiles
// 78.8, 59.2, 10.2; one tile 6.7, 4.6, 1.3; 13 segments of 1024 51.8, 31.5, 11.0; 13 tiles with
// the flash kernel only 215, 196, 10.2. Attention within long segments is the tower's cost: the
// cuBLAS path writes every head's scores in F32 (67 MB a 1025-row tile), and rows of 1025 scores
// are not 16-byte aligned (half the time goes with 1024); the flash kernel runs on CUDA cores.
func BenchmarkVisionTower(b *testing.B) {
	for _, sh := range []towerShape{
		{"internvit-300m/13-tiles", 13, 1025, 1024, 4096, 16, 24},
		{"internvit-300m/1-tile", 1, 1025, 1024, 4096, 16, 24},
		{"segments-of-1024/13", 13, 1024, 1024, 4096, 16, 24},
	} {
		b.Run(sh.name, func(b *testing.B) { benchVisionTower(b, sh, Options{}) })
	}
	b.Run("internvit-300m/13-tiles/flash", func(b *testing.B) {
		benchVisionTower(b, towerShape{"", 13, 1025, 1024, 4096, 16, 24}, Options{FlashOnly: true})
	})
}

func benchVisionTower(b *testing.B, sh towerShape, opts Options) {
	bk := newBackend(b, opts)
	N, H, I := sh.segs*sh.seg, sh.H, sh.I
	bounds := make([]int32, sh.segs+1)
	for i := range bounds {
		bounds[i] = int32(i * sh.seg)
	}
	type block struct{ qkv, qkvB, proj, projB, fc1, fc1B, fc2, fc2B, n1, n1B, n2, n2B, l1, l2 ml.Tensor }
	var blocks []block
	err := bk.Do(func() error {
		w := func(rows, cols int) ml.Tensor {
			t, err := bk.Alloc(rows, cols, ml.BF16)
			bk.fail(err)
			return t
		}
		for range sh.L {
			blocks = append(blocks, block{w(3*H, H), w(1, 3*H), w(H, H), w(1, H), w(I, H), w(1, I), w(H, I), w(1, H),
				w(1, H), w(1, H), w(1, H), w(1, H), w(1, H), w(1, H)})
		}
		return bk.Sync()
	})
	if err != nil {
		b.Fatal(err)
	}
	a := ml.Attn{Heads: sh.heads, KVHeads: sh.heads, HeadDim: H / sh.heads, Scale: 0.125}
	run := func(attn, products bool) time.Duration {
		start := time.Now()
		err := bk.Do(func() error {
			x := [2]ml.Tensor{bk.Scratch("x0", N, H), bk.Scratch("x1", N, H)}
			xn, qkv, att, t := bk.Scratch("xn", N, H), bk.Scratch("qkv", N, 3*H), bk.Scratch("att", N, H), bk.Scratch("t", N, H)
			act := bk.Scratch("act", N, I)
			q, k, v := qkv.ColsAt(0, H), qkv.ColsAt(H, H), qkv.ColsAt(2*H, H)
			r, delta := 0, ml.Tensor{}
			for _, B := range blocks {
				if attn && products {
					bk.LayerNorm(xn, x[1-r], x[r], delta, B.n1, B.n1B, 1e-6)
					r ^= 1
				}
				if products {
					bk.Linears(xn, ml.Out{Y: qkv, W: B.qkv, B: B.qkvB})
				}
				if attn {
					bk.SegmentAttention(att, q, k, v, bounds, a)
				}
				if products {
					bk.Linears(att, ml.Out{Y: t, W: B.proj, B: B.projB})
				}
				if attn && products {
					bk.ScaleCols(t, B.l1)
					bk.LayerNorm(xn, x[1-r], x[r], t, B.n2, B.n2B, 1e-6)
					r ^= 1
				}
				if products {
					bk.Linears(xn, ml.Out{Y: act, W: B.fc1, B: B.fc1B})
				}
				if attn && products {
					bk.GELU(act, ml.GELUErf)
				}
				if products {
					bk.Linears(act, ml.Out{Y: t, W: B.fc2, B: B.fc2B})
				}
				if attn && products {
					bk.ScaleCols(t, B.l2)
					delta = t
				}
			}
			return bk.Sync()
		})
		if err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for _, part := range []struct {
		name           string
		attn, products bool
	}{{"tower", true, true}, {"attention", true, false}, {"products", false, true}} {
		run(part.attn, part.products) // warm: scratch, plans
		var best time.Duration
		for i := range max(b.N, 3) {
			if d := run(part.attn, part.products); i == 0 || d < best {
				best = d
			}
		}
		b.ReportMetric(float64(best.Microseconds())/1000, part.name+"-ms")
	}
}

// BenchmarkPixelUpload times the three parts of a tower pass's pixel input for one and twelve
// 426x320 photos of Qwen2.5-VL (660 rows of 1,176 F32 values each, 3.1 MB): the host's copy into
// pinned memory (parallelCopy), the copy from there to the device, and Backend.Write as
// kit.WritePixels calls it (both, and the conversion to bf16), in GB/s of F32 pixels. Run on the
// GPU machine:
//
//	cuda.test -test.run '^$' -test.bench PixelUpload -test.benchtime 10x
func BenchmarkPixelUpload(b *testing.B) {
	const rows, cols = 660, 1176
	for _, images := range []int{1, 12} {
		b.Run(fmt.Sprintf("images-%d", images), func(b *testing.B) {
			bk := newBackend(b, Options{Precision: "bf16"})
			n := int64(images * rows * cols)
			src := make([][]float32, images)
			for i := range src {
				src[i] = make([]float32, rows*cols)
				for j := range src[i] {
					src[i][j] = float32(j%255)/127 - 1
				}
			}
			var host *gpu.HostBuffer
			var dev gpu.Buffer
			var dst ml.Tensor
			err := bk.Do(func() error {
				var err error
				if host, err = gpu.AllocHost(4 * n); err != nil {
					return err
				}
				if dev, err = gpu.Alloc(4 * n); err != nil {
					return err
				}
				dst, err = bk.Alloc(images*rows, cols, ml.BF16)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = bk.Do(func() error { _ = host.Free(); return dev.Free() }) }()
			best := func(fn func() error) float64 {
				var d time.Duration
				for i := range max(b.N, 3) + 1 {
					start := time.Now()
					if err := bk.Do(fn); err != nil {
						b.Fatal(err)
					}
					if t := time.Since(start); i == 1 || (i > 1 && t < d) { // the first warms
						d = t
					}
				}
				return float64(4*n) / d.Seconds() / 1e9
			}
			b.ReportMetric(best(func() error {
				at := 0
				for _, s := range src {
					parallelCopy(host.Bytes()[at:at+4*len(s)], unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 4*len(s)))
					at += 4 * len(s)
				}
				return nil
			}), "host-GB/s")
			b.ReportMetric(best(func() error {
				if err := bk.stream.CopyHtoD(dev.Ptr, host.Ptr(), 4*n); err != nil {
					return err
				}
				return bk.stream.Sync()
			}), "h2d-GB/s")
			b.ReportMetric(best(func() error {
				for i, s := range src {
					bk.Write(dst.RowsAt(i*rows, rows), s)
				}
				return bk.Sync()
			}), "write-GB/s")
		})
	}
}
