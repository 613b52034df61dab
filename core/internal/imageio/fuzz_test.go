package imageio

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzImageHeader feeds arbitrary bytes to Inspect and, when accepted, Decode: neither may
// panic, every refusal must be a typed *Error, and an accepted image must come out at the
// header's size.
func FuzzImageHeader(f *testing.F) {
	files, err := filepath.Glob("testdata/decode/*")
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed files: %v", err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, ".json") {
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		if len(data) > 8<<10 {
			continue // keep the corpus small so mutations stay fast
		}
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	f.Add([]byte{})
	f.Add(pngHeader(30000, 30000, 8, 2))
	lim := Limits{MaxBytes: 1 << 20, MaxPixels: 1 << 20, MaxAspect: 1000}
	f.Fuzz(func(t *testing.T, data []byte) {
		hdr, err := Inspect(data, lim)
		if err != nil {
			if CodeOf(err) == "" {
				t.Fatalf("untyped refusal: %v", err)
			}
			return
		}
		img, err := Decode(context.Background(), data, hdr)
		if err != nil {
			if CodeOf(err) == "" {
				t.Fatalf("untyped decode error: %v", err)
			}
			return
		}
		if img.W != hdr.Width || img.H != hdr.Height || len(img.Pix) != 3*img.W*img.H {
			t.Fatalf("decoded %dx%d (%d bytes), header %dx%d", img.W, img.H, len(img.Pix), hdr.Width, hdr.Height)
		}
	})
}
