// Command views is an ABI-2 test plugin built with the SDK: it answers with a plan of views (a
// canvas cut into tiles, then a thumbnail, InternVL's shape) and a frame of image spans. Its
// "mode" param picks a well-formed answer or one the host must refuse whatever the plugin says;
// its "tiles" param how many tiles the canvas has (1 to 8, in one row).
//
// The tests of core/internal/plugin (the host's abuse checks) and of core (the runtime path of a
// v2 plan, with the tiny Qwen2.5-VL tokenizer's special tokens) load it.
package main

import (
	"fmt"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
	"github.com/iris-vlm/iris/sdk-wasm/vlm"
)

type views struct{}

func (views) Describe() vlm.Description {
	return vlm.Description{
		ABI:    2,
		Family: "views",
		Tasks:  []string{vlm.TaskVisionLanguage},
		Params: []vlm.ParamSpec{
			{Name: "mode", Type: abi.ParamString, Default: "ok"},
			{Name: "tiles", Type: abi.ParamInt, Default: 2},
		},
		Limits: vlm.Limits{MinImageTokens: 2, MaxImageTokens: 36},
	}
}

var norm = vlm.Normalize{Rescale: 1.0 / 255, Mean: [3]float64{0.48145466, 0.4578275, 0.40821073},
	Std: [3]float64{0.26862954, 0.26130258, 0.27577711}, Flavor: abi.FlavorTorchvision}

// tile is a 56×56 view: a 4×4 grid of 14-pixel patches, 2×2 tokens. The layout is
// merge_blocks with temporal 2, so that Qwen2.5-VL's vision tower can run the views as the
// frames of one grid.
func tile(r *vlm.Resize, region *vlm.Rect) vlm.View {
	return vlm.View{Resize: r, Region: region, Normalize: norm,
		Patches: vlm.Patches{Size: 14, Temporal: 2, Merge: 2, Layout: abi.LayoutMergeBlocks},
		Grid:    vlm.Grid{T: 1, H: 4, W: 4}, LLMGrid: vlm.Grid{T: 1, H: 2, W: 2}, ImageTokens: 4}
}

func resize(w, h int) *vlm.Resize {
	return &vlm.Resize{Width: w, Height: h, Filter: abi.FilterBicubic, Flavor: abi.FlavorTorchvision, Antialias: true}
}

func okPlan(img vlm.ImageHeader, n int) vlm.Plan {
	p := vlm.Plan{Source: vlm.Size{Width: img.Width, Height: img.Height}}
	canvas := resize(56*n, 56)
	for i := range n {
		p.Views = append(p.Views, tile(canvas, &vlm.Rect{X: 56 * i, Y: 0, Width: 56, Height: 56}))
	}
	if n > 1 {
		p.Views = append(p.Views, tile(resize(56, 56), nil))
	}
	for _, v := range p.Views {
		p.ImageTokens += v.ImageTokens
	}
	return p
}

func (views) Plan(img vlm.ImageHeader, params vlm.Params) (vlm.Plan, error) {
	n := params.Int("tiles")
	if n < 1 || n > 8 {
		return vlm.Plan{}, vlm.Refuse("bad_tiles", "tiles %d is not in [1, 8]", n)
	}
	p := okPlan(img, n)
	switch mode := params.String("mode"); mode {
	case "ok", "one_span", "spans_sum", "span_pads":
	case "too_many_views": // 65 views of one token each: every view is fine, their number is not
		p.Views, p.ImageTokens = nil, 0
		for range abi.MaxViews + 1 {
			p.Views = append(p.Views, tile(resize(56, 56), nil))
			p.ImageTokens += 4
		}
	case "huge_views": // 64 views of 7168² pixels: each within the side limit, 3.3 G pixels together
		p.Views, p.ImageTokens = nil, 0
		for range abi.MaxViews {
			v := tile(resize(7168, 7168), nil)
			v.Patches = vlm.Patches{Size: 56, Temporal: 1, Merge: 8, Layout: abi.LayoutTiles}
			v.Grid, v.LLMGrid, v.ImageTokens = vlm.Grid{T: 1, H: 128, W: 128}, vlm.Grid{T: 1, H: 16, W: 16}, 256
			p.Views = append(p.Views, v)
			p.ImageTokens += 256
		}
	case "too_many_tokens": // the tokens a plugin claims are recounted from the views
		p.ImageTokens = abi.MaxImageTokens + 1
	case "token_sum":
		p.ImageTokens++
	case "region_outside": // the last tile reaches one pixel past the canvas
		p.Views[n-1].Region.X = 56*n - 55
	case "mixed_grids": // a thumbnail twice the tiles' size: valid ABI, but not one grid
		th := &p.Views[len(p.Views)-1]
		th.Resize = resize(112, 112)
		th.Grid, th.LLMGrid, th.ImageTokens = vlm.Grid{T: 1, H: 8, W: 8}, vlm.Grid{T: 1, H: 4, W: 4}, 16
		p.ImageTokens += 12
	case "single_fields_too":
		p.Grid = vlm.Grid{T: 1, H: 4, W: 4}
	case "tiles_temporal":
		for i := range p.Views {
			p.Views[i].Patches.Layout = abi.LayoutTiles
		}
	case "masked": // wire minor 3, well formed: the thumbnail resized in float from a canvas
		// padded white, the last tile masked to its first patch row, 3 separator tokens
		th := &p.Views[len(p.Views)-1]
		th.Pad = &vlm.Pad{Bottom: 56, Color: vlm.RGB{255, 255, 255}}
		th.FloatResize = &vlm.Resize{Width: 56, Height: 56, Filter: abi.FilterBicubic, Flavor: abi.FlavorTorchvision}
		last := &p.Views[n-1]
		last.Mask, last.ImageTokens = &vlm.Rect{Width: 4, Height: 1}, 2
		p.SeparatorTokens = 3
		p.ImageTokens += 3 - 2
	case "mask_outside": // a mask a patch wider than the grid
		p.Views[0].Mask = &vlm.Rect{Width: 5, Height: 4}
	case "mask_tokens": // a mask that keeps 2 cells, the tokens of the whole grid
		p.Views[0].Mask = &vlm.Rect{Width: 4, Height: 1}
	case "float_antialias": // the host's float resize has no antialiasing
		p.Views[0].FloatResize = &vlm.Resize{Width: 56, Height: 56, Filter: abi.FilterBicubic, Flavor: abi.FlavorTorchvision, Antialias: true}
	case "separators_sum": // separator tokens the image tokens leave out
		p.SeparatorTokens = 3
	default:
		return vlm.Plan{}, fmt.Errorf("unknown mode %q", mode)
	}
	return p, nil
}

// Frame puts the tiles in one span and the thumbnail in another (InternVL-style tokens spelled
// with the tiny Qwen tokenizer's specials), or everything in one span in mode one_span.
func (views) Frame(req vlm.FrameRequest, params vlm.Params) (vlm.Frame, error) {
	f := vlm.Frame{
		Before:       "<|im_start|>user\n",
		After:        req.Question + "<|im_end|>\n<|im_start|>assistant\n",
		StopTokenIDs: []int32{151645},
	}
	views := req.Plan.Views
	thumb := views[len(views)-1].ImageTokens
	if len(views) == 1 {
		thumb = 0
	}
	tiles := req.Plan.ImageTokens - thumb
	switch params.String("mode") {
	case "one_span":
		f.Span = vlm.ImageSpan{Open: []string{"<|vision_start|>"}, Pad: "<|image_pad|>", Count: req.Plan.ImageTokens,
			Close: []string{"<|vision_end|>"}}
		return f, nil
	case "spans_sum":
		tiles++
	}
	f.Spans = []vlm.ImageSpan{{Open: []string{"<|vision_start|>"}, Pad: "<|image_pad|>", Count: tiles, Close: []string{"<|vision_end|>"}}}
	if thumb > 0 {
		f.Spans = append(f.Spans, vlm.ImageSpan{Open: []string{"<|vision_start|>"}, Pad: "<|image_pad|>", Count: thumb,
			Close: []string{"<|vision_end|>"}})
	}
	if params.String("mode") == "span_pads" {
		f.Spans[len(f.Spans)-1].Pad = "<|video_pad|>"
	}
	return f, nil
}

func init() { vlm.Register(views{}) }

func main() {}
