package pixels_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/iris-vlm/iris/core/internal/imageio"
	"github.com/iris-vlm/iris/core/internal/pixels"
)

// goldenDir holds the transformers 5.17 preprocessing golden data
// (scripts/reference/golden_preprocess.py).
const goldenDir = "../prep/testdata/golden"

type manifest struct {
	Images []struct {
		File      string
		SHA256    string
		RGBSHA256 string `json:"rgb_sha256"`
		Width     int
		Height    int
	}
	Families map[string]struct {
		PreprocessorConfig struct {
			PatchSize         int       `json:"patch_size"`
			TemporalPatchSize int       `json:"temporal_patch_size"`
			MergeSize         int       `json:"merge_size"`
			ImageMean         []float64 `json:"image_mean"`
			ImageStd          []float64 `json:"image_std"`
			RescaleFactor     float64   `json:"rescale_factor"`
			Resample          int
		} `json:"preprocessor_config"`
		Cases []struct {
			File               string
			Error              *struct{ Type, Message string }
			ResizedHeight      int          `json:"resized_height"`
			ResizedWidth       int          `json:"resized_width"`
			ImageGridTHW       []int        `json:"image_grid_thw"`
			PixelValuesShape   []int        `json:"pixel_values_shape"`
			PixelValuesSHA256  string       `json:"pixel_values_sha256"`
			PixelValues        []float64    `json:"pixel_values"`
			PixelValuesSamples [][2]float64 `json:"pixel_values_samples"`
		}
	}
}

func readManifest(t *testing.T) *manifest {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(goldenDir, "manifest.json"))
	if err != nil {
		t.Fatalf("reading golden manifest: %v", err)
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("parsing golden manifest: %v", err)
	}
	if len(m.Images) < 14 || len(m.Families) < 2 {
		t.Fatalf("golden manifest holds %d images and %d families", len(m.Images), len(m.Families))
	}
	return &m
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestGoldenPixelValues runs decode, resize, normalise and patchify on every golden image and
// compares the result with the processor's pixel_values bit for bit.
func TestGoldenPixelValues(t *testing.T) {
	m := readManifest(t)
	images := map[string]*pixels.RGB{}
	lim := imageio.Limits{MaxBytes: 32 << 20, MaxPixels: 64 << 20, MaxAspect: 200}
	for _, im := range m.Images {
		data, err := os.ReadFile(filepath.Join(goldenDir, "images", im.File))
		if err != nil {
			t.Fatalf("reading %s: %v", im.File, err)
		}
		if hexSum(data) != im.SHA256 {
			t.Fatalf("%s: bytes differ from the manifest's", im.File)
		}
		hdr, err := imageio.Inspect(data, lim)
		if err != nil {
			// smart_resize refuses the same images (aspect over 200); the cases check that.
			if imageio.CodeOf(err) != imageio.CodeAspect {
				t.Fatalf("%s: %v", im.File, err)
			}
			continue
		}
		img, err := imageio.Decode(context.Background(), data, hdr)
		if err != nil {
			t.Fatalf("%s: %v", im.File, err)
		}
		if img.W != im.Width || img.H != im.Height || hexSum(img.Pix) != im.RGBSHA256 {
			t.Fatalf("%s: decoded RGB differs from PIL's", im.File)
		}
		images[im.File] = img
	}

	for name, fam := range m.Families {
		cfg := fam.PreprocessorConfig
		if cfg.Resample != 3 {
			t.Fatalf("%s: resample %d, the test expects bicubic", name, cfg.Resample)
		}
		norm := pixels.Norm{Rescale: cfg.RescaleFactor, Flavor: pixels.Torch}
		copy(norm.Mean[:], cfg.ImageMean)
		copy(norm.Std[:], cfg.ImageStd)
		table, err := norm.Table()
		if err != nil {
			t.Fatal(err)
		}
		layout := pixels.Patches{Size: cfg.PatchSize, Temporal: cfg.TemporalPatchSize, Merge: cfg.MergeSize}
		var checked int
		for _, c := range fam.Cases {
			t.Run(name+"/"+c.File, func(t *testing.T) {
				src, ok := images[c.File]
				if c.Error != nil {
					if ok {
						t.Fatalf("the processor refuses it (%s) but Inspect accepted it", c.Error.Type)
					}
					return
				}
				if !ok {
					t.Fatalf("no decoded image")
				}
				dst := &pixels.RGB{W: c.ResizedWidth, H: c.ResizedHeight}
				if err := pixels.Resize(dst, src, pixels.Torch, pixels.Bicubic); err != nil {
					t.Fatal(err)
				}
				pv, gh, gw, err := pixels.NormalizePatchify(nil, dst, table, layout)
				if err != nil {
					t.Fatal(err)
				}
				if gh != c.ImageGridTHW[1] || gw != c.ImageGridTHW[2] || len(pv) != c.PixelValuesShape[0]*c.PixelValuesShape[1] ||
					layout.RowLen() != c.PixelValuesShape[1] {
					t.Fatalf("grid %dx%d (%d values), want %v %v", gh, gw, len(pv), c.ImageGridTHW, c.PixelValuesShape)
				}
				var maxDiff float64
				for _, s := range c.PixelValuesSamples {
					maxDiff = math.Max(maxDiff, math.Abs(float64(pv[int(s[0])])-s[1]))
				}
				for i, v := range c.PixelValues {
					maxDiff = math.Max(maxDiff, math.Abs(float64(pv[i])-v))
				}
				if maxDiff > 1e-6 {
					t.Errorf("max |diff| %g over the stored values", maxDiff)
				}
				buf := make([]byte, 4*len(pv))
				for i, v := range pv {
					binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
				}
				if got := hexSum(buf); got != c.PixelValuesSHA256 {
					t.Errorf("pixel_values sha256 %s, want %s", got[:12], c.PixelValuesSHA256[:12])
				}
				checked++
			})
		}
		if checked < 10 {
			t.Errorf("%s: only %d cases checked", name, checked)
		}
	}
}
