// Package qwenvl is the preprocessing and prompt framing shared by the Qwen2-VL lineage
// (Qwen2.5-VL, Qwen3-VL): transformers' Qwen2VLImageProcessor geometry (smart_resize, patch
// grid, merge-block layout) and the Qwen chat framing. Each family's main package fills a
// [Family] with its constants.
package qwenvl

import (
	"math"
	"strconv"
	"strings"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
	"github.com/iris-vlm/iris/sdk-wasm/imageproc"
	"github.com/iris-vlm/iris/sdk-wasm/vlm"
)

// Param names every Qwen-VL family reads from the bundle's [plugin.params].
const (
	// ParamMinPixels is the processor's size.shortest_edge (Qwen2.5-VL's min_pixels).
	ParamMinPixels = "min_pixels"
	// ParamMaxPixels is the processor's size.longest_edge (Qwen2.5-VL's max_pixels).
	ParamMaxPixels = "max_pixels"
	// ParamSystemPrompt is the default system turn; "" leaves the system turn out.
	ParamSystemPrompt = "system_prompt"
)

// MaxAspectRatio is smart_resize's bound: it raises when max(h, w) / min(h, w) > 200.
const MaxAspectRatio = 200

// Special tokens of the Qwen2 vocabulary.
const (
	tokIMStart     = "<|im_start|>"
	tokIMEnd       = "<|im_end|>"
	tokVisionStart = "<|vision_start|>"
	tokVisionEnd   = "<|vision_end|>"
	tokImagePad    = "<|image_pad|>"
)

// Stop token ids: <|im_end|> and <|endoftext|> (generation_config eos_token_id).
const (
	tokIDIMEnd     = 151645
	tokIDEndOfText = 151643
)

// Family is one Qwen-VL family's constants: its preprocessor_config.json and chat template.
type Family struct {
	Name string
	// PatchSize, MergeSize and TemporalPatchSize are the vision encoder's (14|16, 2, 2).
	PatchSize, MergeSize, TemporalPatchSize int
	Mean, Std                               [3]float64
	// DefaultMinPixels and DefaultMaxPixels are the hub preprocessor's size bounds.
	DefaultMinPixels, DefaultMaxPixels int
	// DefaultSystemPrompt is the chat template's default system turn ("" for none).
	DefaultSystemPrompt string
}

// Factor is the side every resized dimension is a multiple of: patch size × merge size.
func (f *Family) Factor() int { return f.PatchSize * f.MergeSize }

// Describe implements vlm.Plugin.
func (f *Family) Describe() vlm.Description {
	minTok, _ := f.tokensAt(f.DefaultMinPixels)
	maxTok, _ := f.tokensAt(f.DefaultMaxPixels)
	return vlm.Description{
		Family: f.Name,
		Tasks:  []string{vlm.TaskVisionLanguage},
		Params: []vlm.ParamSpec{
			{Name: ParamMinPixels, Type: abi.ParamInt, Default: f.DefaultMinPixels,
				Doc: "smallest resized area in pixels (processor size.shortest_edge)"},
			{Name: ParamMaxPixels, Type: abi.ParamInt, Default: f.DefaultMaxPixels,
				Doc: "largest resized area in pixels (processor size.longest_edge)"},
			{Name: ParamSystemPrompt, Type: abi.ParamString, Default: f.DefaultSystemPrompt,
				Doc: "system turn inserted before the user turn; empty for none"},
		},
		Limits: vlm.Limits{MaxAspectRatio: MaxAspectRatio, MinImageTokens: minTok, MaxImageTokens: maxTok},
	}
}

// tokensAt bounds the image tokens of an area: every resized area is a whole number of
// factor×factor cells, each worth one token.
func (f *Family) tokensAt(pixels int) (int, bool) {
	cell := f.Factor() * f.Factor()
	return pixels / cell, pixels%cell == 0
}

// Plan implements vlm.Plugin: transformers' Qwen2VLImageProcessor (torchvision backend).
func (f *Family) Plan(img vlm.ImageHeader, params vlm.Params) (vlm.Plan, error) {
	minPixels, maxPixels := params.Int(ParamMinPixels), params.Int(ParamMaxPixels)
	if minPixels <= 0 || maxPixels < minPixels {
		return vlm.Plan{}, vlm.Fail(abi.CodeInvalidParams, "want 0 < min_pixels <= max_pixels, got %d and %d", minPixels, maxPixels)
	}
	if img.Width < 1 || img.Height < 1 {
		return vlm.Plan{}, vlm.Refuse(abi.CodeImageTooSmall, "image is %dx%d", img.Width, img.Height)
	}
	h, w, err := SmartResize(img.Height, img.Width, f.Factor(), minPixels, maxPixels)
	if err != nil {
		return vlm.Plan{}, err
	}
	grid := vlm.Grid{T: 1, H: h / f.PatchSize, W: w / f.PatchSize}
	llm := vlm.Grid{T: 1, H: grid.H / f.MergeSize, W: grid.W / f.MergeSize}
	return vlm.Plan{
		Source: vlm.Size{Width: img.Width, Height: img.Height},
		Resize: &vlm.Resize{Width: w, Height: h, Filter: abi.FilterBicubic,
			Flavor: abi.FlavorTorchvision, Antialias: true},
		Normalize: vlm.Normalize{Rescale: 1.0 / 255, Mean: f.Mean, Std: f.Std, Flavor: abi.FlavorTorchvision},
		Patches: vlm.Patches{Size: f.PatchSize, Temporal: f.TemporalPatchSize, Merge: f.MergeSize,
			Layout: abi.LayoutMergeBlocks},
		Grid:        grid,
		LLMGrid:     llm,
		ImageTokens: llm.Cells(),
	}, nil
}

// SmartResize is transformers' qwen2_vl smart_resize(height, width, factor, min_pixels,
// max_pixels), operation for operation in float64 with Python's rounding, returning the resized
// (height, width). Like the reference it refuses aspect ratios over 200 and nothing else: tiny
// images are scaled up to min_pixels (a 28×28 image becomes 56×56 at the Qwen2.5-VL defaults).
func SmartResize(height, width, factor, minPixels, maxPixels int) (int, int, error) {
	if r := imageproc.AspectRatio(width, height); r > MaxAspectRatio {
		return 0, 0, vlm.Refuse(abi.CodeAspectRatioTooExtreme,
			"absolute aspect ratio must be smaller than %d, got %s", MaxAspectRatio, pyFloat(r))
	}
	hBar := imageproc.Round(imageproc.Div(height, factor)) * factor
	wBar := imageproc.Round(imageproc.Div(width, factor)) * factor
	if hBar*wBar > maxPixels {
		beta := math.Sqrt(imageproc.Div(height*width, maxPixels))
		hBar = max(factor, imageproc.Floor(float64(height)/beta/float64(factor))*factor)
		wBar = max(factor, imageproc.Floor(float64(width)/beta/float64(factor))*factor)
	} else if hBar*wBar < minPixels {
		beta := math.Sqrt(imageproc.Div(minPixels, height*width))
		hBar = imageproc.Ceil(float64(height)*beta/float64(factor)) * factor
		wBar = imageproc.Ceil(float64(width)*beta/float64(factor)) * factor
	}
	return hBar, wBar, nil
}

// pyFloat formats a float64 as Python's repr does below 1e16: the shortest digits that round-trip,
// with a ".0" on whole numbers.
func pyFloat(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// Frame implements vlm.Plugin: the Qwen chat template with an optional system turn, one user
// turn holding the image and the question in the order the client sent them, and the generation
// prompt. The client's system message, when sent, is the system turn (even an empty one, as the
// templates render it); otherwise the bundle's system_prompt is, and "" leaves the turn out.
// That is both templates: Qwen2.5-VL's default system turn is replaced by a system message, and
// Qwen3-VL has none by default.
func (f *Family) Frame(req vlm.FrameRequest, params vlm.Params) (vlm.Frame, error) {
	system := params.String(ParamSystemPrompt)
	hasSystem := system != ""
	if req.System != nil {
		system, hasSystem = *req.System, true
	}
	var before strings.Builder
	if hasSystem {
		before.WriteString(tokIMStart + "system\n" + system + tokIMEnd + "\n")
	}
	before.WriteString(tokIMStart + "user\n")
	after := tokIMEnd + "\n" + tokIMStart + "assistant\n"
	if req.TextFirst {
		before.WriteString(req.Question)
	} else {
		after = req.Question + after
	}
	return vlm.Frame{
		Before: before.String(),
		Span: vlm.ImageSpan{
			Open:  []string{tokVisionStart},
			Pad:   tokImagePad,
			Count: req.Plan.ImageTokens,
			Close: []string{tokVisionEnd},
		},
		After:        after,
		StopTokenIDs: []int32{tokIDIMEnd, tokIDEndOfText},
		Hints:        vlm.DecodeHints{SkipSpecialTokens: true},
	}, nil
}
