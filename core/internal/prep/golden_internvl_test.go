package prep_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/iris-vlm/iris/core/internal/pixels"
	"github.com/iris-vlm/iris/core/internal/prep"
	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

// internvlGoldenDir holds transformers 5.17's InternVL preprocessing of the golden images
// (scripts/reference/golden_internvl.py, `just golden-internvl`).
const internvlGoldenDir = "testdata/golden_internvl"

// The InternVL3 tile: 448×448 pixels, 32×32 patches of 14, 3·14·14 floats a row.
const (
	ivTile  = 448
	ivPatch = 14
	ivSide  = ivTile / ivPatch
	ivRow   = 3 * ivPatch * ivPatch
)

type ivManifest struct {
	Question string
	System   string
	Images   []goldenImage
	Cases    []ivCase
}

type ivCase struct {
	Image  string
	Params map[string]any
	Tiles  []struct {
		SHA256  string
		Samples [][2]float64
	}
	// The prompt ids run-length encoded: [id, count] pairs.
	ImageFirst       [][2]int32 `json:"image_first"`
	TextFirst        [][2]int32 `json:"text_first"`
	SystemImageFirst [][2]int32 `json:"system_image_first"`
}

// synthRGB is golden_internvl.py's synth(): pixels from integer arithmetic only, so the
// synthetic images need no committed file.
func synthRGB(w, h, seed int) *pixels.RGB {
	m := pixels.NewRGB(w, h)
	x0, y0 := w/4, h/3
	for y := range h {
		for x := range w {
			r := (x*255/max(w-1, 1) + 37*seed) % 256
			g := (y*255/max(h-1, 1) + 11*seed) % 256
			b := ((x+2*y)*3 + ((x/7+y/7)%2)*90 + 5*seed) % 256
			if x >= x0 && x < x0+max(w/8, 1) && y >= y0 && y < y0+max(h/10, 1) {
				r, g, b = 250, 20, 10
			}
			o := 3 * (y*w + x)
			m.Pix[o], m.Pix[o+1], m.Pix[o+2] = byte(r), byte(g), byte(b)
		}
	}
	return m
}

func rle(ids []int32) [][2]int32 {
	var out [][2]int32
	for _, id := range ids {
		if n := len(out); n > 0 && out[n-1][0] == id {
			out[n-1][1]++
			continue
		}
		out = append(out, [2]int32{id, 1})
	}
	return out
}

// float32Bytes views float32 values as their little-endian bytes without copying (every
// platform Iris builds for is little-endian): hashing 535 tiles value by value is slow under -race.
func float32Bytes(v []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

// newInternVL returns a Preparer of the internvl plugin, compiled from source and run by the
// real host, with the InternVL3-hf tokenizer.
func newInternVL(tb testing.TB) *prep.Preparer {
	tb.Helper()
	return familyPreparer(tb, "internvl", "internvl3",
		"the InternVL3-hf tokenizer (`just setup` writes it with scripts/reference/internvl_tokenizer.py)", nil)
}

// BenchmarkPrepareInternVL runs the whole pipeline on the 426x320 photo of the latency workload
// with the default tiling (12 tiles and the thumbnail) and with max_patches 1 (one 448x448
// resize), and reports the median of each stage besides the mean of the whole.
//
//	CGO_LDFLAGS=-L$PWD/.build/lib go test -run '^$' -bench PrepareInternVL -benchtime 100x ./core/internal/prep
func BenchmarkPrepareInternVL(b *testing.B) {
	pr := newInternVL(b)
	photo := decodePhoto(b)
	photo.Question = "What is the main object in this image? Answer in one word."
	for _, c := range []struct {
		name   string
		params map[string]any
	}{{"13_tiles", nil}, {"max_patches_1", map[string]any{"max_patches": 1}}} {
		b.Run(c.name, func(b *testing.B) {
			in := photo
			in.Params = c.params
			var plan, pix, frame, tok []time.Duration
			for b.Loop() {
				res, err := pr.Prepare(context.Background(), in)
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

// TestGoldenInternVL runs the whole pipeline (the internvl plugin's plan and frame under wazero,
// the views executed natively, the InternVL3-hf tokenizer) on every golden image at the default
// tiling, at max_patches 1 and at other params, and compares it with transformers'
// InternVLProcessor: the number of tiles, each tile's pixel_values bit for bit (sha256 of its
// float32 rows, the processor's [3, 448, 448] tile cut into raster 14×14 patches, and the sampled
// values), and the input_ids with the image before
// the question, after it, and after a client system message.
func TestGoldenInternVL(t *testing.T) {
	var m ivManifest
	readGoldenManifest(t, internvlGoldenDir, "InternVL", &m)
	if len(m.Images) < 18 || len(m.Cases) < 2*len(m.Images) {
		t.Fatalf("InternVL golden manifest: %d images, %d cases", len(m.Images), len(m.Cases))
	}
	pr := newInternVL(t)
	inputs := goldenInputs(t, m.Images, nil)
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
					checkTiles(t, res, &c)
				}
				res.Release()
			}
		})
	}
}

// checkTiles compares the pixel tensor of a prepared InternVL image with the processor's tiles.
func checkTiles(t *testing.T, res *prep.Result, c *ivCase) {
	t.Helper()
	n := len(c.Tiles)
	if want := (abi.Grid{T: n, H: ivSide, W: ivSide}); res.Grid != want {
		t.Errorf("grid %+v, want %+v", res.Grid, want)
	}
	if res.Rows != n*ivSide*ivSide || res.Cols != ivRow || len(res.PixelValues) != res.Rows*res.Cols {
		t.Fatalf("pixel_values [%d, %d] (%d values), want %d tiles of [%d, %d]", res.Rows, res.Cols,
			len(res.PixelValues), n, ivSide*ivSide, ivRow)
	}
	if res.ImageTokens != 256*n || len(res.ImageSpans) != 1 || res.ImageSpans[0].Len != 256*n {
		t.Errorf("image tokens %d, spans %+v; want one span of %d", res.ImageTokens, res.ImageSpans, 256*n)
	}
	per := ivSide * ivSide * ivRow
	for i, tile := range c.Tiles {
		rows := res.PixelValues[i*per : (i+1)*per]
		var maxDiff float64
		for _, s := range tile.Samples {
			maxDiff = math.Max(maxDiff, math.Abs(float64(rows[int(s[0])])-s[1]))
		}
		sum := sha256.Sum256(float32Bytes(rows))
		if got := hex.EncodeToString(sum[:]); got != tile.SHA256 {
			t.Errorf("tile %d of %d: sha256 %s, want %s (max |diff| %g over %d samples)", i, n, got[:16],
				tile.SHA256[:16], maxDiff, len(tile.Samples))
		}
	}
}
