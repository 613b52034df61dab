package imageio

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkInspectDecode measures Inspect + Decode of photo-like JPEGs, the GPU workload's photo
// (scripts/reference/testdata) among them.
func BenchmarkInspectDecode(b *testing.B) {
	for _, name := range []string{"bench_426x320.jpg", "bench_1024x768_prog.jpg", "../../../../../scripts/reference/testdata/photo_426x320.jpg"} {
		data, err := os.ReadFile("testdata/decode/" + name)
		if err != nil {
			b.Fatalf("reading fixture: %v", err)
		}
		b.Run(filepath.Base(name), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				hdr, err := Inspect(data, Limits{})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Decode(context.Background(), data, hdr); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInspectDecodePNG measures a 640x480 PNG of gradients plus noise (little for zlib to
// squeeze, like a photo saved as PNG): inflate dominates.
func BenchmarkInspectDecodePNG(b *testing.B) {
	img := image.NewNRGBA(image.Rect(0, 0, 640, 480))
	rng := rand.New(rand.NewPCG(1, 2))
	for y := range 480 {
		for x := range 640 {
			n := uint8(rng.IntN(48))
			img.SetNRGBA(x, y, color.NRGBA{uint8(x*255/639) ^ n, uint8(y*255/479) + n, uint8(x+y) - n, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		hdr, err := Inspect(data, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Decode(context.Background(), data, hdr); err != nil {
			b.Fatal(err)
		}
	}
}
