package pixels

import (
	"fmt"
	"math"
	"testing"
)

// qwenTarget is Qwen2-VL's smart_resize with the Qwen2.5-VL defaults (factor 28, min 3136,
// max 12845056 pixels), Python's banker's rounding included.
func qwenTarget(h, w int) (int, int) {
	const factor, minPixels, maxPixels = 28, 3136, 12845056
	hb := int(math.RoundToEven(float64(h)/factor)) * factor
	wb := int(math.RoundToEven(float64(w)/factor)) * factor
	switch {
	case hb*wb > maxPixels:
		beta := math.Sqrt(float64(h*w) / maxPixels)
		hb = max(factor, int(math.Floor(float64(h)/beta/factor))*factor)
		wb = max(factor, int(math.Floor(float64(w)/beta/factor))*factor)
	case hb*wb < minPixels:
		beta := math.Sqrt(minPixels / float64(h*w))
		hb = int(math.Ceil(float64(h)*beta/factor)) * factor
		wb = int(math.Ceil(float64(w)*beta/factor)) * factor
	}
	return hb, wb
}

// BenchmarkQwenPixels measures the full pixel work of a Qwen2.5-VL request: bicubic resize to
// the smart_resize target, then normalise + patchify into pixel_values, with reused buffers.
func BenchmarkQwenPixels(b *testing.B) {
	norm := Norm{Rescale: 1.0 / 255, Flavor: Torch,
		Mean: [3]float64{0.48145466, 0.4578275, 0.40821073}, Std: [3]float64{0.26862954, 0.26130258, 0.27577711}}
	table, err := norm.Table()
	if err != nil {
		b.Fatal(err)
	}
	layout := Patches{Size: 14, Temporal: 2, Merge: 2}
	for _, size := range [][2]int{{426, 320}, {1024, 768}, {4000, 3000}} {
		src := synth(size[0], size[1], 1)
		th, tw := qwenTarget(src.H, src.W)
		b.Run(fmt.Sprintf("%dx%d_to_%dx%d", src.W, src.H, tw, th), func(b *testing.B) {
			dst := &RGB{W: tw, H: th}
			var pv []float32
			for b.Loop() {
				dst.W, dst.H = tw, th
				if err := Resize(dst, src, Torch, Bicubic); err != nil {
					b.Fatal(err)
				}
				if pv, _, _, err = NormalizePatchify(pv, dst, table, layout); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkResize measures the resize alone, per flavour.
func BenchmarkResize(b *testing.B) {
	src := synth(1024, 768, 1)
	for _, fl := range []Flavor{Torch, PIL} {
		b.Run(fl.String()+"_1024x768_to_1036x756", func(b *testing.B) {
			dst := &RGB{W: 1036, H: 756}
			for b.Loop() {
				if err := Resize(dst, src, fl, Bicubic); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNormalizePatchify measures normalise + patchify alone on the 1024x768 target and on
// the 426x320 photo's 420x308 target.
func BenchmarkNormalizePatchify(b *testing.B) {
	table, _ := Norm{Rescale: 1.0 / 255, Flavor: Torch, Mean: [3]float64{0.5, 0.5, 0.5}, Std: [3]float64{0.5, 0.5, 0.5}}.Table()
	for _, size := range [][2]int{{1036, 756}, {420, 308}} {
		src := synth(size[0], size[1], 1)
		b.Run(fmt.Sprintf("%dx%d", src.W, src.H), func(b *testing.B) {
			var pv []float32
			for b.Loop() {
				var err error
				if pv, _, _, err = NormalizePatchify(pv, src, table, Patches{Size: 14, Temporal: 2, Merge: 2}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
