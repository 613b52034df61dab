package core

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"slices"
	"sync"
	"testing"

	"github.com/iris-vlm/iris/bundles"
	"github.com/iris-vlm/iris/core/internal/enginetest/fixture"
	"github.com/iris-vlm/iris/core/internal/ml/cpu"
	"github.com/iris-vlm/iris/core/internal/model"
	"github.com/iris-vlm/iris/core/internal/models"
	"github.com/iris-vlm/iris/core/internal/pixels"
	"github.com/iris-vlm/iris/core/internal/plugin"
	"github.com/iris-vlm/iris/core/internal/plugin/plugintest"
	"github.com/iris-vlm/iris/core/internal/prep"
	"github.com/iris-vlm/iris/core/internal/tokenize"
	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

// recorder is the real engine with a window on what the runtime hands it: the image the vision
// tower gets and the prompt prefill gets.
type recorder struct {
	model.Model
	mu     sync.Mutex
	images []model.Image
	ids    []int32
}

func (r *recorder) EncodeVision(ctx context.Context, img model.Image) (*model.Embeddings, error) {
	r.mu.Lock()
	r.images = append(r.images, model.Image{Pixels: slices.Clone(img.Pixels), Grid: img.Grid})
	r.mu.Unlock()
	return r.Model.EncodeVision(ctx, img)
}

func (r *recorder) Prefill(ctx context.Context, seq model.Sequence, p model.Prompt) ([]float32, error) {
	r.mu.Lock()
	r.ids = slices.Clone(p.IDs)
	r.mu.Unlock()
	return r.Model.Prefill(ctx, seq, p)
}

func testPNG(t *testing.T, w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(3 * x), uint8(5 * y), uint8(x * y), 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestVisionTaskRunsViews: an ABI-2 plan of views (the test plugin's tiles and thumbnail, in
// Qwen2.5-VL's patch layout so the tiny checkpoint's vision tower can run them) goes through the
// runtime as one model.Image of Grid {T: views, H, W} whose pixels are the views' rows in order,
// and the frame's placeholders are that image's tokens.
func TestVisionTaskRunsViews(t *testing.T) {
	ctx := t.Context()
	dir := fixture.ModelDir("tiny-untied")
	host, err := plugin.NewHost(plugin.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Close(context.Background()) })
	plug, err := host.Load(ctx, "views", plugintest.Build(t, "internal/plugin/testdata/views"), "", plugin.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plug.Close(context.Background()) })
	tok, err := tokenize.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := models.Load(dir, be, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = loaded.Close() })

	data := testPNG(t, 64, 48)
	for _, tc := range []struct {
		name   string
		params map[string]any
		views  int
	}{
		{"two tiles and a thumbnail", map[string]any{"mode": "one_span", "tiles": int64(2)}, 3},
		{"one tile", map[string]any{"mode": "one_span", "tiles": int64(1)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr, err := prep.New(prep.Config{Plugin: plug, Tokenizer: tok, Params: tc.params})
			if err != nil {
				t.Fatal(err)
			}
			rec := &recorder{Model: loaded}
			task := &visionTask{name: "views", tok: tok, plug: plug, prep: pr, model: rec, stop: []int32{151645}}
			hdr, err := inspectImage(data, bundles.Image{MaxBytes: 1 << 20, MaxPixels: 1 << 20, MinSide: 1, MaxAspect: 200})
			if err != nil {
				t.Fatal(err)
			}
			img := newImage(hdr)
			decodeImage(ctx, data, hdr, decodeOptions(bundles.Image{}), img)
			close(img.decoded)
			res, err := task.Answer(ctx, &VisionInput{Question: "What is it?", Image: img, Params: Resolved{MaxTokens: 3, IgnoreEOS: true, TopP: 1}},
				func(Event) error { return nil })
			if err != nil {
				t.Fatal(err)
			}

			// what prep makes of the same request, independently
			want, err := pr.Prepare(ctx, prep.Input{Image: pixelsOf(t, img), Question: "What is it?"})
			if err != nil {
				t.Fatal(err)
			}
			if len(want.Plan.Views) != tc.views {
				t.Fatalf("the plan has %d views, want %d", len(want.Plan.Views), tc.views)
			}
			if len(rec.images) != 1 {
				t.Fatalf("the vision tower ran %d times, want once for the image of views", len(rec.images))
			}
			got := rec.images[0]
			if got.Grid != (model.Grid{T: tc.views, H: 4, W: 4}) || !slices.Equal(got.Pixels, want.PixelValues) {
				t.Errorf("engine image: grid %+v, %d pixel values (prep: %d); want grid {T: %d, H: 4, W: 4} and prep's pixels",
					got.Grid, len(got.Pixels), len(want.PixelValues), tc.views)
			}
			if !slices.Equal(rec.ids, want.InputIDs) || res.Usage.ImageTokens != 4*tc.views || len(res.TokenIDs) != 3 {
				t.Errorf("prompt %v (prep: %v), usage %+v, %d tokens", rec.ids, want.InputIDs, res.Usage, len(res.TokenIDs))
			}
			pad, _ := tok.TokenID("<|image_pad|>")
			if n := countOf(rec.ids, pad); n != 4*tc.views {
				t.Errorf("%d placeholders in the prompt, want %d", n, 4*tc.views)
			}
		})
	}
}

func pixelsOf(t *testing.T, img *Image) *pixels.RGB {
	t.Helper()
	return &pixels.RGB{W: img.Width, H: img.Height, Pix: img.Pix}
}

func countOf(ids []int32, id int32) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

// TestEmbedCacheKeySeesViews: two plans that differ only in one view's region are two cache
// entries (the key holds the whole plan, views included).
func TestEmbedCacheKeySeesViews(t *testing.T) {
	ec := &embedCache{ident: []byte("bundle")}
	view := abi.View{Region: &abi.Rect{X: 0, Y: 0, Width: 56, Height: 56}}
	a := &prep.Result{Plan: abi.Plan{Views: []abi.View{view}}}
	view.Region = &abi.Rect{X: 56, Y: 0, Width: 56, Height: 56}
	b := &prep.Result{Plan: abi.Plan{Views: []abi.View{view}}}
	ka, ok1 := ec.key("sha", a)
	kb, ok2 := ec.key("sha", b)
	if !ok1 || !ok2 || ka == kb {
		t.Errorf("keys %v %v (ok %t %t): plans of different views share a cache entry", ka, kb, ok1, ok2)
	}
}
