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
	"time"

	"github.com/iris-vlm/iris/core/internal/pixels"
	"github.com/iris-vlm/iris/core/internal/prep"
	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

// phi4GoldenDir holds transformers 5.17's Phi-4-multimodal preprocessing of the golden images
// (scripts/reference/golden_phi4.py, `just golden-phi4`).
const phi4GoldenDir = "testdata/golden_phi4"

// A Phi-4 view: 448×448 pixels, 32×32 patches of 14, 3·14·14 floats a row.
const (
	phiCrop  = 448
	phiPatch = 14
	phiSide  = phiCrop / phiPatch
	phiRow   = 3 * phiPatch * phiPatch
)

type phiManifest struct {
	Question string
	System   string
	Images   []goldenImage
	Cases    []phiCase
}

type phiCase struct {
	Image        string
	Params       map[string]any
	NumImgTokens int `json:"num_img_tokens"`
	Views        []struct {
		// SHA256 is the sha256 of the view's [3, 448, 448] float32 image_pixel_values.
		SHA256  string
		Mask    abi.Rect
		Samples [][2]float64
	}
	ImageFirst       [][2]int32 `json:"image_first"`
	TextFirst        [][2]int32 `json:"text_first"`
	SystemImageFirst [][2]int32 `json:"system_image_first"`
}

func readPhiManifest(t *testing.T) *phiManifest {
	t.Helper()
	var m phiManifest
	readGoldenManifest(t, phi4GoldenDir, "Phi-4", &m)
	if len(m.Images) < 24 || len(m.Cases) < len(m.Images) {
		t.Fatalf("Phi-4 golden manifest: %d images, %d cases", len(m.Images), len(m.Cases))
	}
	return &m
}

// newPhi4 returns a Preparer of the phi4_multimodal plugin, compiled from source and run by the
// real host, with Phi-4's tokenizer; wrap, when set, stands between the plugin and prep.
func newPhi4(tb testing.TB, wrap func(prep.Planner) prep.Planner) *prep.Preparer {
	tb.Helper()
	return familyPreparer(tb, "phi4_multimodal", "phi4",
		"Phi-4's tokenizer (`just setup` writes it with scripts/reference/phi4_tokenizer.py)", wrap)
}

// TestGoldenPhi4 runs the whole pipeline (the phi4_multimodal plugin's plan and frame under
// wazero, the views executed natively: the uint8 bilinear resize, the white pad, the crops, the
// float bicubic global view; Phi-4's tokenizer) on every golden image and compares it with
// transformers' Phi4MultimodalProcessor: each view's pixel values bit for bit (sha256 of its
// [3, 448, 448] float32, rebuilt from the view's patch rows, and the sampled values), each
// view's patch mask, num_img_tokens, and the input_ids with the image before the question,
// after it, and after a client system message.
func TestGoldenPhi4(t *testing.T) {
	m := readPhiManifest(t)
	inputs := goldenInputs(t, m.Images, nil)
	pr := newPhi4(t, nil)
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
				system    *string
				want      [][2]int32
			}{
				{"image first", false, nil, c.ImageFirst},
				{"text first", true, nil, c.TextFirst},
				{"system", false, &m.System, c.SystemImageFirst},
			} {
				in.TextFirst, in.System = v.textFirst, v.system
				res, err := pr.Prepare(context.Background(), in)
				if err != nil {
					t.Fatalf("%s: %v", v.name, err)
				}
				if got := rle(res.InputIDs); !slices.Equal(got, v.want) {
					t.Errorf("%s: input_ids (run-length encoded)\n got %v\nwant %v", v.name, got, v.want)
				}
				if v.name == "image first" {
					for _, d := range checkPhiViews(res, &c) {
						t.Error(d)
					}
				}
				res.Release()
			}
		})
	}
}

// viewCHW rebuilds view v's [3, 448, 448] image from its patch rows (the tiles layout: 32×32
// patches in raster order, each C × 14 × 14): the processor's image_pixel_values[0, v].
func viewCHW(pv []float32, v int) []float32 {
	per := phiSide * phiSide * phiRow
	rows := pv[v*per : (v+1)*per]
	out := make([]float32, 3*phiCrop*phiCrop)
	for p := range phiSide * phiSide {
		py, px := p/phiSide, p%phiSide
		row := rows[p*phiRow : (p+1)*phiRow]
		for c := range 3 {
			for y := range phiPatch {
				o := c*phiCrop*phiCrop + (py*phiPatch+y)*phiCrop + px*phiPatch
				copy(out[o:o+phiPatch], row[c*phiPatch*phiPatch+y*phiPatch:])
			}
		}
	}
	return out
}

// checkPhiViews compares a prepared Phi-4 image with the processor's views, masks and token
// count, returning the differences.
func checkPhiViews(res *prep.Result, c *phiCase) []string {
	n := len(c.Views)
	var diffs []string
	if want := (abi.Grid{T: n, H: phiSide, W: phiSide}); res.Grid != want {
		diffs = append(diffs, fmt.Sprintf("grid %+v, want %+v", res.Grid, want))
	}
	if res.Rows != n*phiSide*phiSide || res.Cols != phiRow || len(res.PixelValues) != res.Rows*res.Cols {
		return append(diffs, fmt.Sprintf("pixel_values [%d, %d] (%d values), want %d views of [%d, %d]", res.Rows, res.Cols,
			len(res.PixelValues), n, phiSide*phiSide, phiRow))
	}
	if res.ImageTokens != c.NumImgTokens || len(res.ImageSpans) != 1 || res.ImageSpans[0].Len != c.NumImgTokens {
		diffs = append(diffs, fmt.Sprintf("image tokens %d, spans %+v; want one span of num_img_tokens %d",
			res.ImageTokens, res.ImageSpans, c.NumImgTokens))
	}
	for i, view := range c.Views {
		chw := viewCHW(res.PixelValues, i)
		var maxDiff float64
		for _, s := range view.Samples {
			maxDiff = math.Max(maxDiff, math.Abs(float64(chw[int(s[0])])-s[1]))
		}
		sum := sha256.Sum256(float32Bytes(chw))
		if got := hex.EncodeToString(sum[:]); got != view.SHA256 {
			diffs = append(diffs, fmt.Sprintf("view %d of %d: sha256 %s, want %s (max |diff| %g over %d samples)", i, n,
				got[:16], view.SHA256[:16], maxDiff, len(view.Samples)))
		}
		mask := abi.Rect{Width: phiSide, Height: phiSide}
		if res.Masks != nil {
			mask = res.Masks[i]
		}
		if mask != view.Mask {
			diffs = append(diffs, fmt.Sprintf("view %d of %d: patch mask %+v, want %+v", i, n, mask, view.Mask))
		}
	}
	return append(diffs, checkPhiTiles(res, c)...)
}

// checkPhiTiles checks the views' places on the canvas (Result.Tiles): none for one crop; else
// the global view the whole canvas and the crops whole views row-major on a grid, whose kept
// cells (the masks' (n+1)/2 a side: mask[0::2, 0::2]), a separator after each row, the global
// separator and the global view's 16 rows of 16 cells and a separator give num_img_tokens.
func checkPhiTiles(res *prep.Result, c *phiCase) []string {
	crops := len(c.Views) - 1
	cols := 1
	if res.Tiles == nil {
		if crops > 1 {
			return []string{fmt.Sprintf("%d crops without their places on the canvas", crops)}
		}
	} else {
		if len(res.Tiles) != len(c.Views) || res.Tiles[0] != (abi.Rect{}) {
			return []string{fmt.Sprintf("tiles %+v: one a view, the global view's the zero rectangle", res.Tiles)}
		}
		for _, r := range res.Tiles[1:] {
			cols = max(cols, r.X/phiSide+1)
		}
		for i, r := range res.Tiles[1:] {
			if want := (abi.Rect{X: i % cols * phiSide, Y: i / cols * phiSide, Width: phiSide, Height: phiSide}); r != want {
				return []string{fmt.Sprintf("crop %d at %+v, want %+v (row-major, %d crops wide)", i, r, want, cols)}
			}
		}
	}
	rows := crops / cols
	kept := func(n int) int { return (n + 1) / 2 }
	h, w := 0, 0
	for r := range rows {
		h += kept(c.Views[1+r*cols].Mask.Height)
	}
	for k := range cols {
		w += kept(c.Views[1+k].Mask.Width)
	}
	side := phiSide / 2
	if got := h*(w+1) + 1 + side*(side+1); got != c.NumImgTokens {
		return []string{fmt.Sprintf("%dx%d crops laid out as %d tokens, num_img_tokens %d", rows, cols, got, c.NumImgTokens)}
	}
	return nil
}

// mutated is a planner that changes the plugin's plans before prep executes them.
type mutated struct {
	prep.Planner
	mutate func(*abi.Plan)
}

func (m mutated) Plan(ctx context.Context, img abi.ImageHeader, params map[string]any) (abi.Plan, error) {
	p, err := m.Planner.Plan(ctx, img, params)
	if err == nil {
		m.mutate(&p)
	}
	return p, err
}

// TestGoldenPhi4CatchesMutations: the goldens fail a preprocessing that is wrong in any of the
// ways the reference invites: the global view resized in 8 bits before normalisation (bicubic,
// antialiased, as a thumbnail usually is) instead of in float after it, the crops resized
// bicubic instead of bilinear, padded black instead of white, or left unmasked.
func TestGoldenPhi4CatchesMutations(t *testing.T) {
	m := readPhiManifest(t)
	inputs := goldenInputs(t, m.Images, nil)
	var c *phiCase
	for i := range m.Cases {
		if m.Cases[i].Image == "synth_500x300" && len(m.Cases[i].Params) == 0 {
			c = &m.Cases[i]
		}
	}
	if c == nil {
		t.Fatal("no default case of synth_500x300 in the manifest")
	}
	in := inputs[c.Image]
	in.Question = m.Question
	for _, tc := range []struct {
		name   string
		mutate func(*abi.Plan)
		view   int // a view that must differ
	}{
		{"crops resized bicubic", func(p *abi.Plan) {
			for i := range p.Views {
				r := *p.Views[i].Resize
				r.Filter = abi.FilterBicubic
				p.Views[i].Resize = &r
			}
		}, 1},
		{"crops padded black", func(p *abi.Plan) {
			for i := range p.Views {
				if d := p.Views[i].Pad; d != nil {
					black := *d
					black.Color = abi.RGB{}
					p.Views[i].Pad = &black
				}
			}
		}, 2},
		{"crops left unmasked", func(p *abi.Plan) {
			for i := range p.Views {
				p.Views[i].Mask = nil
			}
		}, 2},
		{"global view without the float resize: the source resized to 448x448", func(p *abi.Plan) {
			g := &p.Views[0]
			g.Resize = &abi.Resize{Width: phiCrop, Height: phiCrop, Filter: abi.FilterBicubic, Flavor: abi.FlavorTorchvision, Antialias: true}
			g.Pad, g.FloatResize = nil, nil
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr := newPhi4(t, func(p prep.Planner) prep.Planner { return mutated{Planner: p, mutate: tc.mutate} })
			res, err := pr.Prepare(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Release()
			diffs := checkPhiViews(res, c)
			hit := false
			for _, d := range diffs {
				hit = hit || strings.HasPrefix(d, fmt.Sprintf("view %d of", tc.view))
			}
			if !hit {
				t.Errorf("the goldens did not catch it on view %d: %v", tc.view, diffs)
			}
		})
	}

	// The global view done in 8 bits before normalisation: the padded canvas resized bicubic
	// with antialiasing (torch's uint8 path), then normalised.
	res, err := newPhi4(t, nil).Prepare(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	g := res.Plan.Views[0]
	canvas := pixels.NewRGB(g.Resize.Width, g.Resize.Height)
	if err := pixels.Resize(canvas, in.Image, pixels.Torch, pixels.Bilinear); err != nil {
		t.Fatal(err)
	}
	padded := pixels.NewRGB(canvas.W+g.Pad.Right, canvas.H+g.Pad.Bottom)
	if err := pixels.Pad(padded, canvas, 0, 0, g.Pad.Color); err != nil {
		t.Fatal(err)
	}
	small := &pixels.RGB{W: phiCrop, H: phiCrop}
	if err := pixels.Resize(small, padded, pixels.Torch, pixels.Bicubic); err != nil {
		t.Fatal(err)
	}
	table, err := pixels.Norm{Rescale: 1.0 / 255, Mean: [3]float64{0.5, 0.5, 0.5}, Std: [3]float64{0.5, 0.5, 0.5}, Flavor: pixels.Torch}.Table()
	if err != nil {
		t.Fatal(err)
	}
	chw, err := pixels.NormalizeCHW(nil, small, table)
	if err != nil {
		t.Fatal(err)
	}
	if got := hexSum(float32Bytes(chw)); got == c.Views[0].SHA256 {
		t.Error("a global view resized in 8 bits before normalisation matches the golden")
	}
	if got := hexSum(float32Bytes(viewCHW(res.PixelValues, 0))); got != c.Views[0].SHA256 {
		t.Errorf("the unmutated global view: sha256 %s, want %s", got[:16], c.Views[0].SHA256[:16])
	}
}

// BenchmarkPreparePhi4 runs the whole pipeline on the 426x320 photo of the latency workload (one
// crop and the global view) and on a 1600x1200 synthetic image (12 crops and the global view,
// shrunk in float from the 1792x1344 canvas), and reports the median of each stage.
//
//	CGO_LDFLAGS=-L$PWD/.build/lib go test -run '^$' -bench PreparePhi4 -benchtime 50x ./core/internal/prep
func BenchmarkPreparePhi4(b *testing.B) {
	pr := newPhi4(b, nil)
	photo := decodePhoto(b)
	photo.Question = "What is the main object in this image? Answer in one word."
	large := prep.Input{Image: synthRGB(1600, 1200, 3), Format: "png", Question: photo.Question}
	for _, c := range []struct {
		name string
		in   prep.Input
	}{{"photo_426x320", photo}, {"synth_1600x1200", large}} {
		b.Run(c.name, func(b *testing.B) {
			var plan, pix, frame, tok []time.Duration
			for b.Loop() {
				res, err := pr.Prepare(context.Background(), c.in)
				if err != nil {
					b.Fatal(err)
				}
				plan = append(plan, res.Timings.Plan)
				pix = append(pix, res.Timings.Pixels)
				frame = append(frame, res.Timings.Frame)
				tok = append(tok, res.Timings.Tokenize)
				res.Release()
			}
			for _, s := range []struct {
				name string
				d    []time.Duration
			}{{"plan", plan}, {"pixels", pix}, {"frame", frame}, {"tokenize", tok}} {
				slices.Sort(s.d)
				b.ReportMetric(float64(s.d[len(s.d)/2].Microseconds()), s.name+"-p50-µs")
			}
		})
	}
}
