package main

import (
	"math"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
	"github.com/iris-vlm/iris/sdk-wasm/imageproc"
)

// Bucket is one of BucketResize's target sizes: the sides, the ratio W/H in float64 (what
// find_nearest_bucket compares) and the ratio RandomResizedCrop draws, a float32 (below).
type Bucket struct {
	H, W  int
	Ratio float64
	// Drawn is RandomResizedCrop.get_params's aspect_ratio for ratio=(Ratio, Ratio):
	// exp(uniform_(log r, log r)) on a float32 tensor, i.e. float32(exp(float32(log r))) as torch
	// computes it. It differs from Ratio (4/3 becomes 1.3333333730697632), and the crop's
	// rounding follows it. drawnRatios pins torch's results.
	Drawn float64
}

// AspectRatios are the official transform's bucket ratios, W:H, in its order
// (validation_dataset.py's vit_video_transform_args; argmin keeps the first on a tie).
var AspectRatios = [][2]int{{21, 9}, {16, 9}, {4, 3}, {1, 1}, {3, 4}, {9, 16}}

// Stride is BucketResize's default side multiple (na_resize.py: kwargs.get("stride", 16)).
const Stride = 16

// drawnRatios maps a bucket's float64 ratio (its bits) to the float32 ratio torch 2.11 draws
// for it, read off torch (TestBuckets pins them; the reference cases depend on them); a bucket
// missing here falls back to float32(exp(float32(log r))) in Go, which the goldens check.
var drawnRatios = map[uint64]uint32{
	math.Float64bits(672.0 / 288): 0x40155555,
	math.Float64bits(592.0 / 336): 0x3fe18618,
	math.Float64bits(512.0 / 384): 0x3faaaaab,
	math.Float64bits(1.0):         0x3f800000,
	math.Float64bits(384.0 / 512): 0x3f400000,
	math.Float64bits(336.0 / 592): 0x3f114c1c,
}

func drawn(r float64) float64 {
	if bits, ok := drawnRatios[math.Float64bits(r)]; ok {
		return float64(math.Float32frombits(bits))
	}
	return float64(float32(math.Exp(float64(float32(math.Log(r))))))
}

// Buckets is BucketResize.init_buckets for max_area = side², operation for operation: for each
// ratio two candidates (width first, then height first, each side rounded to the stride with
// Python's round), the one whose ratio is closer to the named one, on a tie the one whose area
// is closer to max_area (the first on a second tie).
func Buckets(side int) []Bucket {
	maxArea := float64(side * side)
	out := make([]Bucket, 0, len(AspectRatios))
	for _, ar := range AspectRatios {
		aspect := float64(ar[0]) / float64(ar[1])
		w1 := imageproc.Round(math.Sqrt(maxArea*aspect)/Stride) * Stride
		h1 := imageproc.Round(float64(w1)/aspect/Stride) * Stride
		h2 := imageproc.Round(math.Sqrt(maxArea/aspect)/Stride) * Stride
		w2 := imageproc.Round(float64(h2)*aspect/Stride) * Stride
		r1, r2 := float64(w1)/float64(h1), float64(w2)/float64(h2)
		d1, d2 := math.Abs(r1-aspect), math.Abs(r2-aspect)
		w, h := w1, h1
		switch {
		case d1 < d2:
		case d1 > d2:
			w, h = w2, h2
		case math.Abs(float64(w1*h1)-maxArea) > math.Abs(float64(w2*h2)-maxArea):
			w, h = w2, h2
		}
		r := float64(w) / float64(h)
		out = append(out, Bucket{H: h, W: w, Ratio: r, Drawn: drawn(r)})
	}
	return out
}

// Geometry is the official x2t image transform for one image: the bucket, the box
// RandomResizedCrop cuts from the source (then resized to the bucket with PIL bicubic) and the
// box DivisibleCrop keeps of the resized image.
type Geometry struct {
	Bucket Bucket
	Crop   abi.Rect
	Region abi.Rect
	// Drawn is true when the crop is the one RandomResizedCrop samples (its rounded size fits
	// the image) rather than its centre-crop fallback. When the drawn crop is a pixel short of
	// the image on one side, the reference takes its offset (0 or 1) from torch's generator;
	// Iris takes 0, one of the reference's two outcomes.
	Drawn bool
}

// rules are the reference's arithmetic choices Layout follows. Tests flip them one at a time
// (main_test.go) to show that the goldens catch each.
type rules struct {
	// round is Python's round(): ties to even.
	round func(float64) int
	// float64Draw uses the bucket's float64 ratio where RandomResizedCrop draws a float32 one.
	float64Draw bool
	// lastOnTie keeps the last of equally near buckets where argmin keeps the first.
	lastOnTie bool
	// cornerRegion keeps DivisibleCrop's box at the top-left corner where center_crop centres
	// it.
	cornerRegion bool
	// drawnOffset is the offset taken when the drawn crop is a pixel short of the image.
	drawnOffset int
}

var reference = rules{round: imageproc.Round}

// Layout computes the geometry of a w×h image over the buckets (find_nearest_bucket: the
// first bucket whose ratio is nearest W/H in float64).
func Layout(w, h int, buckets []Bucket, divisible int) Geometry {
	return reference.layout(w, h, buckets, divisible)
}

func (r rules) layout(w, h int, buckets []Bucket, divisible int) Geometry {
	ratio := float64(w) / float64(h)
	best := 0
	for i := range buckets {
		d, e := math.Abs(ratio-buckets[i].Ratio), math.Abs(ratio-buckets[best].Ratio)
		if d < e || r.lastOnTie && d == e {
			best = i
		}
	}
	b := buckets[best]
	g := Geometry{Bucket: b}
	draw := b.Drawn
	if r.float64Draw {
		draw = b.Ratio
	}

	// RandomResizedCrop.get_params with scale=(1, 1), ratio=(r, r): every one of its ten tries
	// draws the same size, the whole area at the drawn ratio, rounded with Python's round.
	area := float64(w * h)
	cw := r.round(math.Sqrt(area * draw))
	ch := r.round(math.Sqrt(area / draw))
	if 0 < cw && cw <= w && 0 < ch && ch <= h {
		g.Crop, g.Drawn = abi.Rect{Width: cw, Height: ch}, true
		if cw < w {
			g.Crop.X = r.drawnOffset
		}
		if ch < h {
			g.Crop.Y = r.drawnOffset
		}
	} else {
		// the fallback: the largest centred crop at the bucket's float64 ratio
		cw, ch = w, h
		if ratio < b.Ratio {
			ch = r.round(float64(w) / b.Ratio)
		} else if ratio > b.Ratio {
			cw = r.round(float64(h) * b.Ratio)
		}
		g.Crop = abi.Rect{X: (w - cw) / 2, Y: (h - ch) / 2, Width: cw, Height: ch}
	}

	// DivisibleCrop: torchvision's center_crop to multiples of divisible, offsets
	// int(round((side - crop) / 2.0)); a bucket's sides are multiples of the stride 16, so with
	// divisible 28 the margins are even and the halves whole.
	rh, rw := b.H-b.H%divisible, b.W-b.W%divisible
	g.Region = abi.Rect{X: r.round(float64(b.W-rw) / 2.0), Y: r.round(float64(b.H-rh) / 2.0), Width: rw, Height: rh}
	if r.cornerRegion {
		g.Region.X, g.Region.Y = 0, 0
	}
	return g
}
