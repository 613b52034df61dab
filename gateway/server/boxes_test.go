package server

import (
	"strings"
	"testing"

	"github.com/iris-vlm/iris/core"
)

// TestIrisBoxes: a grounding answer's boxes and points reach the iris object as the response
// and the final stream chunk write it (appendJSON); an answer of a grounding bundle that names
// none has "boxes": [], and a bundle that does not ground has no key.
func TestIrisBoxes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		boxes []core.Box
		want  string
	}{
		{"boxes", []core.Box{{Label: "white vehicle", Box: []float64{64, 120, 320, 479}}, {Label: "dog", Point: []float64{0.64, 479}}},
			`"boxes":[{"label":"white vehicle","box":[64,120,320,479]},{"label":"dog","point":[0.64,479]}]`},
		{"none found", []core.Box{}, `"boxes":[]`},
	} {
		got := string(appendJSON(nil, irisOf(&core.Result{Boxes: tc.boxes})))
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: %s, want it to hold %s", tc.name, got, tc.want)
		}
	}
	if got := string(appendJSON(nil, irisOf(&core.Result{}))); strings.Contains(got, "boxes") {
		t.Errorf("not grounding: %s", got)
	}
}
