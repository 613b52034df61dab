// Command lance is the Lance family plugin (ByteDance Lance-3B's understanding expert,
// github.com/bytedance/Lance at 4baeee08, the x2t image path): the official ViT transform
// (data/transforms.py VideoTransform in bucket mode: the nearest of six aspect-ratio buckets,
// torchvision's RandomResizedCrop with scale (1, 1) resizing with PIL bicubic, DivisibleCrop 28,
// to_tensor and CLIP normalisation, the image repeated to two frames) as an ABI 2 plan of one
// view, and the official x2t framing (data/system_prompt_render.py render_qwenvl_prompt with an
// empty system prompt and the image as <|video_pad|>).
// Build it as a WASI reactor: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
package main

import (
	"strings"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
	"github.com/iris-vlm/iris/sdk-wasm/vlm"
)

// Param names the plugin reads from the bundle's [plugin.params].
const (
	// ParamResolution is inference_lance.py's --resolution, which picks the ViT's bucket area
	// (validation_dataset.py: image_512res is 448², the TRTMC profile's).
	ParamResolution = "resolution"
	// ParamSystemPrompt is the system turn's text; the template always renders the turn, empty
	// by default (what the profile sends).
	ParamSystemPrompt = "system_prompt"
)

// Resolutions maps --resolution to the ViT transform's side (validation_dataset.py).
var Resolutions = map[string]int{
	"image_256res": 224, "video_192p": 224,
	"image_512res": 448,
	"image_768res": 672,
	"video_360p":   476,
	"video_480p":   616,
}

// The official ViT geometry: Qwen2.5-VL's patch 14, temporal patch 2 (the image repeated to two
// frames), 2×2 merge; DivisibleCrop(28).
const (
	DefaultResolution = "image_512res"
	PatchSize         = 14
	TemporalPatchSize = 2
	MergeSize         = 2
	Divisible         = PatchSize * MergeSize
)

// CLIP's mean and std (vit_video_transform_args).
var (
	clipMean = [3]float64{0.48145466, 0.4578275, 0.40821073}
	clipStd  = [3]float64{0.26862954, 0.26130258, 0.27577711}
)

// Special tokens of the Qwen2 vocabulary the x2t template uses.
const (
	tokIMStart     = "<|im_start|>"
	tokIMEnd       = "<|im_end|>"
	tokVisionStart = "<|vision_start|>"
	tokVisionEnd   = "<|vision_end|>"
	tokVideoPad    = "<|video_pad|>"
	// tokIDIMEnd is new_token_ids["eos_token_id"] (data_utils.add_special_tokens): the one id
	// validation_und_KVcache stops on.
	tokIDIMEnd = 151645
)

// buckets holds each resolution's buckets, computed once (Describe and Plan read only this).
var buckets = func() map[int][]Bucket {
	m := map[int][]Bucket{}
	for _, side := range Resolutions {
		if _, ok := m[side]; !ok {
			m[side] = Buckets(side)
		}
	}
	return m
}()

type family struct{}

func init() { vlm.Register(family{}) }

func main() {}

// tokenRange is the fewest and most image tokens over every resolution's buckets.
func tokenRange() (lo, hi int) {
	lo = 1 << 30
	for _, bs := range buckets {
		for _, b := range bs {
			g := Layout(b.W, b.H, []Bucket{b}, Divisible)
			n := (g.Region.Width / Divisible) * (g.Region.Height / Divisible)
			lo, hi = min(lo, n), max(hi, n)
		}
	}
	return lo, hi
}

// Describe implements vlm.Plugin.
func (family) Describe() vlm.Description {
	lo, hi := tokenRange()
	return vlm.Description{
		ABI:    2,
		Family: "lance",
		Tasks:  []string{vlm.TaskVisionLanguage},
		Params: []vlm.ParamSpec{
			{Name: ParamResolution, Type: abi.ParamString, Default: DefaultResolution,
				Doc: "inference_lance.py's --resolution: image_256res, image_512res, image_768res, video_192p, video_360p or video_480p"},
			{Name: ParamSystemPrompt, Type: abi.ParamString, Default: "",
				Doc: "the system turn's text (the turn is always rendered; empty by default)"},
		},
		Limits: vlm.Limits{MinImageTokens: lo, MaxImageTokens: hi},
	}
}

// Plan implements vlm.Plugin: one view. Crop is RandomResizedCrop's box, Resize the bucket (PIL
// bicubic), Region DivisibleCrop's centre box; to_tensor's float32 x/255 then (x − mean) / std
// in float32 is the PIL flavour's arithmetic (f32(f64(x)/255) equals f32(x)/255f for 8-bit x);
// merge-block patches of 14 with the frame twice are patchify_video_with_merge of the two
// identical frames. Every image the reference accepts is accepted: a 1×1 image is one bucket's
// upscaled crop.
func (family) Plan(img vlm.ImageHeader, params vlm.Params) (vlm.Plan, error) {
	res := params.String(ParamResolution)
	side, ok := Resolutions[res]
	if !ok {
		return vlm.Plan{}, vlm.Fail(abi.CodeInvalidParams, "resolution %q is not one of validation_dataset.py's", res)
	}
	if img.Width < 1 || img.Height < 1 {
		return vlm.Plan{}, vlm.Refuse(abi.CodeImageTooSmall, "image is %dx%d", img.Width, img.Height)
	}
	return planOf(img, Layout(img.Width, img.Height, buckets[side], Divisible)), nil
}

// planOf spells the geometry g of an image as the plan's one view.
func planOf(img vlm.ImageHeader, g Geometry) vlm.Plan {
	src := vlm.Size{Width: img.Width, Height: img.Height}
	v := vlm.View{
		Resize:    &vlm.Resize{Width: g.Bucket.W, Height: g.Bucket.H, Filter: abi.FilterBicubic, Flavor: abi.FlavorPIL, Antialias: true},
		Normalize: vlm.Normalize{Rescale: 1.0 / 255, Mean: clipMean, Std: clipStd, Flavor: abi.FlavorPIL},
		Patches:   vlm.Patches{Size: PatchSize, Temporal: TemporalPatchSize, Merge: MergeSize, Layout: abi.LayoutMergeBlocks},
		Grid:      vlm.Grid{T: 1, H: g.Region.Height / PatchSize, W: g.Region.Width / PatchSize},
	}
	if g.Crop != (abi.Rect{Width: src.Width, Height: src.Height}) {
		crop := g.Crop
		v.Crop = &crop
	}
	if g.Region != (abi.Rect{Width: g.Bucket.W, Height: g.Bucket.H}) {
		region := g.Region
		v.Region = &region
	}
	v.LLMGrid = vlm.Grid{T: 1, H: v.Grid.H / MergeSize, W: v.Grid.W / MergeSize}
	v.ImageTokens = v.LLMGrid.Cells()
	return vlm.Plan{Source: src, Views: []vlm.View{v}, ImageTokens: v.ImageTokens}
}

// Frame implements vlm.Plugin: render_qwenvl_prompt as ValidationDataset.x2t_sample calls it
// (--text_template true), cut after the assistant turn's "\n" where the answer would start:
//
//	<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n<|vision_start|><|video_pad|>×N<|vision_end|>{question}<|im_end|>\n<|im_start|>assistant\n
//
// The system turn is always there: the client's system message, else the bundle's
// system_prompt (empty by default). The x2t path renders the user turn's items in the order of
// the sample's interleave array and only the image-then-question order reaches the prompt (a
// question before the image is rendered before it is read), so a question sent before the image
// is framed after it, the one rendering the reference has. Generation stops on <|im_end|>
// only, as validation_und_KVcache does.
func (family) Frame(req vlm.FrameRequest, params vlm.Params) (vlm.Frame, error) {
	system := params.String(ParamSystemPrompt)
	if req.System != nil {
		system = *req.System
	}
	var before strings.Builder
	before.Grow(len(system) + 64)
	before.WriteString(tokIMStart + "system\n")
	before.WriteString(system)
	before.WriteString(tokIMEnd + "\n" + tokIMStart + "user\n")
	return vlm.Frame{
		Before: before.String(),
		Span: vlm.ImageSpan{Open: []string{tokVisionStart}, Pad: tokVideoPad, Count: req.Plan.ImageTokens,
			Close: []string{tokVisionEnd}},
		After:        req.Question + tokIMEnd + "\n" + tokIMStart + "assistant\n",
		StopTokenIDs: []int32{tokIDIMEnd},
		Hints:        vlm.DecodeHints{SkipSpecialTokens: true},
	}, nil
}
