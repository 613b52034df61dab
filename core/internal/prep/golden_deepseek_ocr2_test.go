package prep_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/core/internal/prep"
	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

// dsGoldenDir holds transformers 5.17's DeepSeek-OCR-2 preprocessing of the golden images
// (scripts/reference/golden_deepseek_ocr2.py, `just golden-deepseek-ocr2`).
const dsGoldenDir = "testdata/golden_deepseek_ocr2"

// A DeepSeek-OCR-2 view: a 1024×1024 canvas of 64×64 patches of 16, 3·16·16 floats a row; a
// tile is its 768×768 corner (48×48 patches).
const (
	dsCanvas = 1024
	dsTile   = 768
	dsPatch  = 16
	dsSide   = dsCanvas / dsPatch
	dsRow    = 3 * dsPatch * dsPatch
)

type dsManifest struct {
	Question string
	Images   []goldenImage
	Cases    []dsCase
}

type dsCase struct {
	Image       string
	Params      map[string]any
	Tiles       int
	ImageTokens int `json:"image_tokens"`
	// Views are the tiles row-major ([3, 768, 768] each), then the global view ([3, 1024, 1024]).
	Views []struct {
		SHA256  string
		Samples [][2]float64
	}
	ImageFirst [][2]int32 `json:"image_first"`
	TextFirst  [][2]int32 `json:"text_first"`
}

func readDSManifest(t *testing.T) *dsManifest {
	t.Helper()
	var m dsManifest
	readGoldenManifest(t, dsGoldenDir, "DeepSeek-OCR-2", &m)
	if len(m.Images) < 20 || len(m.Cases) < 20 {
		t.Fatalf("DeepSeek-OCR-2 golden manifest: %d images, %d cases", len(m.Images), len(m.Cases))
	}
	return &m
}

// newDeepseekOCR2 returns a Preparer of the deepseek_ocr2 plugin, compiled from source and run
// by the real host, with DeepSeek-OCR-2's tokenizer; wrap, when set, stands between the plugin
// and prep.
func newDeepseekOCR2(tb testing.TB, wrap func(prep.Planner) prep.Planner) *prep.Preparer {
	tb.Helper()
	return familyPreparer(tb, "deepseek_ocr2", "deepseek_ocr2",
		"DeepSeek-OCR-2's tokenizer (`just setup` writes it with scripts/reference/deepseek_ocr2_tokenizer.py)", wrap)
}

// TestGoldenDeepseekOCR2 runs the whole pipeline (the deepseek_ocr2 plugin's plan and frame under
// wazero, the views executed natively: the tiles' uint8 bicubic canvas, the global view's resize
// and centred grey pad; the tokenizer) on every golden image and compares it with transformers'
// DeepseekOcr2Processor: each tile's pixel_values_local and the global view's pixel_values bit for
// bit (sha256 of the float32 view, rebuilt from its patch rows, and the sampled values), the tile
// count, and the input_ids with the image before the question and after it.
func TestGoldenDeepseekOCR2(t *testing.T) {
	m := readDSManifest(t)
	inputs := goldenInputs(t, m.Images, nil)
	pr := newDeepseekOCR2(t, nil)
	for _, c := range m.Cases {
		name := c.Image
		if len(c.Params) > 0 {
			name += fmt.Sprint(c.Params)
		}
		t.Run(name, func(t *testing.T) {
			in, ok := inputs[c.Image]
			if !ok {
				t.Fatalf("no image %s", c.Image)
			}
			in.Question, in.Params = m.Question, c.Params
			for _, v := range []struct {
				name      string
				textFirst bool
				want      [][2]int32
			}{{"image first", false, c.ImageFirst}, {"text first", true, c.TextFirst}} {
				in.TextFirst = v.textFirst
				res, err := pr.Prepare(context.Background(), in)
				if err != nil {
					t.Fatalf("%s: %v", v.name, err)
				}
				if got := rle(res.InputIDs); !slices.Equal(got, v.want) {
					t.Errorf("%s: input_ids (run-length encoded)\n got %v\nwant %v", v.name, got, v.want)
				}
				if !v.textFirst {
					for _, d := range checkDSViews(res, &c) {
						t.Error(d)
					}
				}
				res.Release()
			}
		})
	}
}

// dsViewCHW rebuilds view v's [3, side, side] image from the top-left side/16 × side/16 patches
// of its 64×64 patch rows (the tiles layout: patches in raster order, each C × 16 × 16).
func dsViewCHW(pv []float32, v, side int) []float32 {
	per := dsSide * dsSide * dsRow
	rows := pv[v*per : (v+1)*per]
	n := side / dsPatch
	out := make([]float32, 3*side*side)
	for py := range n {
		for px := range n {
			row := rows[(py*dsSide+px)*dsRow:]
			for c := range 3 {
				for y := range dsPatch {
					o := c*side*side + (py*dsPatch+y)*side + px*dsPatch
					copy(out[o:o+dsPatch], row[c*dsPatch*dsPatch+y*dsPatch:(c*dsPatch+y+1)*dsPatch])
				}
			}
		}
	}
	return out
}

// checkDSViews compares a prepared DeepSeek-OCR-2 image with the processor's views and token
// count, returning the differences.
func checkDSViews(res *prep.Result, c *dsCase) []string {
	n := len(c.Views)
	var diffs []string
	if n != c.Tiles+1 {
		return []string{fmt.Sprintf("the golden has %d views for %d tiles", n, c.Tiles)}
	}
	if want := (abi.Grid{T: n, H: dsSide, W: dsSide}); res.Grid != want {
		diffs = append(diffs, fmt.Sprintf("grid %+v, want %+v", res.Grid, want))
	}
	if res.Rows != n*dsSide*dsSide || res.Cols != dsRow || len(res.PixelValues) != res.Rows*res.Cols {
		return append(diffs, fmt.Sprintf("pixel_values [%d, %d] (%d values), want %d views of [%d, %d]", res.Rows, res.Cols,
			len(res.PixelValues), n, dsSide*dsSide, dsRow))
	}
	if res.ImageTokens != c.ImageTokens || len(res.ImageSpans) != 1 || res.ImageSpans[0].Len != c.ImageTokens {
		diffs = append(diffs, fmt.Sprintf("image tokens %d, spans %+v; want one span of %d", res.ImageTokens, res.ImageSpans, c.ImageTokens))
	}
	for i, view := range c.Views {
		side, mask := dsTile, abi.Rect{Width: dsTile / dsPatch, Height: dsTile / dsPatch}
		if i == n-1 {
			side, mask = dsCanvas, abi.Rect{Width: dsSide, Height: dsSide}
		}
		chw := dsViewCHW(res.PixelValues, i, side)
		var maxDiff float64
		for _, s := range view.Samples {
			maxDiff = math.Max(maxDiff, math.Abs(float64(chw[int(s[0])])-s[1]))
		}
		sum := sha256.Sum256(float32Bytes(chw))
		if got := hex.EncodeToString(sum[:]); got != view.SHA256 {
			diffs = append(diffs, fmt.Sprintf("view %d of %d: sha256 %s, want %s (max |diff| %g over %d samples)", i, n,
				got[:16], view.SHA256[:16], maxDiff, len(view.Samples)))
		}
		got := abi.Rect{Width: dsSide, Height: dsSide}
		if res.Masks != nil {
			got = res.Masks[i]
		}
		if got != mask {
			diffs = append(diffs, fmt.Sprintf("view %d of %d: patch mask %+v, want %+v", i, n, got, mask))
		}
	}
	return diffs
}

// TestGoldenDeepseekOCR2CatchesMutations: the goldens fail a preprocessing that is wrong in any of
// the ways the reference invites: tiles resized bilinear, the global view resized as upstream's
// remote code does (PIL), padded black, or padded all on one side instead of centred.
func TestGoldenDeepseekOCR2CatchesMutations(t *testing.T) {
	m := readDSManifest(t)
	inputs := goldenInputs(t, m.Images, nil)
	var c *dsCase
	for i := range m.Cases {
		if m.Cases[i].Image == "synth_1700x2200" && len(m.Cases[i].Params) == 0 {
			c = &m.Cases[i]
		}
	}
	if c == nil || c.Tiles != 6 {
		t.Fatal("no default case of synth_1700x2200 (6 tiles) in the manifest")
	}
	in := inputs[c.Image]
	in.Question = m.Question
	global := len(c.Views) - 1
	for _, tc := range []struct {
		name   string
		mutate func(*abi.Plan)
		view   int // a view that must differ
	}{
		{"tiles resized bilinear", func(p *abi.Plan) {
			for i := range p.Views[:global] {
				r := *p.Views[i].Resize
				r.Filter = abi.FilterBilinear
				p.Views[i].Resize = &r
			}
		}, 0},
		{"global view resized with PIL's arithmetic (upstream's remote code)", func(p *abi.Plan) {
			r := *p.Views[global].Resize
			r.Flavor = abi.FlavorPIL
			p.Views[global].Resize = &r
		}, global},
		{"global view padded black", func(p *abi.Plan) {
			d := *p.Views[global].Pad
			d.Color = abi.RGB{}
			p.Views[global].Pad = &d
		}, global},
		{"global view padded on the right only", func(p *abi.Plan) {
			d := *p.Views[global].Pad
			d.Right, d.Left = d.Right+d.Left, 0
			p.Views[global].Pad = &d
		}, global},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr := newDeepseekOCR2(t, func(p prep.Planner) prep.Planner { return mutated{Planner: p, mutate: tc.mutate} })
			res, err := pr.Prepare(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Release()
			hit := false
			for _, d := range checkDSViews(res, c) {
				hit = hit || strings.HasPrefix(d, fmt.Sprintf("view %d of", tc.view))
			}
			if !hit {
				t.Errorf("the goldens did not catch it on view %d", tc.view)
			}
		})
	}
}
