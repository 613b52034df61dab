package core

import (
	"strings"

	"github.com/iris-vlm/iris/bundles"
)

// Box is a box or a point a grounding model's answer names, in the pixel coordinates of the
// request's image (EXIF orientation applied: the image the model saw), with the label it was given
// for.
type Box struct {
	Label string `json:"label"`
	// Box is [x1, y1, x2, y2] with x1 <= x2 and y1 <= y2; nil for a point.
	Box []float64 `json:"box,omitempty"`
	// Point is [x, y]; nil for a box.
	Point []float64 `json:"point,omitempty"`
}

// decodeBoxes reads the boxes and points of an answer's tokens under g, as LocateAnything's
// evaluation code parses its answers (Embodied/evaluation/inference_grounding_ddp.py:
// parse_bbox_with_labels, then convert_normalized_{bbox,point}_to_absolute), on token ids
// rather than text: a label between RefOpen and RefClose (its text not empty and without "<")
// owns the run of box groups right after it; a group BoxOpen ... BoxClose of exactly 2 coordinate
// tokens is a point, of exactly 4 a box, any other group (no coordinates, "None", 3 of them) names
// nothing; a run's points come before its boxes, as the reference collects them. A coordinate
// token's value v = id - CoordFirst maps to v·side/Scale, clamped to [0, side - 1]; a box's
// corners are ordered. Boxes outside a labelled run are not reported (the reference's pattern does
// not match them). label decodes a label's ids. Without g, nil.
func decodeBoxes(ids []int32, g *bundles.Grounding, w, h int, label func([]int32) string) []Box {
	if g == nil {
		return nil
	}
	out := []Box{} // a grounding answer without boxes says so: an empty list, not none
	if w < 1 || h < 1 {
		return out
	}
	for i := 0; i < len(ids); i++ {
		if ids[i] != g.RefOpen {
			continue
		}
		j := i + 1
		for j < len(ids) && ids[j] != g.RefClose && ids[j] != g.RefOpen {
			j++
		}
		if j == len(ids) || ids[j] != g.RefClose {
			continue // an unclosed label names nothing
		}
		name := label(ids[i+1 : j])
		var points, boxes []Box
		k := j + 1
		for k < len(ids) && ids[k] == g.BoxOpen {
			end := k + 1
			for end < len(ids) && ids[end] != g.BoxClose && ids[end] != g.BoxOpen && ids[end] != g.RefOpen {
				end++
			}
			if end == len(ids) || ids[end] != g.BoxClose {
				break
			}
			if b, ok := boxOf(ids[k+1:end], g, w, h); ok {
				b.Label = name
				if b.Point != nil {
					points = append(points, b)
				} else {
					boxes = append(boxes, b)
				}
			}
			k = end + 1
		}
		if name != "" && !strings.Contains(name, "<") {
			out = append(append(out, points...), boxes...)
		}
		i = k - 1
	}
	return out
}

// boxOf maps a group's coordinate tokens to a box (4) or a point (2); any other group, or one
// holding anything but coordinate tokens, names nothing.
func boxOf(group []int32, g *bundles.Grounding, w, h int) (Box, bool) {
	if len(group) != 2 && len(group) != 4 {
		return Box{}, false
	}
	v := make([]float64, len(group))
	for n, id := range group {
		if id < g.CoordFirst || id > g.CoordLast {
			return Box{}, false
		}
		side := w
		if n%2 == 1 {
			side = h
		}
		x := float64(id-g.CoordFirst) * float64(side) / g.Scale
		v[n] = max(0, min(x, float64(side-1)))
	}
	if len(v) == 2 {
		return Box{Point: v}, true
	}
	return Box{Box: []float64{min(v[0], v[2]), min(v[1], v[3]), max(v[0], v[2]), max(v[1], v[3])}}, true
}
