package core

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/iris-vlm/iris/bundles"
	"github.com/iris-vlm/iris/core/internal/enginetest/fixture"
	"github.com/iris-vlm/iris/core/internal/tokenize"
)

// laGrounding is LocateAnything's: <0>..<1000> at 151677.., <box> </box>, <ref> </ref>.
var laGrounding = &bundles.Grounding{CoordFirst: 151677, CoordLast: 152677, Scale: 1000,
	BoxOpen: 151668, BoxClose: 151669, RefOpen: 151672, RefClose: 151673}

const (
	ref, refEnd, box, boxEnd = 151672, 151673, 151668, 151669
	noneID                   = 4064 // "None"
	im                       = 151645
)

func c(v int32) int32 { return 151677 + v }

// labels stands for the tokenizer: ids below 100 are letters ('a' + id), others "<id>".
func labels(ids []int32) string {
	s := ""
	for _, id := range ids {
		if id < 100 {
			s += string('a' + id)
		} else {
			s += fmt.Sprintf("<%d>", id)
		}
	}
	return s
}

// TestDecodeBoxes reads answers as LocateAnything's evaluation parser does, on token ids, in a
// 640x480 image: coordinates are thousandths of the width (x) and the height (y), clamped to
// the last pixel, a box's corners ordered; a label owns the box groups right after it, points
// before boxes; groups of other sizes, "None", unlabelled or unclosed ones name nothing.
func TestDecodeBoxes(t *testing.T) {
	for _, tc := range []struct {
		name string
		ids  []int32
		want []Box
	}{
		{"one box", []int32{ref, 2, 0, 17, refEnd, box, c(100), c(250), c(500), c(1000), boxEnd, im},
			[]Box{{Label: "car", Box: []float64{64, 120, 320, 479}}}},
		{"a point", []int32{ref, 3, 14, 6, refEnd, box, c(1), c(999), boxEnd},
			[]Box{{Label: "dog", Point: []float64{0.64, 479}}}},
		{"corners ordered", []int32{ref, 0, refEnd, box, c(900), c(800), c(100), c(200), boxEnd},
			[]Box{{Label: "a", Box: []float64{64, 96, 576, 384}}}},
		{"a run of groups: points before boxes", []int32{ref, 0, refEnd, box, c(0), c(0), c(10), c(10), boxEnd,
			box, c(500), c(500), boxEnd, box, c(1000), c(1000), boxEnd, ref, 1, refEnd, box, c(10), c(20), boxEnd},
			[]Box{{Label: "a", Point: []float64{320, 240}}, {Label: "a", Point: []float64{639, 479}},
				{Label: "a", Box: []float64{0, 0, 6.4, 4.8}}, {Label: "b", Point: []float64{6.4, 9.6}}}},
		{"None and odd groups name nothing", []int32{ref, 0, refEnd, box, noneID, boxEnd, box, c(1), c(2), c(3), boxEnd,
			box, boxEnd, box, c(1), noneID, boxEnd, box, c(5), c(5), boxEnd},
			[]Box{{Label: "a", Point: []float64{3.2, 2.4}}}},
		{"a group after text is outside the run", []int32{ref, 0, refEnd, 7, box, c(5), c(5), boxEnd}, []Box{}},
		{"no label", []int32{box, c(5), c(5), c(6), c(6), boxEnd}, []Box{}},
		{"an empty label", []int32{ref, refEnd, box, c(5), c(5), boxEnd}, []Box{}},
		{"a label with <", []int32{ref, 0, 500, refEnd, box, c(5), c(5), boxEnd}, []Box{}},
		{"an unclosed label", []int32{ref, 0, box, c(5), c(5), boxEnd}, []Box{}},
		{"an unclosed group", []int32{ref, 0, refEnd, box, c(5), c(5)}, []Box{}},
		{"text only", []int32{7, 8, 9}, []Box{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decodeBoxes(tc.ids, laGrounding, 640, 480, labels)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
	if got := decodeBoxes([]int32{ref, 0, refEnd, box, c(5), c(5), boxEnd}, nil, 640, 480, labels); got != nil {
		t.Errorf("without grounding: %+v, want nil", got)
	}
}

// TestDecodeBoxesMatchesReference: on answers spelled out (the served golden's box_cases: their ids
// by LocateAnything's tokenizer), the runtime's reader gives exactly the boxes the model's own
// evaluation parser reads in their text (scripts/reference/golden_served_locateanything.py), with
// the label decoded by the tokenizer.
func TestDecodeBoxesMatchesReference(t *testing.T) {
	s, err := fixture.LoadServed("locateanything")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.BoxCases) < 8 {
		t.Fatalf("%d box cases", len(s.BoxCases))
	}
	tok, err := tokenize.Load(fixture.TokenizerDir("locateanything"))
	if err != nil {
		t.Fatalf("LocateAnything's tokenizer (`just setup`): %v", err)
	}
	defer tok.Close()
	for _, bc := range s.BoxCases {
		got := decodeBoxes(bc.IDs, laGrounding, bc.Width, bc.Height, tok.Decode)
		want := make([]Box, len(bc.Boxes))
		for i, b := range bc.Boxes {
			want[i] = Box{Label: b.Label, Box: b.Box, Point: b.Point}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q in %dx%d:\n got %+v\nwant %+v", bc.Text, bc.Width, bc.Height, got, want)
		}
	}
}

// TestDecodeBoxesGroundedGoldens: on the answers of the checkpoints constructed to ground
// (testdata/locateanything/grounded_{box,point}.json: the remote code's tokens, its evaluation
// parser's boxes in the original image's pixels), the runtime's reader gives the golden's boxes
// from the image's own size, and the scaling hazards fail the comparison on every case: the
// sides swapped (x scaled by the height, y by the width) and the processor's resized size (the
// grid's patches of 14) in place of the original one. The served path over HTTP is
// gateway/server's TestHTTPMatchesReference (locateanything-box, -point).
func TestDecodeBoxesGroundedGoldens(t *testing.T) {
	tok, err := tokenize.Load(fixture.TokenizerDir("locateanything"))
	if err != nil {
		t.Fatalf("LocateAnything's tokenizer (`just setup`): %v", err)
	}
	defer tok.Close()
	kinds := map[string]bool{}
	for _, file := range []string{"grounded_box.json", "grounded_point.json"} {
		s, err := fixture.LoadServedFile("locateanything", file)
		if err != nil {
			t.Fatal(err)
		}
		if s.Construction == nil || len(s.Cases) < 3 {
			t.Fatalf("%s: construction %v, %d cases", file, s.Construction, len(s.Cases))
		}
		for _, c := range s.Cases {
			want := make([]Box, len(c.Boxes))
			for i, b := range c.Boxes {
				want[i] = Box{Label: b.Label, Box: b.Box, Point: b.Point}
				kinds[fmt.Sprint(b.Box != nil, b.Point != nil)] = true
			}
			if len(want) == 0 || c.Width == c.Height {
				t.Fatalf("%s %s: %d boxes in a %dx%d image: the case exercises no scaling", file, c.Name, len(want), c.Width, c.Height)
			}
			if got := decodeBoxes(c.Tokens, laGrounding, c.Width, c.Height, tok.Decode); !reflect.DeepEqual(got, want) {
				t.Errorf("%s %s: got %+v\nwant %+v", file, c.Name, got, want)
			}
			for _, m := range []struct {
				name string
				w, h int
			}{{"sides swapped", c.Height, c.Width}, {"resized size", 14 * c.Grid[2], 14 * c.Grid[1]}} {
				if got := decodeBoxes(c.Tokens, laGrounding, m.w, m.h, tok.Decode); reflect.DeepEqual(got, want) {
					t.Errorf("%s %s: the %s (%dx%d) gives the golden's boxes %+v: the golden does not catch it", file, c.Name, m.name, m.w, m.h, got)
				}
			}
		}
	}
	if !kinds["true false"] || !kinds["false true"] {
		t.Errorf("the grounded goldens hold %v: want boxes and points", kinds)
	}
}
