package imageio

import (
	"context"
	"os"
	"testing"
)

// BenchmarkInspectDecode measures Inspect + Decode of photo-like JPEGs.
func BenchmarkInspectDecode(b *testing.B) {
	for _, name := range []string{"bench_426x320.jpg", "bench_1024x768_prog.jpg"} {
		data, err := os.ReadFile("testdata/decode/" + name)
		if err != nil {
			b.Fatalf("reading fixture: %v", err)
		}
		b.Run(name, func(b *testing.B) {
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
