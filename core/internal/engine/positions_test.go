package engine_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/iris-vlm/iris/core/internal/engine"
	"github.com/iris-vlm/iris/core/internal/engine/fixture"
)

const img = 151655 // <|image_pad|>

// TestPositions3DGolden compares with transformers' get_rope_index on every fixture case.
func TestPositions3DGolden(t *testing.T) {
	names, err := fixture.CaseNames()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			c, err := fixture.LoadCase(name)
			if err != nil {
				t.Fatal(err)
			}
			got, err := engine.Positions3D(c.InputIDs, img, []engine.Grid{c.Grid()}, 2)
			if err != nil {
				t.Fatal(err)
			}
			want := c.Positions
			if !reflect.DeepEqual(got.T, want[0]) || !reflect.DeepEqual(got.H, want[1]) || !reflect.DeepEqual(got.W, want[2]) {
				t.Errorf("positions differ from get_rope_index")
			}
			if got.Delta != c.RopeDelta {
				t.Errorf("delta %d, want %d", got.Delta, c.RopeDelta)
			}
		})
	}
}

func TestPositions3D(t *testing.T) {
	tests := []struct {
		name  string
		ids   []int32
		grids []engine.Grid
		want  engine.Positions
	}{
		{
			name: "text only",
			ids:  []int32{1, 2, 3},
			want: engine.Positions{T: []int32{0, 1, 2}, H: []int32{0, 1, 2}, W: []int32{0, 1, 2}},
		},
		{
			// a 4x6 patch grid is a 2x3 LLM grid: rows advance h, columns advance w, then
			// cur += max(2, 3)
			name:  "one image",
			ids:   []int32{7, 8, img, img, img, img, img, img, 9},
			grids: []engine.Grid{{T: 1, H: 4, W: 6}},
			want: engine.Positions{
				T:     []int32{0, 1, 2, 2, 2, 2, 2, 2, 5},
				H:     []int32{0, 1, 2, 2, 2, 3, 3, 3, 5},
				W:     []int32{0, 1, 2, 3, 4, 2, 3, 4, 5},
				Delta: 6 - 9,
			},
		},
		{
			name:  "two images",
			ids:   []int32{img, img, 5, img, img, img, img},
			grids: []engine.Grid{{T: 1, H: 2, W: 4}, {T: 1, H: 4, W: 4}},
			want: engine.Positions{
				T:     []int32{0, 0, 2, 3, 3, 3, 3},
				H:     []int32{0, 0, 2, 3, 3, 4, 4},
				W:     []int32{0, 1, 2, 3, 4, 3, 4},
				Delta: 5 - 7,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := engine.Positions3D(tt.ids, img, tt.grids, 2)
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
		grids []engine.Grid
	}{
		{"run too short", []int32{1, img, img, img}, []engine.Grid{{T: 1, H: 4, W: 4}}},
		{"no grid for run", []int32{1, img}, nil},
		{"grid without run", []int32{1, 2}, []engine.Grid{{T: 1, H: 2, W: 2}}},
		{"odd grid", []int32{img}, []engine.Grid{{T: 1, H: 3, W: 2}}},
		{"empty grid", []int32{img}, []engine.Grid{{T: 0, H: 2, W: 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := engine.Positions3D(tt.ids, img, tt.grids, 2)
			if !errors.Is(err, engine.ErrInvalidInput) {
				t.Errorf("err = %v, want ErrInvalidInput", err)
			}
		})
	}
}
