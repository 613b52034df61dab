package plugintest

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
)

// Suite is a family's conformance cases, stored as JSON in the family's testdata.
type Suite struct {
	Family string `json:"family"`
	// Source says where the expectations come from, e.g. the reference script that wrote them.
	Source string `json:"source,omitempty"`
	Cases  []Case `json:"cases"`
}

// Case is one image header (and params) with what the plan must say, or the refusal it must get,
// and optionally frames to build for that plan.
type Case struct {
	Name   string          `json:"name"`
	Image  abi.ImageHeader `json:"image"`
	Params map[string]any  `json:"params,omitempty"`
	// Exactly one of Want and WantError is set.
	Want      *WantPlan `json:"want,omitempty"`
	WantError string    `json:"want_error,omitempty"`
	// Reason, when set, is the reference's own error message; the refusal's message must equal it.
	Reason string      `json:"reason,omitempty"`
	Frames []FrameCase `json:"frames,omitempty"`
}

// WantPlan is what a reference processor fixes about a plan: the resize target, the patch grid
// (image_grid_thw) and the number of image tokens. Unset fields are not checked.
type WantPlan struct {
	Resize *abi.Size `json:"resize,omitempty"`
	// Grid is the whole image's patch grid: the plan's Grid, or for a plan of views (ABI 2)
	// {T: number of views, H, W of one view} (abi.Plan.ImageGrid).
	Grid        *abi.Grid `json:"grid,omitempty"`
	LLMGrid     *abi.Grid `json:"llm_grid,omitempty"`
	ImageTokens int       `json:"image_tokens,omitempty"`
	// Plan, when set, must equal the whole plan.
	Plan *abi.Plan `json:"plan,omitempty"`
	// Views, when set, are the plan's views (ABI 2) in order: their number and what each must say.
	Views []WantView `json:"views,omitempty"`
}

// WantView is what a reference processor fixes about one view of a plan: the size of the image
// its region is cut from (after crop and resize), the region (absent: all of that image), the
// patch grid and the view's image tokens. How the plan spells it (a resize to the size the image
// already has, or none) is the plugin's business.
type WantView struct {
	Resized     abi.Size  `json:"resized"`
	Region      *abi.Rect `json:"region,omitempty"`
	Grid        *abi.Grid `json:"grid,omitempty"`
	ImageTokens int       `json:"image_tokens,omitempty"`
	// Pad, when set, is the border the view adds after its region (zero sides: none, however the
	// plan spells it); its colour is compared when a side is non-zero.
	Pad *abi.Pad `json:"pad,omitempty"`
	// FloatResize, when set, is the size the view's normalised canvas is resized to in float
	// (abi.View.FloatResize); {0, 0} means the view has no float resize.
	FloatResize *abi.Size `json:"float_resize,omitempty"`
	// Mask, when set, is the view's patch mask (abi.View.PatchMask: the whole grid when the plan
	// has none).
	Mask *abi.Rect `json:"mask,omitempty"`
	// PreResize, when set, is the size of the view's first resize (abi.View.PreResize); {0, 0}
	// means the view is resized at most once.
	PreResize *abi.Size `json:"pre_resize,omitempty"`
}

// check compares the view v of a plan for an image of size src with w.
func (w *WantView) check(v *abi.View, src abi.Size) error {
	resized := v.Resized(src)
	if resized != w.Resized {
		return errorf("resized to %+v, want %+v", resized, w.Resized)
	}
	whole := abi.Rect{Width: resized.Width, Height: resized.Height}
	got, want := whole, whole
	if v.Region != nil {
		got = *v.Region
	}
	if w.Region != nil {
		want = *w.Region
	}
	if got != want {
		return errorf("region %+v, want %+v", got, want)
	}
	if w.Grid != nil && v.Grid != *w.Grid {
		return errorf("grid %+v, want %+v", v.Grid, *w.Grid)
	}
	if w.ImageTokens != 0 && v.ImageTokens != w.ImageTokens {
		return errorf("image tokens %d, want %d", v.ImageTokens, w.ImageTokens)
	}
	if w.Pad != nil {
		var got abi.Pad
		if v.Pad != nil {
			got = *v.Pad
		}
		want := *w.Pad
		if got.Top+got.Right+got.Bottom+got.Left == 0 {
			got.Color = abi.RGB{}
		}
		if want.Top+want.Right+want.Bottom+want.Left == 0 {
			want.Color = abi.RGB{}
		}
		if got != want {
			return errorf("pad %+v, want %+v", got, want)
		}
	}
	if w.FloatResize != nil {
		var got abi.Size
		if r := v.FloatResize; r != nil {
			got = abi.Size{Width: r.Width, Height: r.Height}
		}
		if got != *w.FloatResize {
			return errorf("float resize to %+v, want %+v", got, *w.FloatResize)
		}
	}
	if w.Mask != nil && v.PatchMask() != *w.Mask {
		return errorf("patch mask %+v, want %+v", v.PatchMask(), *w.Mask)
	}
	if w.PreResize != nil {
		var got abi.Size
		if r := v.PreResize; r != nil {
			got = abi.Size{Width: r.Width, Height: r.Height}
		}
		if got != *w.PreResize {
			return errorf("pre-resize to %+v, want %+v", got, *w.PreResize)
		}
	}
	return nil
}

// FrameCase is one question framed for the case's plan.
type FrameCase struct {
	Question  string `json:"question"`
	TextFirst bool   `json:"text_first"`
	// System is the client's system message, absent when it sent none.
	System *string   `json:"system,omitempty"`
	Want   abi.Frame `json:"want"`
}

// LoadSuite reads a suite file. A missing or empty file is an error: a suite that silently runs
// no case proves nothing.
func LoadSuite(path string) (*Suite, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errorf("loading suite: %w", err)
	}
	var s Suite
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, errorf("loading suite %s: %w", path, err)
	}
	if len(s.Cases) == 0 {
		return nil, errorf("loading suite %s: no cases", path)
	}
	for i, c := range s.Cases {
		if (c.Want == nil) == (c.WantError == "") {
			return nil, errorf("loading suite %s: case %d (%s) needs exactly one of want and want_error", path, i, c.Name)
		}
	}
	return &s, nil
}

// Run checks every case against r, each as a subtest, and the description's family against the
// suite's.
func (s *Suite) Run(t *testing.T, r Runner) {
	t.Helper()
	ctx := context.Background()
	d, err := r.Describe(ctx)
	if err != nil {
		t.Fatalf("describe: %v", err)
	}
	if d.Family != s.Family {
		t.Fatalf("describe: family %q, the suite is for %q", d.Family, s.Family)
	}
	for _, c := range s.Cases {
		t.Run(c.Name, func(t *testing.T) { c.run(ctx, t, r) })
	}
}

func (c *Case) run(ctx context.Context, t *testing.T, r Runner) {
	t.Helper()
	plan, err := r.Plan(ctx, abi.PlanRequest{Image: c.Image, Params: c.Params})
	if c.WantError != "" {
		var e *abi.Error
		if !errorsAs(err, &e) || e.Code != c.WantError || e.Kind != abi.Refusal {
			t.Fatalf("plan: got (%+v, %v), want refusal %q", plan.Grid, err, c.WantError)
		}
		if c.Reason != "" && e.Message != c.Reason {
			t.Errorf("refusal message %q, the reference says %q", e.Message, c.Reason)
		}
		return
	}
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	w := c.Want
	if w.Resize != nil && (plan.Resize == nil || (abi.Size{Width: plan.Resize.Width, Height: plan.Resize.Height}) != *w.Resize) {
		t.Errorf("resize: got %+v, want %+v", plan.Resize, *w.Resize)
	}
	if w.Grid != nil && plan.ImageGrid() != *w.Grid {
		t.Errorf("grid: got %+v, want %+v", plan.ImageGrid(), *w.Grid)
	}
	if w.LLMGrid != nil && plan.LLMGrid != *w.LLMGrid {
		t.Errorf("llm grid: got %+v, want %+v", plan.LLMGrid, *w.LLMGrid)
	}
	if w.ImageTokens != 0 && plan.ImageTokens != w.ImageTokens {
		t.Errorf("image tokens: got %d, want %d", plan.ImageTokens, w.ImageTokens)
	}
	if w.Views != nil {
		if len(plan.Views) != len(w.Views) {
			t.Errorf("views: got %d, want %d", len(plan.Views), len(w.Views))
		} else {
			for i := range w.Views {
				if err := w.Views[i].check(&plan.Views[i], plan.Source); err != nil {
					t.Errorf("view %d: %v", i, err)
				}
			}
		}
	}
	if w.Plan != nil && !reflect.DeepEqual(plan, *w.Plan) {
		t.Errorf("plan:\n got %+v\nwant %+v", plan, *w.Plan)
	}
	for _, fc := range c.Frames {
		f, err := r.Frame(ctx, abi.FrameRequest{Question: fc.Question, TextFirst: fc.TextFirst, Plan: plan, Params: c.Params, System: fc.System})
		if err != nil {
			t.Errorf("frame %q (text first %t): %v", fc.Question, fc.TextFirst, err)
			continue
		}
		if !reflect.DeepEqual(f, fc.Want) {
			t.Errorf("frame %q (text first %t):\n got %+v\nwant %+v", fc.Question, fc.TextFirst, f, fc.Want)
		}
	}
}
