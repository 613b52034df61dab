package phi4mm

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
)

// TestPositionIDs pins the bucketised position ids against Phi4MultimodalVisionEmbeddings.forward
// (transformers 5.17, read off its position_embedding lookup): the first column's ids down the
// valid rows and the first row's along the valid columns, for full, padded and odd masks of a
// 32-patch view, and of a 6-patch view, whose torch.arange(1/6, 1, 1/6) holds a seventh-ish
// boundary of 1.0 (ceil of a float64 count); padding patches are id 0.
func TestPositionIDs(t *testing.T) {
	for _, tc := range []struct {
		side, h, w int
		rows, cols []int32
	}{
		{32, 32, 32, []int32{0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448, 480, 512, 544, 576, 608, 640, 672, 704, 736, 768, 800, 832, 864, 896, 928, 960, 992},
			[]int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31}},
		{32, 24, 32, []int32{0, 32, 64, 128, 160, 192, 256, 288, 320, 384, 416, 448, 512, 544, 576, 640, 672, 704, 768, 800, 832, 896, 928, 960},
			[]int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31}},
		{32, 7, 13, []int32{0, 128, 288, 416, 576, 704, 864}, []int32{0, 2, 4, 7, 9, 12, 14, 17, 19, 22, 24, 27, 29}},
		{32, 31, 1, []int32{0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448, 480, 512, 544, 576, 608, 640, 672, 704, 736, 768, 800, 832, 864, 896, 928, 960},
			[]int32{0}},
		{6, 6, 6, []int32{0, 6, 12, 18, 24, 30}, []int32{0, 1, 2, 3, 4, 5}},
		{6, 4, 6, []int32{0, 6, 18, 24}, []int32{0, 1, 2, 3, 4, 5}},
		{6, 1, 5, []int32{0}, []int32{0, 1, 2, 3, 4}},
		{6, 5, 1, []int32{0, 6, 12, 18, 24}, []int32{0}},
	} {
		ids := positionIDs(tc.side, model.PatchRect{W: tc.w, H: tc.h})
		var rows, cols []int32
		for y := range tc.h {
			rows = append(rows, ids[y*tc.side])
		}
		cols = append(cols, ids[:tc.w]...)
		if !slices.Equal(rows, tc.rows) || !slices.Equal(cols, tc.cols) {
			t.Errorf("side %d, mask %dx%d: rows %v cols %v\nwant rows %v cols %v", tc.side, tc.h, tc.w, rows, cols, tc.rows, tc.cols)
		}
		for y := range tc.side {
			for x := range tc.side {
				want := int32(0)
				if y < tc.h && x < tc.w {
					want = tc.rows[y] + tc.cols[x]
				}
				if ids[y*tc.side+x] != want {
					t.Fatalf("side %d, mask %dx%d: id (%d, %d) = %d, want %d", tc.side, tc.h, tc.w, y, x, ids[y*tc.side+x], want)
				}
			}
		}
	}
}

// image is an image of rows x cols crops of 32-patch views whose last column keeps w valid patch
// columns and last row h rows, placed as the plugin's plan places them.
func image(rows, cols, w, h int) model.Image {
	img := model.Image{Grid: model.Grid{T: 1 + rows*cols, H: 32, W: 32}}
	img.Masks = []model.PatchRect{{W: 32, H: 32}}
	img.Tiles = []model.PatchRect{{}}
	for r := range rows {
		for c := range cols {
			m := model.PatchRect{W: 32, H: 32}
			if c == cols-1 {
				m.W = w
			}
			if r == rows-1 {
				m.H = h
			}
			img.Masks = append(img.Masks, m)
			img.Tiles = append(img.Tiles, model.PatchRect{X: 32 * c, Y: 32 * r, W: 32, H: 32})
		}
	}
	return img
}

// TestImageTokens: num_img_tokens of the processor (families.md §4.3: 477 for 320x240, one crop
// with 24 valid patch rows) and of grids whose padded crops keep odd counts; the layouts the
// family refuses.
func TestImageTokens(t *testing.T) {
	v := &model.VisionConfig{FixedGrid: 32, MergeSize: 2}
	for _, tc := range []struct {
		name string
		img  model.Image
		want int
	}{
		{"320x240", image(1, 1, 32, 24), 12*17 + 273},
		{"448x448", image(1, 1, 32, 32), 16*17 + 273},
		{"1x3, 19 columns", image(1, 3, 19, 32), 16*(42+1) + 273},
		{"3x1, 7 rows", image(3, 1, 32, 7), 36*17 + 273},
		{"3x3, 13x27", image(3, 3, 13, 27), 46*40 + 273},
	} {
		l, err := imageLayout(v, &tc.img)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := l.tokens(); got != tc.want {
			t.Errorf("%s: %d tokens, want %d", tc.name, got, tc.want)
		}
	}
	one := image(1, 1, 32, 24)
	one.Tiles = nil
	if _, err := imageLayout(v, &one); err != nil {
		t.Errorf("one crop without places: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(img *model.Image)
		want string
	}{
		{"no crop", func(img *model.Image) { img.Grid.T, img.Masks, img.Tiles = 1, img.Masks[:1], img.Tiles[:1] }, "a global view and at least one crop"},
		{"views 16 patches high", func(img *model.Image) { img.Grid.H = 16 }, "a global view and at least one crop of 32x32"},
		{"views 16 patches wide", func(img *model.Image) { img.Grid.W = 16 }, "a global view and at least one crop of 32x32"},
		{"a mask short", func(img *model.Image) { img.Masks = img.Masks[1:] }, "masks for 7 frames"},
		{"a tile place short", func(img *model.Image) { img.Tiles = img.Tiles[1:] }, "6 tile places for 7 frames"},
		{"mask below the corner", func(img *model.Image) { img.Masks[2] = model.PatchRect{Y: 1, W: 32, H: 31} }, "view 2: patch mask"},
		{"mask right of the corner", func(img *model.Image) { img.Masks[2] = model.PatchRect{X: 1, W: 31, H: 32} }, "view 2: patch mask"},
		{"crops without places", func(img *model.Image) { img.Tiles = nil }, "6 crops without their places"},
		{"global view placed", func(img *model.Image) { img.Tiles[0] = model.PatchRect{W: 32, H: 32} }, "view 0 (the global view) placed"},
		{"a ragged grid", func(img *model.Image) {
			img.Grid.T--
			img.Masks, img.Tiles = img.Masks[:len(img.Masks)-1], img.Tiles[:len(img.Tiles)-1]
		}, "5 crops on a grid 3 crops wide"},
		{"crops out of order", func(img *model.Image) { img.Tiles[1], img.Tiles[2] = img.Tiles[2], img.Tiles[1] }, "crop 0 placed at"},
	} {
		img := image(2, 3, 32, 32)
		tc.edit(&img)
		if _, err := imageLayout(v, &img); !errors.Is(err, ml.ErrInvalidInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalidInput naming %q", tc.name, err, tc.want)
		}
	}
	// a tower the layout does not have: views of an odd side, another pooling
	for _, bad := range []model.VisionConfig{{FixedGrid: 31, MergeSize: 2}, {FixedGrid: 32, MergeSize: 3}, {FixedGrid: -32, MergeSize: 2}} {
		img := image(1, 1, 32, 32)
		if _, err := imageLayout(&bad, &img); !errors.Is(err, model.ErrUnsupported) {
			t.Errorf("tower %+v: %v, want ErrUnsupported", bad, err)
		}
	}
	// the family's count, through the config
	cfg := &model.Config{Vision: *v}
	bad := image(1, 1, 32, 32)
	bad.Grid.T = 1
	if _, err := imageTokens(cfg, &bad); !errors.Is(err, ml.ErrInvalidInput) {
		t.Errorf("imageTokens of an image without crops: %v", err)
	}
	if n, err := imageTokens(cfg, new(image(1, 1, 32, 24))); err != nil || n != 477 {
		t.Errorf("imageTokens of 320x240: %d, %v; want 477", n, err)
	}
}

// TestTowerPlan pins the HD layout of a 1x2 image whose second crop keeps 3 patch columns: the
// crops' kept cells row by row across both crops (16 + 2 a row), a sub separator after each row,
// the global separator, the global view's rows with their separators; each cell's taps in
// AvgPool2d's order.
func TestTowerPlan(t *testing.T) {
	v := &model.VisionConfig{FixedGrid: 32, MergeSize: 2}
	img := image(1, 2, 3, 32)
	l, err := imageLayout(v, &img)
	if err != nil {
		t.Fatal(err)
	}
	if l.rows != 1 || l.cols != 2 || l.usefulH != 16 || l.usefulW != 18 {
		t.Fatalf("layout %+v", l)
	}
	p := planTower(v, []model.Image{img}, []layout{l})
	P := int32(3 * 1024)
	sub, glb := P, P+1
	if p.patches != 3*1024 || p.tokens != 16*19+1+16*17 || len(p.taps) != 4*p.tokens {
		t.Fatalf("patches %d tokens %d taps %d", p.patches, p.tokens, len(p.taps))
	}
	tap := func(i int) []int32 { return p.taps[4*i : 4*i+4] }
	// token 0: crop 1 (view 1), cell (0, 0); token 16: crop 2's cell (0, 0); token 17: crop 2's
	// (0, 1), half padding; token 18: the row's separator
	for _, tc := range []struct {
		token int
		want  []int32
	}{
		{0, []int32{1024, 1025, 1056, 1057}},
		{15, []int32{1024 + 30, 1024 + 31, 1024 + 62, 1024 + 63}},
		{16, []int32{2048, 2049, 2080, 2081}},
		{17, []int32{2050, 2051, 2082, 2083}},
		{18, []int32{sub, sub, sub, sub}},
		{19, []int32{1024 + 64, 1024 + 65, 1024 + 96, 1024 + 97}},
		{16 * 19, []int32{glb, glb, glb, glb}},
		{16*19 + 1, []int32{0, 1, 32, 33}},
		{16*19 + 17, []int32{sub, sub, sub, sub}},
		{p.tokens - 1, []int32{sub, sub, sub, sub}},
	} {
		if got := tap(tc.token); !slices.Equal(got, tc.want) {
			t.Errorf("token %d: taps %v, want %v", tc.token, got, tc.want)
		}
	}
	if w := p.weights[4*18 : 4*18+4]; !slices.Equal(w, []float32{1, 0, 0, 0}) {
		t.Errorf("a separator's weights %v", w)
	}
	if w := p.weights[:4]; !slices.Equal(w, []float32{0.25, 0.25, 0.25, 0.25}) {
		t.Errorf("a cell's weights %v", w)
	}
	// the second crop keeps 3 columns: key flags 1 for columns 0-2, positions stretched
	if k := p.keys[2048 : 2048+4]; !slices.Equal(k, []int32{1, 1, 1, 0}) {
		t.Errorf("crop 2's first key flags %v", k)
	}
	if !slices.Equal(p.bounds, []int32{0, 1024, 2048, 3072}) {
		t.Errorf("bounds %v", p.bounds)
	}
}
