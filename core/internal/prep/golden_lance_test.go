package prep_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/iris-vlm/iris/core/internal/imageio"
	"github.com/iris-vlm/iris/core/internal/prep"
	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

// lanceGoldenDir holds Lance's official x2t preprocessing of the golden images
// (scripts/reference/golden_lance.py, `just golden-lance`).
const lanceGoldenDir = "testdata/golden_lance"

type lanceManifest struct {
	Images []lanceImage
	Cases  []lanceCase
}

// lanceImage is a golden image with the RGB Lance's loader reads from its file.
type lanceImage struct {
	goldenImage
	LanceRGBSHA256 string `json:"lance_rgb_sha256"`
	// HostRGBDiffers marks an image Lance's loader reads otherwise than transformers'
	// load_image (what Iris decodes): transparency composited on white, no EXIF transpose.
	HostRGBDiffers bool `json:"host_rgb_differs"`
}

type lanceCase struct {
	Image, Resolution, System, Question string
	Grid                                [3]int
	Rows                                [2]int
	SHA256                              string
	Samples                             [][2]float64
	InputIDs                            [][2]int32 `json:"input_ids"`
	// Bidirectional is the prefill split validation_und_KVcache runs with is_causal=False:
	// [start, end) of <|vision_start|> ... <|vision_end|> in the prompt.
	Bidirectional [2]int
	RNGOffset     bool `json:"rng_offset"`
}

func readLanceManifest(t *testing.T) *lanceManifest {
	t.Helper()
	var m lanceManifest
	readGoldenManifest(t, lanceGoldenDir, "Lance", &m)
	if len(m.Images) < 20 || len(m.Cases) < len(m.Images) {
		t.Fatalf("Lance golden manifest: %d images, %d cases", len(m.Images), len(m.Cases))
	}
	return &m
}

// newLance returns a Preparer of the lance plugin, compiled from source and run by the real
// host, with the Qwen tokenizer.
func newLance(tb testing.TB, wrap func(prep.Planner) prep.Planner) *prep.Preparer {
	tb.Helper()
	return familyPreparer(tb, "lance", "qwen3",
		"the real Qwen tokenizer (`just setup` fetches it)", wrap)
}

// lanceInputs decodes (or synthesises) every golden image as Lance's loader reads it
// (imageio.Options.OverWhite, the stored orientation), checking its RGB against the loader's.
func lanceInputs(t *testing.T, m *lanceManifest) map[string]prep.Input {
	t.Helper()
	return goldenInputs(t, m.Images, func(t *testing.T, im lanceImage) prep.Input {
		return decodeLance(t, filepath.Base(im.File), im.SHA256, im.LanceRGBSHA256)
	})
}

// decodeLance reads a golden image as Lance's get_video_tensor_online does: transparency
// composited on white, EXIF orientation not applied.
func decodeLance(t *testing.T, file, wantSHA, wantRGB string) prep.Input {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(goldenDir, "images", file))
	if err != nil {
		t.Fatal(err)
	}
	if hexSum(data) != wantSHA {
		t.Fatalf("%s: the file differs from the manifest's", file)
	}
	hdr, err := imageio.Inspect(data, imageio.Limits{MaxBytes: 32 << 20, MaxPixels: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	hdr = hdr.Stored()
	img, err := imageio.DecodeWith(context.Background(), data, hdr, imageio.Options{OverWhite: true})
	if err != nil {
		t.Fatal(err)
	}
	if hexSum(img.Pix) != wantRGB {
		t.Fatalf("%s: imageio's RGB (over white, stored orientation) differs from Lance's loader's", file)
	}
	return prep.Input{Image: img, Format: hdr.Format, HasAlpha: hdr.HasAlpha}
}

// checkLance compares a prepared image with the reference's x2t sample, returning the
// differences.
func checkLance(res *prep.Result, c *lanceCase) []string {
	var diffs []string
	if g := res.Grid; [3]int{g.T, g.H, g.W} != c.Grid {
		diffs = append(diffs, fmt.Sprintf("grid %+v, want %v", g, c.Grid))
	}
	if [2]int{res.Rows, res.Cols} != c.Rows || len(res.PixelValues) != res.Rows*res.Cols {
		return append(diffs, fmt.Sprintf("pixel rows [%d, %d], want %v", res.Rows, res.Cols, c.Rows))
	}
	var maxDiff float64
	for _, s := range c.Samples {
		maxDiff = math.Max(maxDiff, math.Abs(float64(res.PixelValues[int(s[0])])-s[1]))
	}
	sum := sha256.Sum256(float32Bytes(res.PixelValues))
	if got := hex.EncodeToString(sum[:]); got != c.SHA256 {
		diffs = append(diffs, fmt.Sprintf("pixel sha256 %s, want %s (max |diff| %g over %d samples)", got[:16], c.SHA256[:16],
			maxDiff, len(c.Samples)))
	}
	if got := rle(res.InputIDs); !slices.Equal(got, c.InputIDs) {
		diffs = append(diffs, fmt.Sprintf("input_ids (run-length encoded)\n got %v\nwant %v", got, c.InputIDs))
	}
	// the bidirectional span is the image span with its <|vision_start|> and <|vision_end|>
	if len(res.ImageSpans) != 1 {
		diffs = append(diffs, fmt.Sprintf("image spans %+v, want one", res.ImageSpans))
	} else if sp := res.ImageSpans[0]; [2]int{sp.Start - 1, sp.Start + sp.Len + 1} != c.Bidirectional {
		diffs = append(diffs, fmt.Sprintf("image span %+v framed by one token each side is not the reference's bidirectional split %v",
			sp, c.Bidirectional))
	}
	return diffs
}

func (c *lanceCase) input(in prep.Input) prep.Input {
	in.Question = c.Question
	if c.System != "" {
		in.System = &c.System
	}
	if c.Resolution != "image_512res" {
		in.Params = map[string]any{"resolution": c.Resolution}
	}
	return in
}

// TestGoldenLance runs the whole pipeline (the lance plugin's plan and frame under wazero, the
// view executed natively: the crop, PIL's bicubic resize to the bucket, DivisibleCrop's region,
// the normalisation, merge-block patches of two frames; the Qwen tokenizer) on every golden
// image and compares it with Lance's ValidationDataset.x2t_sample: the ViT's pixel rows bit for
// bit (sha256 and sampled values), the grid, the prompt ids validation_und_KVcache prefills and
// the bidirectional split. The images are read as Lance's loader reads them (the bundle's image
// options: transparency over white, the stored orientation); the two that transformers'
// load_image reads otherwise (rgba_256x192.png, exif6_240x180.jpg) are among them.
func TestGoldenLance(t *testing.T) {
	m := readLanceManifest(t)
	inputs := lanceInputs(t, m)
	differs := 0
	for _, im := range m.Images {
		if im.HostRGBDiffers {
			differs++
		}
	}
	if differs < 2 {
		t.Fatalf("only %d golden images that Lance's loader reads otherwise than load_image", differs)
	}
	pr := newLance(t, nil)
	for _, c := range m.Cases {
		name := c.Image + "/" + c.Resolution
		if c.System != "" || c.Question != "What is the main object in this image? Answer in one word." {
			name += fmt.Sprintf("/%q", c.System+"|"+c.Question)
		}
		t.Run(name, func(t *testing.T) {
			res, err := pr.Prepare(context.Background(), c.input(inputs[c.Image]))
			if err != nil {
				t.Fatal(err)
			}
			defer res.Release()
			for _, d := range checkLance(res, &c) {
				t.Error(d)
			}
		})
	}
}

// TestGoldenLanceCatchesMutations: the goldens fail a preprocessing wrong in the ways the
// reference invites: torchvision's antialiased resize instead of PIL's, the torchvision
// backend's fused normalisation instead of to_tensor then Normalize, DivisibleCrop at the
// corner, RandomResizedCrop's box ignored (the whole image resized to the bucket), and one
// frame instead of two.
func TestGoldenLanceCatchesMutations(t *testing.T) {
	m := readLanceManifest(t)
	inputs := lanceInputs(t, m)
	var c *lanceCase
	for i := range m.Cases {
		if m.Cases[i].Image == "synth_1000x570" && m.Cases[i].Resolution == "image_512res" {
			c = &m.Cases[i]
		}
	}
	if c == nil {
		t.Fatal("no image_512res case of synth_1000x570 in the manifest")
	}
	in := c.input(inputs[c.Image])
	for _, tc := range []struct {
		name   string
		mutate func(*abi.View)
	}{
		{"torchvision's resize", func(v *abi.View) { r := *v.Resize; r.Flavor = abi.FlavorTorchvision; v.Resize = &r }},
		{"fused normalisation", func(v *abi.View) { v.Normalize.Flavor = abi.FlavorTorchvision }},
		{"DivisibleCrop at the corner", func(v *abi.View) { r := *v.Region; r.X, r.Y = 0, 0; v.Region = &r }},
		{"no crop before the resize", func(v *abi.View) { v.Crop = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr := newLance(t, func(p prep.Planner) prep.Planner {
				return mutated{Planner: p, mutate: func(p *abi.Plan) { tc.mutate(&p.Views[0]) }}
			})
			res, err := pr.Prepare(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Release()
			if len(checkLance(res, c)) == 0 {
				t.Error("the goldens did not catch it")
			}
		})
	}
	// one frame: the rows would be half as long; the second frame's values are the first's
	res, err := newLance(t, nil).Prepare(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	row := res.PixelValues[:res.Cols]
	for ch := range 3 {
		a := row[ch*2*196 : ch*2*196+196]
		b := row[ch*2*196+196 : (ch+1)*2*196]
		if !slices.Equal(a, b) {
			t.Fatalf("channel %d: the two frames of a row differ", ch)
		}
	}
	if res.Cols != 3*2*14*14 {
		t.Errorf("a row holds %d values, want 3 channels x 2 frames x 14 x 14", res.Cols)
	}
}
