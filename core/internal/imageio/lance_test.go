package imageio

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestDecodeOverWhite: palette PNGs with a tRNS chunk (an alpha per entry at 4 bits; one
// transparent entry at 8 bits, which Pillow keeps as an index) and an RGBA PNG decode, with
// Options.OverWhite, to the RGB of Lance's loader (PIL: P to RGBA, pasted on white through the
// alpha band), and without it to load_image's; the files and both digests come from
// scripts/reference/golden_lance.py.
func TestDecodeOverWhite(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "lance_read.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]struct {
		Lance string `json:"lance_rgb_sha256"`
		Plain string `json:"rgb_sha256"`
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) < 3 {
		t.Fatalf("%d files", len(want))
	}
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			hdr, err := Inspect(data, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				opts Options
				want string
			}{{Options{OverWhite: true}, w.Lance}, {Options{}, w.Plain}} {
				img, err := DecodeWith(context.Background(), data, hdr, tc.opts)
				if err != nil {
					t.Fatal(err)
				}
				sum := sha256.Sum256(img.Pix)
				if got := hex.EncodeToString(sum[:]); got != tc.want {
					t.Errorf("%+v: RGB sha256 %s, want %s", tc.opts, got[:16], tc.want[:16])
				}
			}
		})
	}
}

// TestOverWhiteIsPILBlend: overWhite is PIL's DIV255 blend on a white background for every
// colour and alpha: exact at the ends (alpha 0 gives white, 255 the colour) and within one of
// the real quotient between.
func TestOverWhiteIsPILBlend(t *testing.T) {
	for c := range 256 {
		for a := range 256 {
			got := int(overWhite(byte(c), byte(a)))
			exact := float64(255*(255-a)+c*a) / 255
			if (a == 0 && got != 255) || (a == 255 && got != c) || float64(got) < exact-1 || float64(got) > exact+1 {
				t.Fatalf("overWhite(%d, %d) = %d, the blend is %.3f", c, a, got, exact)
			}
		}
	}
}

// TestHeaderStored: a header read with its EXIF orientation, taken as stored, has the stored
// sides and orientation 1.
func TestHeaderStored(t *testing.T) {
	h := Header{Width: 180, Height: 240, Orientation: 6}
	if s := h.Stored(); s.Width != 240 || s.Height != 180 || s.Orientation != 1 {
		t.Errorf("Stored() = %+v", s)
	}
	h = Header{Width: 240, Height: 180, Orientation: 3}
	if s := h.Stored(); s.Width != 240 || s.Height != 180 || s.Orientation != 1 {
		t.Errorf("Stored() = %+v", s)
	}
}
