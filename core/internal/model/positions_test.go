package model_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/iris-vlm/iris/core/internal/ml"
	"github.com/iris-vlm/iris/core/internal/model"
)

const img = 151655 // <|image_pad|>

func TestPositions3D(t *testing.T) {
	tests := []struct {
		name  string
		ids   []int32
		grids []model.Grid
		want  model.Positions
	}{
		{
			name: "text only",
			ids:  []int32{1, 2, 3},
			want: model.Positions{T: []int32{0, 1, 2}, H: []int32{0, 1, 2}, W: []int32{0, 1, 2}},
		},
		{
			// a 4x6 patch grid is a 2x3 LLM grid: rows advance h, columns advance w, then
			// cur += max(2, 3)
			name:  "one image",
			ids:   []int32{7, 8, img, img, img, img, img, img, 9},
			grids: []model.Grid{{T: 1, H: 4, W: 6}},
			want: model.Positions{
				T:     []int32{0, 1, 2, 2, 2, 2, 2, 2, 5},
				H:     []int32{0, 1, 2, 2, 2, 3, 3, 3, 5},
				W:     []int32{0, 1, 2, 3, 4, 2, 3, 4, 5},
				Delta: 6 - 9,
			},
		},
		{
			name:  "two images",
			ids:   []int32{img, img, 5, img, img, img, img},
			grids: []model.Grid{{T: 1, H: 2, W: 4}, {T: 1, H: 4, W: 4}},
			want: model.Positions{
				T:     []int32{0, 0, 2, 3, 3, 3, 3},
				H:     []int32{0, 0, 2, 3, 3, 4, 4},
				W:     []int32{0, 1, 2, 3, 4, 3, 4},
				Delta: 5 - 7,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := model.Positions3D(tt.ids, img, tt.grids, 2)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestPositions3DErrors(t *testing.T) {
	tests := []struct {
		name  string
		ids   []int32
		grids []model.Grid
	}{
		{"run too short", []int32{1, img, img, img}, []model.Grid{{T: 1, H: 4, W: 4}}},
		{"no grid for run", []int32{1, img}, nil},
		{"grid without run", []int32{1, 2}, []model.Grid{{T: 1, H: 2, W: 2}}},
		{"odd grid", []int32{img}, []model.Grid{{T: 1, H: 3, W: 2}}},
		{"empty grid", []int32{img}, []model.Grid{{T: 0, H: 2, W: 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := model.Positions3D(tt.ids, img, tt.grids, 2)
			if !errors.Is(err, ml.ErrInvalidInput) {
				t.Errorf("err = %v, want ErrInvalidInput", err)
			}
		})
	}
}

// TestPromptPositions: a 1-D decoder gets the token index on every row and Delta 0, its
// placeholders counted over the images (in one run or several, a frame of several spans);
// a multimodal one gets Positions3D.
func TestPromptPositions(t *testing.T) {
	oneD := &model.Config{ImageTokenID: img, Text: model.TextConfig{Rope1D: true}, Vision: model.VisionConfig{MergeSize: 2}}
	mrope := &model.Config{ImageTokenID: img, Vision: model.VisionConfig{MergeSize: 2}}
	index := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(i)
		}
		return out
	}
	tests := []struct {
		name  string
		cfg   *model.Config
		ids   []int32
		grids []model.Grid
		err   bool
	}{
		{"1-D text only", oneD, []int32{1, 2, 3}, nil, false},
		{"1-D two tiles", oneD, []int32{7, img, img, img, img, img, img, img, img, 9}, []model.Grid{{T: 2, H: 4, W: 4}}, false},
		{"1-D one image in two runs", oneD, []int32{img, img, 5, img, img}, []model.Grid{{T: 1, H: 4, W: 4}}, false},
		{"1-D two images", oneD, []int32{img, 5, img, img, img, img}, []model.Grid{{T: 1, H: 2, W: 2}, {T: 1, H: 4, W: 4}}, false},
		{"1-D too few placeholders", oneD, []int32{1, img, img, img}, []model.Grid{{T: 1, H: 4, W: 4}}, true},
		{"1-D placeholders without image", oneD, []int32{1, img}, nil, true},
		{"1-D odd grid", oneD, []int32{img}, []model.Grid{{T: 1, H: 3, W: 2}}, true},
		{"multimodal", mrope, []int32{7, 8, img, img, img, img, img, img, 9}, []model.Grid{{T: 1, H: 4, W: 6}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := model.PromptPositions(tt.cfg, tt.ids, tt.grids)
			if tt.err {
				if !errors.Is(err, ml.ErrInvalidInput) {
					t.Errorf("err = %v, want ErrInvalidInput", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := model.Positions{T: index(len(tt.ids)), H: index(len(tt.ids)), W: index(len(tt.ids))}
			if !tt.cfg.Text.Rope1D {
				if want, err = model.Positions3D(tt.ids, img, tt.grids, 2); err != nil {
					t.Fatal(err)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

// countedType is a model type of this test's whose family counts an image's tokens itself: one a
// frame plus one.
const countedType = "test_counted"

func init() {
	model.RegisterConfig(countedType, model.ConfigDefaults{ImageTokens: func(_ *model.Config, im *model.Image) (int, error) {
		return im.Grid.T + 1, nil
	}})
}

// TestImageTokens: an image is Grid.Tokens(merge) placeholders for a family that registers no
// count, which then refuses patch masks (its tower would attend to the padding); a registered
// count decides otherwise, positions and checks included. Tile places are checked per frame.
func TestImageTokens(t *testing.T) {
	plain := &model.Config{ModelType: "qwen2_5_vl", ImageTokenID: img, Text: model.TextConfig{Rope1D: true}, Vision: model.VisionConfig{MergeSize: 2}}
	image := model.Image{Grid: model.Grid{T: 2, H: 4, W: 4}}
	if n, err := model.ImageTokens(plain, &image); err != nil || n != 8 {
		t.Errorf("a grid of 2x4x4 at merge 2: %d, %v; want 8", n, err)
	}
	masked := image
	masked.Masks = []model.PatchRect{{W: 4, H: 4}, {W: 2, H: 4}}
	if _, err := model.ImageTokens(plain, &masked); !errors.Is(err, ml.ErrInvalidInput) || !strings.Contains(err.Error(), "patch masks on an image of the qwen2_5_vl family") {
		t.Errorf("masks on a family that counts none: %v", err)
	}
	// a family's own count (countedType's)
	counted := *plain
	counted.ModelType = countedType
	if n, err := model.ImageTokens(&counted, &masked); err != nil || n != 3 {
		t.Errorf("the family's count: %d, %v; want 3", n, err)
	}
	if _, err := model.PromptPositionsOf(&counted, []int32{1, img, img, img, 2}, []model.Image{masked}); err != nil {
		t.Errorf("positions of 3 placeholders: %v", err)
	}
	if _, err := model.PromptPositionsOf(&counted, []int32{1, img, img, 2}, []model.Image{masked}); !errors.Is(err, ml.ErrInvalidInput) {
		t.Errorf("positions of 2 placeholders for 3: %v", err)
	}
	for _, tc := range []struct {
		name  string
		tiles []model.PatchRect
		want  string
	}{
		{"one short", []model.PatchRect{{}}, "1 tile places for 2 frames"},
		{"empty", []model.PatchRect{{}, {X: 4, W: 0, H: 4}}, "frame 1: tile place"},
		{"negative", []model.PatchRect{{}, {X: -4, W: 4, H: 4}}, "frame 1: tile place"},
	} {
		im := image
		im.Tiles = tc.tiles
		if err := im.CheckTiles(); !errors.Is(err, ml.ErrInvalidInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	image.Tiles = []model.PatchRect{{}, {X: 4, W: 4, H: 4}}
	if err := image.CheckTiles(); err != nil {
		t.Errorf("an overview and a tile: %v", err)
	}
}
