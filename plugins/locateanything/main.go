// Command locateanything is the LocateAnything-3B family plugin: the remote-code
// LocateAnythingImageProcessor (PIL bicubic to multiples of 28, shrunk first when the image is
// past in_token_limit patches; x/255 then (x − 0.5)/0.5; raster patches of 14) as one view of
// wire minor 4, and the framing of the checkpoint's chat_template.json followed by the processor's
// replace_media_placeholder (<image 1><img><IMG_CONTEXT>×N</img>).
// Build it as a WASI reactor: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
package main

import (
	"math"
	"strings"

	"github.com/iris-vlm/iris/sdk-wasm/abi"
	"github.com/iris-vlm/iris/sdk-wasm/vlm"
)

// Param names the plugin reads from the bundle's [plugin.params].
const (
	// ParamInTokenLimit is preprocessor_config.json's in_token_limit: the most patches of 14
	// (counted on the source, w//14 · h//14) before the image is shrunk.
	ParamInTokenLimit = "in_token_limit"
	// ParamFixedSize, when positive, replaces the dynamic geometry by one PIL bicubic resize to
	// fixed_size × fixed_size (448: the fixed single-tile contract of the upstream TRTMC profile).
	ParamFixedSize = "fixed_size"
	// ParamSystemPrompt is the system turn the chat template inserts when the conversation has
	// none.
	ParamSystemPrompt = "system_prompt"
)

// Constants of the checkpoint's preprocessor_config.json and processor_config.json (patch_size
// 14, merge_kernel_size [2, 2], in_token_limit 25600: the class default is 4096) and of
// MoonViT's 2-D rotary table (512×512 positions: the processor refuses a grid side of 512).
const (
	PatchSize         = 14
	MergeSize         = 2
	Factor            = PatchSize * MergeSize
	DefaultTokenLimit = 25600
	// MaxGridSide is the first grid side the processor refuses ("Exceed pos emb").
	MaxGridSide = 512
	// DefaultSystemPrompt is chat_template.json's system turn when the conversation has none.
	DefaultSystemPrompt = "You are a helpful assistant."
	// DefaultMaxTokens is the largest image span at the default token limit, counted over every
	// image up to 32768×32768 by scripts/reference/golden_locateanything.py (a 740×7105 image:
	// its shrink to 729×7001 still holds 52·500 = 26000 patches, since the scale is computed from
	// the floored patch counts, and the stretch makes 756×7028, 27·251 tokens).
	DefaultMaxTokens = 6777
	// maxFixedSize keeps a fixed geometry's grid under MaxGridSide.
	maxFixedSize = (MaxGridSide - 1) / MergeSize * Factor
)

// Special tokens of the LocateAnything vocabulary (Qwen2.5's and the checkpoint's added tokens).
const (
	tokIMStart    = "<|im_start|>"
	tokIMEnd      = "<|im_end|>"
	tokImgOpen    = "<img>"
	tokImgClose   = "</img>"
	tokImgContext = "<IMG_CONTEXT>"
	// imageTag is what replace_media_placeholder writes before <img>: plain text, tokenised by
	// the BPE (add_vision_id is off, so the template writes only the <image-1> it replaces).
	imageTag = "<image 1>"
	// tokIDIMEnd is <|im_end|>, the only stop of the official slow (autoregressive) mode.
	tokIDIMEnd = 151645
)

var half = [3]float64{0.5, 0.5, 0.5}

type family struct{}

func init() { vlm.Register(family{}) }

func main() {}

// Describe implements vlm.Plugin.
func (family) Describe() vlm.Description {
	return vlm.Description{
		ABI:    2,
		Family: "locateanything",
		Tasks:  []string{vlm.TaskVisionLanguage},
		Params: []vlm.ParamSpec{
			{Name: ParamInTokenLimit, Type: abi.ParamInt, Default: DefaultTokenLimit,
				Doc: "most patches of 14 before the image is shrunk (preprocessor_config.json's in_token_limit)"},
			{Name: ParamFixedSize, Type: abi.ParamInt, Default: 0,
				Doc: "when positive, a multiple of 28: one bicubic resize to this square (448: the TRTMC profile's geometry); 0 for the processor's"},
			{Name: ParamSystemPrompt, Type: abi.ParamString, Default: DefaultSystemPrompt,
				Doc: "system turn when the client sends none (the chat template's)"},
		},
		Limits: vlm.Limits{MinImageTokens: 1, MaxImageTokens: DefaultMaxTokens},
	}
}

// Geometry is what LocateAnythingImageProcessor.rescale does to a W×H image: Shrunk is the size
// after the token-limit shrink (the source size when there is none), Target the size after the
// stretch to multiples of 28, computed from Shrunk.
type Geometry struct {
	Shrunk, Target vlm.Size
}

// Grid is the patch grid of the target, in patches of 14.
func (g Geometry) Grid() vlm.Grid {
	return vlm.Grid{T: 1, H: g.Target.Height / PatchSize, W: g.Target.Width / PatchSize}
}

// Tokens is the image span: one token per 2×2 patches.
func (g Geometry) Tokens() int {
	return (g.Target.Width / Factor) * (g.Target.Height / Factor)
}

// Rescale is LocateAnythingImageProcessor.rescale's geometry for a w×h image and a token limit,
// operation for operation: if (w//14)·(h//14) > limit, scale = sqrt(limit / that) in float64 and
// the image becomes int(w·scale)×int(h·scale); the target is that size rounded up to multiples of
// 28. It refuses what the reference cannot process: a shrink to an empty side (PIL's resize
// raises) and a grid side of 512 patches or more (the processor's "Exceed pos emb").
func Rescale(w, h, limit int) (Geometry, error) {
	g := Geometry{Shrunk: vlm.Size{Width: w, Height: h}}
	if patches := (w / PatchSize) * (h / PatchSize); patches > limit {
		scale := math.Sqrt(float64(limit) / float64(patches))
		g.Shrunk = vlm.Size{Width: int(float64(w) * scale), Height: int(float64(h) * scale)}
		if g.Shrunk.Width < 1 || g.Shrunk.Height < 1 {
			return Geometry{}, vlm.Refuse(abi.CodeAspectRatioTooExtreme,
				"a %dx%d image shrunk under %d patches is %dx%d, an empty side", w, h, limit, g.Shrunk.Width, g.Shrunk.Height)
		}
	}
	g.Target = vlm.Size{Width: ceilTo(g.Shrunk.Width, Factor), Height: ceilTo(g.Shrunk.Height, Factor)}
	if grid := g.Grid(); grid.W >= MaxGridSide || grid.H >= MaxGridSide {
		return Geometry{}, vlm.Refuse(abi.CodeAspectRatioTooExtreme,
			"Exceed pos emb: a %dx%d image becomes %dx%d, %dx%d patches; MoonViT's positions stop at %d a side",
			w, h, g.Target.Width, g.Target.Height, grid.W, grid.H, MaxGridSide-1)
	}
	return g, nil
}

// ceilTo rounds n up to a multiple of m (math.ceil(n / m) * m on positive ints: exact in float64
// for any side a plan can name).
func ceilTo(n, m int) int { return (n + m - 1) / m * m }

// Plan implements vlm.Plugin: one view, resized once or twice with PIL's bicubic, normalised
// as ToTensor then Normalize(0.5, 0.5) do it (x/255 in float32, then (x − 0.5)/0.5: the PIL
// flavour's arithmetic), cut into raster patches of 14, 2×2 of them to a token.
func (family) Plan(img vlm.ImageHeader, params vlm.Params) (vlm.Plan, error) {
	limit, fixed := params.Int(ParamInTokenLimit), params.Int(ParamFixedSize)
	if limit < 1 {
		return vlm.Plan{}, vlm.Fail(abi.CodeInvalidParams, "want in_token_limit >= 1, got %d", limit)
	}
	if fixed < 0 || fixed%Factor != 0 || fixed > maxFixedSize {
		return vlm.Plan{}, vlm.Fail(abi.CodeInvalidParams, "want fixed_size 0 or a multiple of %d up to %d, got %d", Factor, maxFixedSize, fixed)
	}
	if img.Width < 1 || img.Height < 1 {
		return vlm.Plan{}, vlm.Refuse(abi.CodeImageTooSmall, "image is %dx%d", img.Width, img.Height)
	}
	src := vlm.Size{Width: img.Width, Height: img.Height}
	var g Geometry
	if fixed > 0 {
		g = Geometry{Shrunk: src, Target: vlm.Size{Width: fixed, Height: fixed}}
	} else {
		var err error
		if g, err = Rescale(img.Width, img.Height, limit); err != nil {
			return vlm.Plan{}, err
		}
	}
	v := vlm.View{
		Normalize: vlm.Normalize{Rescale: 1.0 / 255, Mean: half, Std: half, Flavor: abi.FlavorPIL},
		Patches:   vlm.Patches{Size: PatchSize, Temporal: 1, Merge: MergeSize, Layout: abi.LayoutTiles},
		Grid:      g.Grid(),
	}
	v.LLMGrid = vlm.Grid{T: 1, H: v.Grid.H / MergeSize, W: v.Grid.W / MergeSize}
	v.ImageTokens = g.Tokens()
	// PIL returns a copy for a resize to the image's own size: the reference skips it too
	if g.Target != g.Shrunk {
		v.Resize = bicubic(g.Target)
	}
	if g.Shrunk != src {
		if v.Resize == nil {
			v.Resize = bicubic(g.Shrunk)
		} else {
			v.PreResize = bicubic(g.Shrunk)
		}
	}
	return vlm.Plan{Source: src, Views: []vlm.View{v}, ImageTokens: v.ImageTokens}, nil
}

func bicubic(s vlm.Size) *vlm.Resize {
	return &vlm.Resize{Width: s.Width, Height: s.Height, Filter: abi.FilterBicubic, Flavor: abi.FlavorPIL, Antialias: true}
}

// Frame implements vlm.Plugin: chat_template.json with one user turn holding the image and the
// question in the order the client sent them, then the generation prompt. The template writes a
// system turn only when the conversation has none, "You are a helpful assistant." (the bundle's
// system_prompt); a client's system message (even an empty one) is that turn instead. The image
// is the processor's <image 1><img>, <IMG_CONTEXT> × N, </img>. Generation stops on <|im_end|>
// (the official slow mode's only stop). The answer keeps its special tokens (the official
// decode passes skip_special_tokens=False): the coordinate tokens <0>..<1000> are the answer.
//
// The worker's own py_apply_chat_template writes "...assistant.\n<|im_end|>" (one more newline);
// the processor's chat template, which locate-anything.cpp follows too, is what is framed here.
func (family) Frame(req vlm.FrameRequest, params vlm.Params) (vlm.Frame, error) {
	system := params.String(ParamSystemPrompt)
	if req.System != nil {
		system = *req.System
	}
	var before strings.Builder
	before.WriteString(tokIMStart + "system\n" + system + tokIMEnd + "\n" + tokIMStart + "user\n")
	after := tokIMEnd + "\n" + tokIMStart + "assistant\n"
	if req.TextFirst {
		before.WriteString(req.Question)
	} else {
		after = req.Question + after
	}
	before.WriteString(imageTag)
	return vlm.Frame{
		Before: before.String(),
		Span: vlm.ImageSpan{
			Open:  []string{tokImgOpen},
			Pad:   tokImgContext,
			Count: req.Plan.ImageTokens,
			Close: []string{tokImgClose},
		},
		After:        after,
		StopTokenIDs: []int32{tokIDIMEnd},
		Hints:        vlm.DecodeHints{SkipSpecialTokens: false},
	}, nil
}
