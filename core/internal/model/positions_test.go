package model_test

import (
	"errors"
	"reflect"
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
			imgs := make([]model.Image, len(tt.grids))
			for i, g := range tt.grids {
				imgs[i] = model.Image{Grid: g}
			}
			got, err := model.PromptPositions(tt.cfg, tt.ids, imgs)
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
