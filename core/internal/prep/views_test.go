package prep_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/core/internal/pixels"
	"github.com/iris-vlm/iris/core/internal/prep"
	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

// viewsPlanner returns an ABI-2 plan in InternVL's shape, shrunk to 8-pixel tiles of 4-pixel
// patches: a 2×1 grid of tiles cut from one 16×8 canvas, then an 8×8 thumbnail of the image.
// Its frame has two spans, the tiles' and the thumbnail's.
func viewsPlanner() *fakePlanner {
	norm := abi.Normalize{Rescale: 1.0 / 255, Mean: [3]float64{0.485, 0.456, 0.406}, Std: [3]float64{0.229, 0.224, 0.225},
		Flavor: abi.FlavorTorchvision}
	canvas := &abi.Resize{Width: 16, Height: 8, Filter: abi.FilterBicubic, Flavor: abi.FlavorTorchvision, Antialias: true}
	thumb := &abi.Resize{Width: 8, Height: 8, Filter: abi.FilterBicubic, Flavor: abi.FlavorTorchvision, Antialias: true}
	view := func(r *abi.Resize, region *abi.Rect) abi.View {
		return abi.View{Resize: r, Region: region, Normalize: norm,
			Patches: abi.Patches{Size: 4, Temporal: 1, Merge: 2, Layout: abi.LayoutTiles},
			Grid:    abi.Grid{T: 1, H: 2, W: 2}, LLMGrid: abi.Grid{T: 1, H: 1, W: 1}, ImageTokens: 1}
	}
	return &fakePlanner{
		plan: abi.Plan{ImageTokens: 3, Views: []abi.View{
			view(canvas, &abi.Rect{X: 0, Y: 0, Width: 8, Height: 8}),
			view(canvas, &abi.Rect{X: 8, Y: 0, Width: 8, Height: 8}),
			view(thumb, nil),
		}},
		frame: abi.Frame{Before: "ab", After: "c", StopTokenIDs: []int32{7}, Spans: []abi.ImageSpan{
			{Open: []string{"<s>"}, Pad: "<p>", Count: 2},
			{Pad: "<p>", Count: 1, Close: []string{"<e>"}},
		}},
	}
}

// rasterPatches lays out img as the tiles layout says, written out longhand: patches in raster
// order, each row channel-major then the patch's pixels in raster order.
func rasterPatches(img *pixels.RGB, t *pixels.Table, size int) []float32 {
	var out []float32
	for py := range img.H / size {
		for px := range img.W / size {
			for c := range 3 {
				for y := range size {
					for x := range size {
						out = append(out, t[c][img.Pix[3*((py*size+y)*img.W+px*size+x)+c]])
					}
				}
			}
		}
	}
	return out
}

// cut copies the w×h rectangle at (x, y) of img, longhand.
func cut(img *pixels.RGB, x, y, w, h int) *pixels.RGB {
	out := pixels.NewRGB(w, h)
	for r := range h {
		copy(out.Pix[3*r*w:3*(r+1)*w], img.Pix[3*((y+r)*img.W+x):])
	}
	return out
}

// TestPrepareViews: a plan of views gives the tiles cut by hand from the canvas resized once and
// the thumbnail, in view order, as one image of Grid {T: 3, H: 2, W: 2}; a frame of two spans
// gives each span's tokens in order.
func TestPrepareViews(t *testing.T) {
	fp := viewsPlanner()
	pr, err := prep.New(prep.Config{Plugin: fp, Tokenizer: fakeTokenizer{}})
	if err != nil {
		t.Fatal(err)
	}
	src := testImage()
	table, err := pixels.Norm{Rescale: 1.0 / 255, Mean: [3]float64{0.485, 0.456, 0.406}, Std: [3]float64{0.229, 0.224, 0.225},
		Flavor: pixels.Torch}.Table()
	if err != nil {
		t.Fatal(err)
	}
	canvas := &pixels.RGB{W: 16, H: 8}
	if err := pixels.Resize(canvas, src, pixels.Torch, pixels.Bicubic); err != nil {
		t.Fatal(err)
	}
	thumb := &pixels.RGB{W: 8, H: 8}
	if err := pixels.Resize(thumb, src, pixels.Torch, pixels.Bicubic); err != nil {
		t.Fatal(err)
	}
	want := rasterPatches(cut(canvas, 0, 0, 8, 8), table, 4)
	want = append(want, rasterPatches(cut(canvas, 8, 0, 8, 8), table, 4)...)
	want = append(want, rasterPatches(thumb, table, 4)...)

	// twice: the second run reuses the first one's released buffers
	for run := range 2 {
		res, err := pr.Prepare(context.Background(), prep.Input{Image: testImage(), Question: "q"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Rows != 12 || res.Cols != 48 || !slices.Equal(res.PixelValues, want) {
			t.Fatalf("run %d: pixel values [%d, %d] differ from the tiles cut by hand", run, res.Rows, res.Cols)
		}
		if res.Grid != (abi.Grid{T: 3, H: 2, W: 2}) || res.LLMGrid != (abi.Grid{T: 3, H: 1, W: 1}) || res.ImageTokens != 3 {
			t.Errorf("grid %+v llm grid %+v tokens %d", res.Grid, res.LLMGrid, res.ImageTokens)
		}
		wantIDs := []int32{'a', 'b', 1000, 1001, 1001, 1001, 1002, 'c'}
		wantTypes := []int32{0, 0, 0, 1, 1, 1, 0, 0}
		if !slices.Equal(res.InputIDs, wantIDs) || !slices.Equal(res.MMTokenTypeIDs, wantTypes) {
			t.Errorf("ids %v types %v", res.InputIDs, res.MMTokenTypeIDs)
		}
		if !slices.Equal(res.ImageSpans, []prep.Span{{Start: 3, Len: 2}, {Start: 5, Len: 1}}) {
			t.Errorf("spans %+v", res.ImageSpans)
		}
		if len(fp.gotReq.Plan.Views) != 3 {
			t.Errorf("the frame request carried %d views, want the plan's 3", len(fp.gotReq.Plan.Views))
		}
		res.Release()
	}
}

// TestPrepareViewsPadAndCrop: a view with a crop and a pad, beside a merge_blocks view: each
// takes its own steps, in order.
func TestPrepareViewsPadAndCrop(t *testing.T) {
	fp := viewsPlanner()
	v := &fp.plan.Views[2]
	v.Crop = &abi.Rect{X: 3, Y: 2, Width: 12, Height: 9}
	v.Resize = &abi.Resize{Width: 8, Height: 6, Filter: abi.FilterBilinear, Flavor: abi.FlavorPIL, Antialias: true}
	v.Pad = &abi.Pad{Top: 1, Bottom: 1, Color: abi.RGB{1, 2, 3}}
	pr, err := prep.New(prep.Config{Plugin: fp, Tokenizer: fakeTokenizer{}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := pr.Prepare(context.Background(), prep.Input{Image: testImage(), Question: "q"})
	if err != nil {
		t.Fatal(err)
	}
	src := testImage()
	rs := &pixels.RGB{W: 8, H: 6}
	if err := pixels.Resize(rs, cut(src, 3, 2, 12, 9), pixels.PIL, pixels.Bilinear); err != nil {
		t.Fatal(err)
	}
	padded := pixels.NewRGB(8, 8)
	for i := 0; i < len(padded.Pix); i += 3 {
		copy(padded.Pix[i:i+3], []byte{1, 2, 3})
	}
	copy(padded.Pix[3*8:], rs.Pix)
	table, _ := pixels.Norm{Rescale: 1.0 / 255, Mean: [3]float64{0.485, 0.456, 0.406}, Std: [3]float64{0.229, 0.224, 0.225},
		Flavor: pixels.Torch}.Table()
	if got, want := res.PixelValues[8*48:], rasterPatches(padded, table, 4); !slices.Equal(got, want) {
		t.Error("the cropped, resized and padded view differs from the steps by hand")
	}
}

func TestPrepareViewsRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*fakePlanner)
		want string
	}{
		{"views of two grids", func(f *fakePlanner) {
			v := &f.plan.Views[2]
			v.Resize.Width, v.Resize.Height = 16, 8
			v.Grid, v.LLMGrid, v.ImageTokens = abi.Grid{T: 1, H: 2, W: 4}, abi.Grid{T: 1, H: 1, W: 2}, 2
			f.plan.ImageTokens = 4
		}, "one patch grid"},
		{"spans of two placeholders", func(f *fakePlanner) { f.frame.Spans[1].Pad = "<s>" }, "one placeholder"},
		{"unknown span token", func(f *fakePlanner) { f.frame.Spans[1].Close = []string{"<nope>"} }, "not a special token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fp := viewsPlanner()
			tc.edit(fp)
			pr, err := prep.New(prep.Config{Plugin: fp, Tokenizer: fakeTokenizer{}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = pr.Prepare(context.Background(), prep.Input{Image: testImage(), Question: "q"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
