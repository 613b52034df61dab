package models_test

import (
	"reflect"
	"testing"

	"github.com/iris-vlm/iris/core/internal/enginetest/fixture"
	"github.com/iris-vlm/iris/core/internal/model"
)

// img is Qwen2.5-VL's <|image_pad|>.
const img = 151655

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
			got, err := model.Positions3D(c.InputIDs, img, []model.Grid{c.Grid()}, 2)
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
